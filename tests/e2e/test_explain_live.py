"""`netqos-webhook explain pod/NAME` on the real control plane: a latency-sensitive pod is created
through the real API server, which calls the webhook (it injects the default policy's terms and
annotates the pod), and the real kube-scheduler binds it. `explain` then reads that pod back, bound
and annotated, and must judge it as it was before admission and scheduling: every node feasible
(not only the one `spec.nodeName` names), the webhook's terms added once (not on top of the ones
it injected), and the node the real scheduler bound predicted by both columns.
"""

from __future__ import annotations

import json
import time

from tests.e2e.conftest import cli, node_affinity
from tests.e2e.test_status import LABELS, node
from webhook.names import INJECTED_ANNOTATION

NODES = (("fast-1", "high"), ("std-1", None), ("slow-1", "low"))


def latency_sensitive_pod(name: str) -> dict:
    container = {"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": LABELS},
        "spec": {"containers": [container]},
    }


def bound(cluster, namespace: str, name: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = cluster.pod(namespace, name)
        if pod is not None and pod["spec"].get("nodeName"):
            return pod
        time.sleep(0.2)
    raise AssertionError(f"pod {namespace}/{name} not bound within {timeout:.0f} s")


def test_explain_of_a_bound_pod_predicts_the_node_the_real_scheduler_bound_it_to(
    cluster, registered, namespace: str, nodes
) -> None:
    for name, net in NODES:
        cluster.create(node(name, net))
    cluster.create(latency_sensitive_pod("api-1"), namespace)
    pod = bound(cluster, namespace, "api-1")
    assert pod["metadata"]["annotations"][INJECTED_ANNOTATION] == "netqos"
    injected = node_affinity(pod)
    assert len(injected) == 4  # the default policy's terms, as the webhook injected them

    report = json.loads(cli(cluster, "explain", "pod/api-1", "-n", namespace, "-o", "json").stdout)

    assert report["pod"] == "api-1" and report["namespace"] == namespace
    # judged before scheduling: NodeName rules out no node
    assert {n["name"]: n["feasible"] for n in report["nodes"]} == {name: True for name, _ in NODES}
    # judged before admission: the webhook's terms go in once, exactly as it injected them
    assert report["decision"] == "mutated" and report["injected_terms"] == injected
    assert report["predicted"] == [pod["spec"]["nodeName"]] == report["netqos_predicted"] == ["fast-1"]
    assert report["predictions_match"] and report["choices_match"]
    # the NetQoS column scores the pod as written: the two totals differ by the constant alone
    assert "TOTAL - NETQOS TOTAL is 100 on every feasible node: the two schedulers rank them alike." in report["notes"]
    assert any(
        note.startswith("explained as the pod was before admission and scheduling, without metadata.uid")
        and "spec.nodeName" in note
        and "the 4 preferred term(s) rule netqos injected" in note
        for note in report["notes"]
    ), report["notes"]
