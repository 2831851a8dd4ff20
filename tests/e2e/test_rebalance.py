"""`netqos-webhook rebalance` on the real control plane: the real API server's Eviction API, a real
PodDisruptionBudget (its disruptionsAllowed kept by the real disruption controller), the real
ReplicaSet controller re-creating the evicted pod and the real scheduler binding the replacement
where rebalance planned it.

A Deployment's two pods land on the only node, `slow-1` (net=low); then `fast-1` (net=high) joins.
While a budget needs both pods, the eviction is answered 429 and nothing moves; once it allows
one disruption, one pod is evicted and its replacement is bound to `fast-1`.
"""

from __future__ import annotations

import json
import time
from typing import Any

from tests.e2e.conftest import cli
from tests.e2e.test_status import deployment, node, pods_of, run_all

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
    assert blocked.returncode == 3, blocked.stderr
    report = json.loads(blocked.stdout)
    mine = [c for c in report["candidates"] if c["namespace"] == namespace]
    assert [(c["action"], c["target"]) for c in mine] == [("evict", "fast-1"), ("skip", None)]
    [attempt] = [e for e in report["evicted"] if e["namespace"] == namespace]
    assert attempt["result"] == "blocked" and "disruption budget" in attempt["message"], attempt
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
    deadline = time.monotonic() + 30
    replacement = None
    while time.monotonic() < deadline and replacement is None:
        items = cluster.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3Dweb")["items"]
        fresh = [p for p in items if p["metadata"]["name"] not in {s["metadata"]["name"] for s in stranded}]
        if fresh and fresh[0]["spec"].get("nodeName"):
            replacement = fresh[0]
        time.sleep(0.2)
    assert replacement is not None, "no replacement was bound within 30 s"
    assert replacement["spec"]["nodeName"] == "fast-1"
