"""What `rebalance --apply` must never evict, on the real control plane: the real API server's
Priority admission gives a system-critical pod its priority, the real registration (the session's
`register --url` webhook) decides which pods the webhook is called for, and with no registration at
all nothing is evicted. Each test strands a Deployment's pods on `slow-1` (net=low), then lets
`fast-1` (net=high) join, so without the protection under test the pods would be movable.
"""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.conftest import WEBHOOK_CONFIGURATION, cli
from tests.e2e.test_status import deployment, node, pods_of, run_all

REBALANCE = ("rebalance", "--apply", "--min-age", "0", "--max-evictions", "5", "-o", "json")


def strand(cluster, namespace: str, workload: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The workload's two pods bound to slow-1 and Running, then fast-1 (net=high) joins."""
    cluster.create(node("slow-1", "low"))
    cluster.create(workload, namespace)
    stranded = pods_of(cluster, namespace, 2, f"app%3D{name}")
    assert {p["spec"]["nodeName"] for p in stranded} == {"slow-1"}
    run_all(cluster, stranded)
    cluster.create(node("fast-1", "high"))
    return stranded


def mine(report: dict[str, Any], namespace: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows = [c for c in report["candidates"] if c["namespace"] == namespace]
    return rows, [e for e in report["evicted"] if e["namespace"] == namespace]


def still_running(cluster, namespace: str, pods: list[dict[str, Any]]) -> bool:
    return all(
        (found := cluster.pod(namespace, p["metadata"]["name"])) is not None
        and found["metadata"].get("deletionTimestamp") is None
        for p in pods
    )


def exclude(cluster, namespace: str, excluded: bool) -> None:
    """Add `namespace` to (or remove it from) every entry's namespaceSelector NotIn list."""
    config = cluster.get(WEBHOOK_CONFIGURATION)
    for entry in config["webhooks"]:
        values = entry["namespaceSelector"]["matchExpressions"][0]["values"]
        if excluded:
            values.append(namespace)
        else:
            values.remove(namespace)
    code, body = cluster.request("PUT", WEBHOOK_CONFIGURATION, config)
    assert code == 200, body


def test_a_pod_of_system_critical_priority_is_never_evicted(cluster, registered, namespace: str, nodes) -> None:
    critical = deployment("critical", 2)
    critical["spec"]["template"]["spec"]["priorityClassName"] = "system-cluster-critical"
    stranded = strand(cluster, namespace, critical, "critical")
    assert {p["spec"].get("priority") for p in stranded} == {2000000000}  # the Priority admission plugin's
    result = cli(cluster, *REBALANCE, check=False)
    report = json.loads(result.stdout)
    rows, evictions = mine(report, namespace)
    assert [(c["action"], c["constraint"]) for c in rows] == [("skip", "priority")] * 2, rows
    assert rows[0]["reason"] == (
        "system-critical priority (2000000000, system-cluster-critical): never evicted, "
        "as the descheduler protects such pods"
    )
    assert evictions == []
    assert still_running(cluster, namespace, stranded)


def test_a_pod_the_registration_does_not_call_the_webhook_for_is_never_evicted(
    cluster, registered, namespace: str, nodes
) -> None:
    """The registration's namespaceSelector leaves the namespace out (the chart's
    webhook.excludeNamespaces): a replacement there would come back without the terms."""
    stranded = strand(cluster, namespace, deployment("web", 2), "web")
    exclude(cluster, namespace, True)
    try:
        report = json.loads(cli(cluster, *REBALANCE, check=False).stdout)
    finally:  # the session's registration, as it was
        exclude(cluster, namespace, False)
    rows, evictions = mine(report, namespace)
    assert [(c["action"], c["constraint"]) for c in rows] == [("skip", "scope")] * 2, rows
    assert f"the registration does not call the webhook in namespace {namespace}" in rows[0]["reason"]
    assert evictions == []
    assert still_running(cluster, namespace, stranded)
    # registered again as before, the same pods are movable: the selector was what kept them
    again = json.loads(cli(cluster, *REBALANCE, check=False).stdout)
    rows, evictions = mine(again, namespace)
    assert [e["result"] for e in evictions] == ["evicted"], (rows, evictions)


def test_without_a_registration_apply_evicts_nothing_says_so_and_exits_3(
    cluster, unregistered, namespace: str, nodes
) -> None:
    stranded = strand(cluster, namespace, deployment("web", 2), "web")
    result = cli(cluster, *REBALANCE, check=False)
    assert result.returncode == 3, result.stderr
    report = json.loads(result.stdout)
    assert report["registration"]["active"] is False
    assert report["registration"]["problem"].startswith("no active registration calls the webhook")
    assert report["evicted"] == []
    assert "nothing may be evicted: no active registration calls the webhook" in result.stderr
    assert still_running(cluster, namespace, stranded)
