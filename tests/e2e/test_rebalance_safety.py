"""What `rebalance --apply` must never evict, on the real control plane: the real API server's
Priority admission gives a system-critical pod its priority, the real registration (the session's
`register --url` webhook) decides which pods the webhook is called for, and with no registration at
all nothing is evicted. Each test strands a Deployment's pods on `slow-1` (net=low), then lets
`fast-1` (net=high) join, so without the protection under test the pods would be movable. And
a pod of the second scheduler profile (netqos-scheduler, the NetQoS scheduler plugin's) is
predicted with that profile, given the scheduler's own configuration file, and its replacement
lands where the prediction says.
"""

from __future__ import annotations

import json
import time
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


def tainted(name: str, net: str | None, taints: int) -> dict[str, Any]:
    """A node with `taints` PreferNoSchedule taints no pod tolerates: TaintToleration (weight 3)
    scores it by how many it has, against the most any node has."""
    obj = node(name, net)
    obj["spec"] = {"taints": [{"key": f"prefer-not-{i}", "effect": "PreferNoSchedule"} for i in range(taints)]}
    return obj


def on(cluster, namespace: str, app: str, scheduler: str) -> dict[str, Any]:
    workload = deployment(app, 2)
    workload["spec"]["template"]["spec"]["schedulerName"] = scheduler
    cluster.create(workload, namespace)
    return workload


def replacement_of(cluster, namespace: str, app: str, gone: set[str], timeout: float = 30) -> dict[str, Any]:
    """The pod of `app` that is none of `gone`, once a scheduler has bound it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in cluster.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3D{app}")["items"]:
            if p["metadata"]["name"] not in gone and p["spec"].get("nodeName"):
                return p
        time.sleep(0.2)
    raise AssertionError(f"no replacement of {app} in {namespace} was bound within {timeout:.0f} s")


def test_a_pod_of_the_netqos_scheduler_is_predicted_with_its_profile_and_its_replacement_lands_there(
    cluster, registered, namespace: str, nodes
) -> None:
    """The real kube-scheduler runs two profiles (its configuration file is the harness's): under
    default-scheduler's the webhook's terms (a net=high lead of 90) lose to plain-1's lighter
    PreferNoSchedule taints (150 at TaintToleration's weight 3); netqos-scheduler's adds the NetQoS
    scheduler plugin (fast-1 100, plain-1 10), which wins fast-1 back by 30. `rebalance
    --scheduler-config` predicts both as the real scheduler places them: the netqos pod is evicted
    and its replacement lands on fast-1, the default pod is not, and where the default scheduler
    puts one of its pods' replacements is plain-1, as the plan said."""
    cluster.create(tainted("slow-1", "low", 2))
    on(cluster, namespace, "netqos", "netqos-scheduler")
    on(cluster, namespace, "plain", "default-scheduler")
    stranded = {app: pods_of(cluster, namespace, 2, f"app%3D{app}") for app in ("netqos", "plain")}
    for pods in stranded.values():
        assert {p["spec"]["nodeName"] for p in pods} == {"slow-1"}
        run_all(cluster, pods)
    cluster.create(tainted("fast-1", "high", 2))
    cluster.create(tainted("plain-1", None, 1))
    profiles = str(cluster.directory / "scheduler-config.json")  # the file kube-scheduler runs with

    unknown = json.loads(cli(cluster, "rebalance", "--min-age", "0", "-o", "json", check=False).stdout)
    rows, _ = mine(unknown, namespace)
    assert {(c["name"].rsplit("-", 2)[0], c["constraint"]) for c in rows} == {
        ("netqos", "scheduler"),
        ("plain", "placement"),
    }, rows

    result = cli(cluster, *REBALANCE, "--scheduler-config", profiles, check=False)
    report = json.loads(result.stdout)
    rows, evictions = mine(report, namespace)
    by_app: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_app.setdefault(row["name"].rsplit("-", 2)[0], []).append(row)
    netqos = by_app["netqos"]
    assert [(c["action"], c["target"]) for c in netqos] == [("evict", "fast-1"), ("skip", None)], netqos
    assert "(netqos-scheduler's profile)" in netqos[0]["reason"]
    assert {(c["action"], c["constraint"]) for c in by_app["plain"]} == {("skip", "placement")}
    assert by_app["plain"][0]["reason"].startswith("kube-scheduler would place the replacement on plain-1"), by_app
    assert [(e["name"], e["result"]) for e in evictions] == [(netqos[0]["name"], "evicted")]

    names = {p["metadata"]["name"] for pods in stranded.values() for p in pods}
    assert replacement_of(cluster, namespace, "netqos", names)["spec"]["nodeName"] == "fast-1"

    # the default scheduler's replacement lands where the plan said it would, off net=high
    victim = stranded["plain"][0]["metadata"]["name"]
    code, body = cluster.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/pods/{victim}/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": victim, "namespace": namespace}},
    )
    assert code == 201, body
    assert replacement_of(cluster, namespace, "plain", names)["spec"]["nodeName"] == "plain-1"
