"""`netqos-webhook rebalance` predicts a replacement as the real API server admits it, and the real
kube-scheduler agrees: a Deployment's two pods run on `slow-1` (net=low); `fast-1` (net=high) joins,
and something the API server adds to a created pod keeps the replacement off it:

- a LimitRange whose default gives every container 2 CPUs, where fast-1 has 1 CPU (the template
  requests nothing: as written, it fits);
- a tenant-isolation term (preferred podAntiAffinity on `tenant Exists` with mismatchLabelKeys
  `tenant`), where fast-1 runs another tenant's pod (as written, the term keeps away from the
  Deployment's own pods on slow-1 as much).

rebalance plans no move, both as the admin (who may create pods: the API server's dry run answers)
and as the CronJob's ServiceAccount (who may not: the model of admission answers); and a pod
evicted anyway has its replacement bound to slow-1 by the real scheduler.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import cli
from tests.e2e.test_rebalance import OVERLAY, path_of, service_account_kubeconfig
from tests.e2e.test_status import LABELS, node, pods_of, run_all
from tests.fixtures import REPO
from webhook.names import DEFAULT_NAMESPACE

PLAN = ("rebalance", "--min-age", "0", "-o", "json", "--config", str(REPO / "deploy/base/policy.yaml"))
LIMIT_RANGE = {
    "apiVersion": "v1",
    "kind": "LimitRange",
    "metadata": {"name": "defaults"},
    "spec": {"limits": [{"type": "Container", "default": {"cpu": "2"}}]},  # defaultRequest defaults to it
}
ISOLATED = {
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": {"matchExpressions": [{"key": "tenant", "operator": "Exists"}]},
                    "mismatchLabelKeys": ["tenant"],
                    "topologyKey": "kubernetes.io/hostname",
                },
            }
        ]
    }
}


def web(affinity: dict[str, Any] | None = None) -> dict[str, Any]:
    """Two latency-sensitive pods of tenant a whose template requests nothing."""
    labels = {**LABELS, "app": "web", "tenant": "a"}
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}
    if affinity:
        spec["affinity"] = affinity
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def sized(obj: dict[str, Any], cpu: str) -> dict[str, Any]:
    obj["status"]["allocatable"] = obj["status"]["capacity"] = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
    return obj


def tenant_b_pod(node_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "tenant-b", "labels": {"app": "other", "tenant": "b"}},
        "spec": {"nodeName": node_name, "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
    }


@pytest.fixture
def rebalancer(cluster, tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig of the CronJob's ServiceAccount with deploy/overlays/rebalance's ClusterRole
    (no `create pods`: its plans are the model's)."""
    created: list[str] = []
    found = cluster.get(f"/api/v1/namespaces/{DEFAULT_NAMESPACE}")
    if found is None or found.get("status", {}).get("phase") == "Terminating":
        cluster.create_namespace(DEFAULT_NAMESPACE)
        created.append(f"/api/v1/namespaces/{DEFAULT_NAMESPACE}")
    for path in ("serviceaccount.yaml", "rbac.yaml"):
        for obj in yaml.safe_load_all((OVERLAY / path).read_text()):
            if cluster.get(path_of(obj)) is None:
                cluster.create(obj, obj["metadata"].get("namespace"))
                created.insert(0, path_of(obj))
    kubeconfig = service_account_kubeconfig(cluster, tmp_path)
    try:
        yield kubeconfig
    finally:
        for path in created:
            cluster.request("DELETE", path)


def plan_of(cluster, namespace: str, *args: str) -> tuple[list[dict[str, Any]], str]:
    result = cli(cluster, *PLAN, *args, check=False)
    assert result.returncode in (0, 3), result.stderr
    return [c for c in json.loads(result.stdout)["candidates"] if c["namespace"] == namespace], result.stderr


def evicted_lands_on(cluster, namespace: str, stranded: list[dict[str, Any]]) -> str:
    """Evict one stranded pod through the Eviction API; the node the real scheduler binds its replacement to."""
    victim = stranded[0]["metadata"]["name"]
    code, body = cluster.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/pods/{victim}/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": victim, "namespace": namespace}},
    )
    assert code == 201, body
    known = {p["metadata"]["name"] for p in stranded}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        items = cluster.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3Dweb")["items"]
        fresh = [p for p in items if p["metadata"]["name"] not in known and p["spec"].get("nodeName")]
        if fresh:
            return str(fresh[0]["spec"]["nodeName"])
        time.sleep(0.2)
    raise AssertionError("no replacement was bound within 30 s")


def strand(cluster, namespace: str, deployment: dict[str, Any]) -> list[dict[str, Any]]:
    cluster.create(node("slow-1", "low"))
    cluster.create(deployment, namespace)
    stranded = pods_of(cluster, namespace, 2, "app%3Dweb")
    assert {p["spec"]["nodeName"] for p in stranded} == {"slow-1"}
    run_all(cluster, stranded)
    return stranded


def assert_no_move(cluster, namespace: str, rebalancer: Path) -> None:
    """As the admin (the API server's dry run) and as the CronJob's account (the model): no move."""
    for args, admission in (((), "dry-run"), (("--kubeconfig", str(rebalancer)), "model")):
        mine, notes = plan_of(cluster, namespace, *args)
        assert len(mine) == 2, mine
        assert [(c["action"], c["admission"]) for c in mine] == [("skip", admission)] * 2, (mine, notes)
        assert [c["constraint"] for c in mine] == ["placement"] * 2, mine


def test_a_limit_ranges_default_request_keeps_the_replacement_off_a_fast_node_it_does_not_fit(
    cluster, registered, namespace: str, nodes, rebalancer: Path
) -> None:
    cluster.create(LIMIT_RANGE, namespace)
    stranded = strand(cluster, namespace, web())
    assert stranded[0]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "2"}  # LimitRanger's
    cluster.create(sized(node("fast-1", "high"), "1"))

    assert_no_move(cluster, namespace, rebalancer)
    assert evicted_lands_on(cluster, namespace, stranded) == "slow-1"


def test_a_mismatch_label_keys_term_keeps_the_replacement_away_from_another_tenants_fast_node(
    cluster, registered, namespace: str, nodes, rebalancer: Path
) -> None:
    stranded = strand(cluster, namespace, web(ISOLATED))
    merged = stranded[0]["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert {"key": "tenant", "operator": "NotIn", "values": ["a"]} in (
        merged[0]["podAffinityTerm"]["labelSelector"]["matchExpressions"]
    )  # the API server's merge
    cluster.create(node("fast-1", "high"))
    cluster.create(tenant_b_pod("fast-1"), namespace)

    assert_no_move(cluster, namespace, rebalancer)
    assert evicted_lands_on(cluster, namespace, stranded) == "slow-1"
