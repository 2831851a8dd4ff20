"""`netqos-webhook rebalance` on the real control plane: the real API server's Eviction API, a real
PodDisruptionBudget (its disruptionsAllowed kept by the real disruption controller), the real
ReplicaSet controller re-creating the evicted pod and the real scheduler binding the replacement
where rebalance planned it.

A Deployment's two pods land on the only node, `slow-1` (net=low); then `fast-1` (net=high) joins.
While a budget needs both pods, the plan (which reads the budget) blocks both and nothing is asked;
once it allows one disruption, one pod is evicted and its replacement is bound to `fast-1`. An
eviction whose replacement the real scheduler binds elsewhere than predicted is not made again
while the net=high nodes and their pods are unchanged, and each eviction is an Event the real API
server validates and stores. And the CronJob's ServiceAccount, ClusterRole and Role
(deploy/overlays/rebalance) let the real API server's RBAC through every request `rebalance
--apply` makes, and no pod deletion.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.conftest import cli
from tests.e2e.test_rebalance_safety import mine, on, replacement_of, tainted
from tests.e2e.test_status import deployment, node, pods_of, run_all
from tests.fixtures import FIXTURES, REPO
from webhook.names import DEFAULT_NAMESPACE, REBALANCE_HISTORY

OVERLAY = REPO / "deploy/overlays/rebalance"

REBALANCE = ("rebalance", "--apply", "--min-age", "0", "-o", "json")


def budget(name: str, min_available: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": name}}},
    }


def wait_disruptions_allowed(cluster, namespace: str, name: str, allowed: int, timeout: float = 30) -> None:
    """Until the disruption controller has counted the budget's healthy pods and allows `allowed`."""
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        found = cluster.get(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}") or {}
        status = found.get("status") or {}
        generation = (found.get("metadata") or {}).get("generation")
        if status.get("observedGeneration") == generation and status.get("disruptionsAllowed") == allowed:
            return
        time.sleep(0.2)
    raise AssertionError(f"budget {namespace}/{name} never allowed {allowed} disruption(s): {status}")


def test_rebalance_evicts_through_the_eviction_api_and_a_budget_blocks_it(
    cluster, registered, namespace: str, nodes
) -> None:
    cluster.create(node("slow-1", "low"))
    cluster.create(deployment("web", 2), namespace)
    stranded = pods_of(cluster, namespace, 2, "app%3Dweb")
    assert {p["spec"]["nodeName"] for p in stranded} == {"slow-1"}
    run_all(cluster, stranded)
    cluster.create(node("fast-1", "high"))

    cluster.create(budget("web", 2), namespace)
    wait_disruptions_allowed(cluster, namespace, "web", 0)
    blocked = cli(cluster, *REBALANCE, check=False)
    report = json.loads(blocked.stdout)
    mine = [c for c in report["candidates"] if c["namespace"] == namespace]
    # the budget is read when planning: both pods are planned as blocked, and no eviction is asked
    assert [(c["action"], c["constraint"]) for c in mine] == [("skip", "pdb")] * 2, mine
    assert mine[0]["reason"] == "blocked: PodDisruptionBudget web allows no disruption now (0 allowed)"
    assert [e for e in report["evicted"] if e["namespace"] == namespace] == []
    assert all(
        cluster.pod(namespace, p["metadata"]["name"])["metadata"].get("deletionTimestamp") is None for p in stranded
    )

    code, body = cluster.request(
        "PATCH",
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/web",
        {"spec": {"minAvailable": 1}},
        "application/merge-patch+json",
    )
    assert code == 200, body
    wait_disruptions_allowed(cluster, namespace, "web", 1)
    moved = cli(cluster, *REBALANCE, check=False)
    report = json.loads(moved.stdout)
    [eviction] = [e for e in report["evicted"] if e["namespace"] == namespace]
    assert eviction["result"] == "evicted", eviction
    evicted = cluster.pod(namespace, eviction["name"])
    assert evicted is None or evicted["metadata"].get("deletionTimestamp"), "the evicted pod is still running"
    # the ReplicaSet replaces it, and the scheduler binds the replacement where rebalance planned it
    assert bound_replacement(cluster, namespace, stranded)["spec"]["nodeName"] == "fast-1"


