"""Pod affinity's namespaceSelector on the real control plane: the real scheduler matches it against
the namespaces' labels, and `explain` (live), `status` and `rebalance` predict what it does.

`ledger` pods (app=ledger) run in a namespace labelled team=payments. A pod that must run beside
one of them, on its host, through a namespaceSelector:
- `team: payments` selects the namespace by a label other than its name: only the Namespace
  objects tell it, so a prediction that does not read them finds no ledger and says Pending;
- `NotIn` and `DoesNotExist` selectors: kube-scheduler 1.34 to 1.36 match the pod's own selector
  against nil labels (interpodaffinity/plugin.go mergeAffinityTermNamespacesIfNotEmpty takes the
  term by value, the selector stays), so they select every namespace, payments too, and the pod
  joins its ledger; 1.37 selects only the namespaces the selector lists, and the pod is Pending.
  Expectations that differ by release compare `cluster.minor`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.controlplane import Cluster
from tests.e2e.conftest import cli
from tests.e2e.test_rebalance import bound_replacement
from tests.e2e.test_status import LABELS, deployment, node, pods_of, run_all
from tests.fixtures import REPO
from webhook import placement
from webhook.scheduler.plugins.netqos import NETQOS_TARGET

HOST = "kubernetes.io/hostname"
NO_POD_AFFINITY = "node(s) didn't match pod affinity rules"
PAYMENTS = {"matchLabels": {"team": "payments"}}
POLICY = str(REPO / "deploy/base/policy.yaml")
UNMERGED_RELEASES = ("1.34", "1.35", "1.36")  # the pod's own selector also matches nil labels


@pytest.fixture
def payments(cluster: Cluster, namespace: str) -> Iterator[str]:
    """A namespace labelled team=payments (its name is the test's namespace's, plus -payments)."""
    name = f"{namespace}-payments"
    cluster.create_namespace(name)
    code, body = cluster.request(
        "PATCH",
        f"/api/v1/namespaces/{name}",
        {"metadata": {"labels": {"team": "payments"}}},
        "application/merge-patch+json",
    )
    assert code == 200, body
    yield name
    cluster.delete_namespace(name)


def ledger(node_name: str) -> dict[str, Any]:
    """A ledger pod bound to `node_name` (spec.nodeName: no scheduling)."""
    container = {"name": "db", "image": "registry.k8s.io/pause:3.10"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"ledger-{node_name}", "labels": {"app": "ledger"}},
        "spec": {"nodeName": node_name, "containers": [container]},
    }


def beside_ledger(namespace_selector: dict[str, Any]) -> dict[str, Any]:
    """Required pod affinity: on the host of an app=ledger pod of the namespaces selected."""
    term = {"labelSelector": {"matchLabels": {"app": "ledger"}}, "namespaceSelector": namespace_selector}
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{**term, "topologyKey": HOST}]}}


def checkout(affinity: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    container = {"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "checkout", "labels": labels},
        "spec": {"affinity": affinity, "containers": [container]},
    }


def run_ledgers(cluster: Cluster, namespace: str, *node_names: str) -> None:
    run_all(cluster, [cluster.create(ledger(name), namespace) for name in node_names])


def wait_cache(cluster: Cluster, timeout: float = 60) -> None:
    """Until the scheduler's cache holds every pod the API server has bound, none assumed: the
    ledgers are there before a pod that needs them is scheduled."""
    deadline = time.monotonic() + timeout
    while True:
        bound = len(cluster.get("/api/v1/pods?fieldSelector=spec.nodeName%21%3D")["items"])
        have = cluster.scheduler_cache()
        if have.get("pods") == bound and not have.get("assumed_pods"):
            return
        assert time.monotonic() < deadline, f"the scheduler's cache holds {have}, the API server {bound} bound pods"
        time.sleep(0.2)


def explained(cluster: Cluster, pod: dict[str, Any], namespace: str, tmp_path: Path) -> dict[str, Any]:
    """`explain --kubeconfig` of the pod as written (live: the cluster's nodes, pods, namespaces)."""
    path = tmp_path / "pod.json"
    path.write_text(json.dumps({**pod, "metadata": {**pod["metadata"], "namespace": namespace}}))
    report: dict[str, Any] = json.loads(cli(cluster, "explain", "--pod", str(path), "-o", "json").stdout)
    return report


def scheduled(cluster: Cluster, namespace: str, name: str, timeout: float = 30) -> str | None:
    """The node the scheduler bound the pod to; None once it found none for it (PodScheduled
    False, Unschedulable), for want of a pod to join."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = cluster.pod(namespace, name) or {}
        if pod.get("spec", {}).get("nodeName"):
            return str(pod["spec"]["nodeName"])
        for condition in pod.get("status", {}).get("conditions") or ():
            if condition["type"] == "PodScheduled" and condition.get("reason") == "Unschedulable":
                assert NO_POD_AFFINITY in condition.get("message", ""), condition
                return None
        time.sleep(0.2)
    raise AssertionError(f"pod {namespace}/{name} neither bound nor unschedulable within {timeout:.0f} s")


def test_a_namespace_selected_by_its_labels_places_the_pod_beside_its_pods_as_explain_predicts(
    cluster: Cluster, registered, namespace: str, payments: str, nodes, tmp_path: Path
) -> None:
    cluster.create(node("slow-1", "low"))
    cluster.create(node("fast-1", "high"))
    run_ledgers(cluster, payments, "slow-1")
    wait_cache(cluster)
    pod = checkout(beside_ledger(PAYMENTS), {**LABELS, "app": "checkout"})  # net=high preferred, too
    report = explained(cluster, pod, namespace, tmp_path)
    cluster.create(pod, namespace)
    assert cluster.wait_bound(namespace, "checkout") == "slow-1"
    assert report["predicted"] == ["slow-1"], report["notes"]
    assert {n["name"]: n["reasons"] for n in report["nodes"]} == {"slow-1": [], "fast-1": [NO_POD_AFFINITY]}


@pytest.mark.parametrize(
    "expressions",
    [
        # the name label: a prediction from names alone leaves payments out on every release
        pytest.param(
            lambda ns: [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [ns]}],
            id="name-notin-payments",
        ),
        # the team label: a prediction from names alone sees no team, so payments is in on every release
        pytest.param(lambda ns: [{"key": "team", "operator": "NotIn", "values": ["payments"]}], id="team-notin"),
        pytest.param(lambda ns: [{"key": "team", "operator": "DoesNotExist"}], id="team-doesnotexist"),
    ],
)
def test_the_pods_own_notin_namespace_selector_matches_every_namespace_until_137_as_explain_predicts(
    cluster: Cluster, registered, namespace: str, payments: str, nodes, tmp_path: Path, expressions
) -> None:
    cluster.create(node("slow-1", "low"))
    cluster.create(node("fast-1", "high"))
    run_ledgers(cluster, payments, "slow-1")
    wait_cache(cluster)
    pod = checkout(beside_ledger({"matchExpressions": expressions(payments)}), {"app": "checkout"})
    report = explained(cluster, pod, namespace, tmp_path)
    cluster.create(pod, namespace)
    bound = scheduled(cluster, namespace, "checkout")
    assert bound == ("slow-1" if cluster.minor in UNMERGED_RELEASES else None)
    assert report["predicted"] == ([bound] if bound else []), report["nodes"]


def test_status_and_rebalance_predict_a_replacement_beside_its_pods_of_a_labelled_namespace(
    cluster: Cluster, registered, namespace: str, payments: str, nodes
) -> None:
    """web's pods must run beside a ledger of a team=payments namespace. Both land on slow-1 (the
    only node); then fast-1 (net=high) joins with a ledger of its own: a replacement fits there,
    and the preference puts it there. status finds fast-1 feasible, rebalance evicts one pod (one
    per owner), and the real scheduler binds its replacement to fast-1."""
    cluster.create(node("slow-1", "low"))
    run_ledgers(cluster, payments, "slow-1")
    web = deployment("web", 2)
    web["spec"]["template"]["spec"]["affinity"] = beside_ledger(PAYMENTS)
    cluster.create(web, namespace)
    stranded = pods_of(cluster, namespace, 2, "app%3Dweb")
    assert {p["spec"]["nodeName"] for p in stranded} == {"slow-1"}
    run_all(cluster, stranded)
    cluster.create(node("fast-1", "high"))
    run_ledgers(cluster, payments, "fast-1")
    wait_cache(cluster)

    # status judges the pods by the filters that read a node alone and what its pods take: fast-1
    # fits (as the real scheduler finds below). Its count of pods rebalance would move is its
    # defaults' (--min-age 10m: none of these young pods), checked in tests/process/test_status.py.
    status = json.loads(cli(cluster, "status", "-n", namespace, "--config", POLICY, "-o", "json", check=False).stdout)
    assert [p["why"] for p in status["not_on_high"]] == [[placement.feasible_now(NETQOS_TARGET)]] * 2

    rebalance = ("rebalance", "--apply", "--min-age", "0", "--config", POLICY, "-o", "json")
    report = json.loads(cli(cluster, *rebalance, check=False).stdout)
    mine = [c for c in report["candidates"] if c["namespace"] == namespace]
    why = [c["reason"] for c in mine]
    assert [(c["action"], c["target"]) for c in mine] == [("evict", "fast-1"), ("skip", None)], why
    [eviction] = [e for e in report["evicted"] if e["namespace"] == namespace]
    assert eviction["result"] == "evicted", eviction
    assert bound_replacement(cluster, namespace, stranded)["spec"]["nodeName"] == "fast-1"
