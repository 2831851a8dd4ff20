"""`rebalance` and `status` judge a pod in the world the real kube-scheduler places it in: the
evicted pod still on its node, Terminating, while its controller's replacement is scheduled; the
Filter plugins that read every node's pods (InterPodAffinity) run for status as for rebalance.

Without a kubelet nothing confirms a pod's deletion, so an evicted pod stays Terminating on its
node as it would for its grace period on a real one; the real scheduler's cache keeps it there
and the real ReplicaSet controller creates the replacement at once.
"""

from __future__ import annotations

import json
import time

from tests.e2e.conftest import cli
from tests.e2e.test_rebalance import bound_replacement
from tests.e2e.test_status import deployment, node, pods_of, run_all

PLAN = ("rebalance", "--min-age", "0", "--min-replicas", "1", "-o", "json")
REBALANCE = (*PLAN, "--apply")
# The Deployment's pods prefer each other's company on a node.
PREFERS_ITS_OWN = {
    "podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "topologyKey": "kubernetes.io/hostname",
                },
            }
        ]
    }
}


def evict(cluster, namespace: str, name: str) -> None:
    code, body = cluster.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}},
    )
    assert code == 201, body


def test_a_replacement_drawn_back_to_its_terminating_predecessor_is_not_planned_and_the_scheduler_agrees(
    cluster, registered, namespace: str, nodes
) -> None:
    web = deployment("web", 1)
    web["spec"]["template"]["spec"]["affinity"] = PREFERS_ITS_OWN
    cluster.create(node("slow-1", "low"))
    cluster.create(web, namespace)
    [stranded] = pods_of(cluster, namespace, 1, "app%3Dweb")
    assert stranded["spec"]["nodeName"] == "slow-1"
    run_all(cluster, [stranded])
    cluster.create(node("fast-1", "high"))

    report = json.loads(cli(cluster, *REBALANCE, check=False).stdout)
    [row] = [c for c in report["candidates"] if c["namespace"] == namespace]
    # InterPodAffinity counts the Terminating predecessor on slow-1: 2 x 100 there against the
    # preference's lead of 2 x 50 on fast-1
    assert (row["action"], row["constraint"]) == ("skip", "placement"), row
    assert row["reason"].startswith("kube-scheduler would place the replacement on slow-1 (net=low)"), row
    assert [e for e in report["evicted"] if e["namespace"] == namespace] == []

    # Evicted anyway, the pod stays Terminating on slow-1 and its replacement is bound beside it.
    name = stranded["metadata"]["name"]
    evict(cluster, namespace, name)
    replacement = bound_replacement(cluster, namespace, [stranded])
    predecessor = cluster.pod(namespace, name)
    assert predecessor is not None and predecessor["metadata"].get("deletionTimestamp"), predecessor
    assert replacement["spec"]["nodeName"] == "slow-1"


ONE_PER_NODE = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
}


def test_status_says_no_fast_node_passes_an_anti_affinity_every_fast_node_fails_as_rebalance_and_the_scheduler(
    cluster, registered, namespace: str, nodes
) -> None:
    web = deployment("web", 3)
    web["spec"]["template"]["spec"]["affinity"] = ONE_PER_NODE
    for name, net in (("fast-1", "high"), ("slow-1", "low"), ("slow-2", "low")):
        cluster.create(node(name, net))
    cluster.create(web, namespace)
    placed = pods_of(cluster, namespace, 3, "app%3Dweb")
    assert sorted(p["spec"]["nodeName"] for p in placed) == ["fast-1", "slow-1", "slow-2"]
    run_all(cluster, placed)

    report = json.loads(cli(cluster, "status", "-n", namespace, "-o", "json", check=False).stdout)
    why = ["1/1 net=high node(s): node(s) didn't match pod anti-affinity rules"]
    assert sorted((p["node"], p["why"]) for p in report["not_on_high"]) == [("slow-1", why), ("slow-2", why)]
    assert report["placement"]["movable"] == 0
    plan = json.loads(cli(cluster, *PLAN, check=False).stdout)
    rows = [c for c in plan["candidates"] if c["namespace"] == namespace]
    assert [(c["action"], c["constraint"]) for c in rows] == [("skip", "placement")] * 2, rows

    # The real scheduler agrees: a fourth pod finds no node, fast-1 refused by the anti-affinity.
    code, body = cluster.request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{namespace}/deployments/web",
        {"spec": {"replicas": 4}},
        "application/merge-patch+json",
    )
    assert code == 200, body
    message = failed_scheduling(cluster, namespace)
    assert "3 node(s) didn't match pod anti-affinity rules" in message, message


def failed_scheduling(cluster, namespace: str, timeout: float = 30) -> str:
    """The message of the first FailedScheduling event in `namespace`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = cluster.get(f"/api/v1/namespaces/{namespace}/events?fieldSelector=reason%3DFailedScheduling")
        for event in events["items"]:
            return str(event.get("message") or "")
        time.sleep(0.2)
    raise AssertionError(f"no FailedScheduling event in {namespace} within {timeout} s")