def bound_replacement(cluster, namespace: str, stranded: list[dict[str, Any]], timeout: float = 30) -> dict[str, Any]:
    """The first pod of app=web that is none of `stranded`, once the scheduler has bound it."""
    old = {p["metadata"]["name"] for p in stranded}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = cluster.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3Dweb")["items"]
        fresh = [p for p in items if p["metadata"]["name"] not in old]
        if fresh and fresh[0]["spec"].get("nodeName"):
            return fresh[0]
        time.sleep(0.2)
    raise AssertionError(f"no replacement was bound within {timeout:.0f} s")


def webhook_namespace(cluster) -> list[str]:
    """The webhook's namespace, where the records of the evictions made are kept: created when an
    earlier test deleted it. The paths this created, for the test to delete."""
    found = cluster.get(f"/api/v1/namespaces/{DEFAULT_NAMESPACE}")
    # An earlier test may have deleted it without waiting: a terminating namespace admits nothing.
    if found is None or found.get("status", {}).get("phase") == "Terminating":
        cluster.create_namespace(DEFAULT_NAMESPACE)  # waits for a terminating one to be gone
        return [f"/api/v1/namespaces/{DEFAULT_NAMESPACE}"]
    return []


def test_an_eviction_whose_replacement_went_to_a_slower_node_is_not_made_again_and_each_is_an_event(
    cluster, registered, namespace: str, nodes
) -> None:
    """The prediction is made wrong on purpose: rebalance is told (a wrong --scheduler-config)
    that default-scheduler runs the NetQoS plugin, whose 90 points would win fast-1 back from
    plain-1's lighter PreferNoSchedule taints; the real default-scheduler does not run it and binds
    the replacement to plain-1. The second run sees the same world (fast-1 and its pods unchanged)
    and evicts nothing, saying why; a plan that reads no records would evict again."""
    created = webhook_namespace(cluster)
    cluster.create(tainted("slow-1", "low", 2))
    on(cluster, namespace, "plain", "default-scheduler")
    stranded = pods_of(cluster, namespace, 2, "app%3Dplain")
    run_all(cluster, stranded)
    cluster.create(tainted("fast-1", "high", 2))
    cluster.create(tainted("plain-1", None, 1))
    wrong = ("--scheduler-config", str(FIXTURES / "scheduler-config-default-with-netqos.yaml"))
    try:
        first = json.loads(cli(cluster, *REBALANCE, *wrong, check=False).stdout)
        rows, [eviction] = mine(first, namespace)
        assert (eviction["result"], rows[0]["target"]) == ("evicted", "fast-1"), (rows, eviction)
        assert first["warnings"] == []
        names = {p["metadata"]["name"] for p in stranded}
        replacement = replacement_of(cluster, namespace, "plain", names)
        assert replacement["spec"]["nodeName"] == "plain-1"  # not where the plan said
        run_all(cluster, [replacement])

        second = json.loads(cli(cluster, *REBALANCE, *wrong, check=False).stdout)
        rows, evictions = mine(second, namespace)
        assert evictions == []
        # the evicted pod stays Terminating (no kubelet ends it); its sibling and its replacement stay
        rows = [c for c in rows if c["name"] != eviction["name"]]
        assert [(c["node"], c["action"], c["constraint"]) for c in rows] == [
            ("slow-1", "skip", "repeat"),
            ("plain-1", "skip", "repeat"),
        ], rows
        reason = "predicted fast-1, its replacement went to plain-1: not evicted again until the net=high nodes"
        assert reason in rows[0]["reason"], rows
        # the records are what holds it: a plan that reads none would evict again
        plan_only = ("rebalance", *REBALANCE[2:], *wrong, "--history-configmap", "none-such")
        blind = json.loads(cli(cluster, *plan_only, check=False).stdout)
        assert ("evict", "fast-1") in {(c["action"], c["target"]) for c in mine(blind, namespace)[0]}

        events = cluster.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
        ours = [e for e in events if e.get("reportingController") == "netqos-webhook/rebalance"]
        assert sorted((e["regarding"]["kind"], e["regarding"]["name"]) for e in ours) == [
            ("Deployment", "plain"),
            ("Pod", eviction["name"]),
        ]
        assert {(e["type"], e["reason"]) for e in ours} == {("Normal", "NetQoSRebalanced")}
    finally:
        for path in created:
            cluster.request("DELETE", path)


def test_the_cronjobs_service_account_may_do_exactly_what_rebalance_apply_does(
    cluster, registered, namespace: str, nodes, tmp_path: Path
) -> None:
    """deploy/overlays/rebalance's ServiceAccount, ClusterRole, Role, their bindings and the
    records' ConfigMap, applied to the real API server: `rebalance --apply` as the CronJob runs
    it, with that account's token, plans, evicts, records Events and its eviction without one
    refusal; the same token may not delete a pod (evictions only) nor write another ConfigMap."""
    created = webhook_namespace(cluster)
    for path in ("serviceaccount.yaml", "rbac.yaml", "history.yaml"):
        for obj in yaml.safe_load_all((OVERLAY / path).read_text()):
            if cluster.get(path_of(obj)) is None:
                cluster.create(obj, obj["metadata"].get("namespace"))
                created.insert(0, path_of(obj))
    try:
        _rebalance_as_the_service_account(cluster, namespace, tmp_path)
    finally:
        for path in created:  # what this test added, the namespace last
            cluster.request("DELETE", path)


def service_account_kubeconfig(cluster, tmp_path: Path) -> Path:
    """A kubeconfig of the CronJob's ServiceAccount (netqos-rebalance), with a token of 10 minutes."""
    code, token = cluster.request(
        "POST",
        f"/api/v1/namespaces/{DEFAULT_NAMESPACE}/serviceaccounts/netqos-rebalance/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}},
    )
    assert code == 201, token
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    kubeconfig = tmp_path / "rebalancer.kubeconfig"
    context = {"cluster": admin["clusters"][0]["name"], "user": "rebalancer"}
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": admin["clusters"],
                "users": [{"name": "rebalancer", "user": {"token": token["status"]["token"]}}],
                "contexts": [{"name": "rebalancer", "context": context}],
                "current-context": "rebalancer",
            }
        )
    )
    return kubeconfig


def _rebalance_as_the_service_account(cluster, namespace: str, tmp_path: Path) -> None:
    kubeconfig = service_account_kubeconfig(cluster, tmp_path)
    cluster.create(node("slow-1", "low"))
    cluster.create(deployment("web", 2), namespace)
    stranded = pods_of(cluster, namespace, 2, "app%3Dweb")
    run_all(cluster, stranded)
    cluster.create(node("fast-1", "high"))

    args = ["--kubeconfig", str(kubeconfig), "--config", str(REPO / "deploy/base/policy.yaml")]
    result = cli(cluster, *REBALANCE, *args, check=False)
    assert result.returncode in (0, 3), result.stderr
    report = json.loads(result.stdout)
    [eviction] = [e for e in report["evicted"] if e["namespace"] == namespace]
    assert eviction["result"] == "evicted", eviction
    assert all(e["result"] != "error" for e in report["evicted"]), report["evicted"]
    assert report["warnings"] == []  # its Events and its record were written
    history = cluster.get(f"/api/v1/namespaces/{DEFAULT_NAMESPACE}/configmaps/{REBALANCE_HISTORY}")
    assert eviction["name"] in history["data"]["evictions.json"]

    victim = next(p["metadata"]["name"] for p in stranded if p["metadata"]["name"] != eviction["name"])
    denied = subprocess.run(
        [str(cluster.kubectl_path), "--kubeconfig", str(kubeconfig), "-n", namespace, "delete", "pod", victim],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), denied.stderr
    kubectl = [str(cluster.kubectl_path), "--kubeconfig", str(kubeconfig), "-n", DEFAULT_NAMESPACE]
    other = subprocess.run(
        [*kubectl, "create", "configmap", "elsewhere"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert other.returncode != 0 and "forbidden" in other.stderr.lower(), other.stderr


def path_of(obj: dict[str, Any]) -> str:
    """Where one object of deploy/overlays/rebalance lives on the API server."""
    kind = obj["kind"]
    name = obj["metadata"]["name"]
    namespace = obj["metadata"].get("namespace")
    if kind in ("ServiceAccount", "ConfigMap"):
        return f"/api/v1/namespaces/{namespace}/{kind.lower()}s/{name}"
    if kind in ("Role", "RoleBinding"):
        return f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/{kind.lower()}s/{name}"
    plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}[kind]
    return f"/apis/rbac.authorization.k8s.io/v1/{plural}/{name}"
