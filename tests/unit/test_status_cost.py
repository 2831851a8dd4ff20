"""What `status` costs at scale when the pods off the net=high nodes each come from their own
template: the high nodes' filter work is shared by every pod with the same scheduling spec."""

from __future__ import annotations

from collections import Counter
from typing import Any

from harness.kubeapi import node, pod
from tests.fixtures import NETQOS_TERMS
from tests.fixtures import cluster_view as fixture_view
from webhook import status
from webhook.scheduler.plugins import tainttoleration

ALLOCATABLE = {"cpu": "2", "memory": "4Gi", "pods": "10"}


def cluster_view(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> status.ClusterView:
    return fixture_view(namespaces={"shop": {"kubernetes.io/metadata.name": "shop"}}, nodes=nodes, pods=pods)


def test_status_filters_each_high_node_once_per_distinct_spec_not_once_per_pod(monkeypatch):
    """300 pods off the net=high nodes, each from its own template (its own image), with one
    scheduling spec: the taint filter, the first node-only filter, runs once per high node, not
    300 times (60,000 times before the work was shared)."""
    nodes = [{**node(f"fast-{i:03}", "high"), "status": {"allocatable": ALLOCATABLE}} for i in range(200)]
    nodes.append({**node("slow-1", "low"), "status": {"allocatable": ALLOCATABLE}})
    pods = []
    for i in range(300):
        p = pod("shop", f"app-{i:03}", {"qos": "latency-sensitive"}, "slow-1", preferred=NETQOS_TERMS)
        # its own image; 3 CPUs fit no node, so every high node is filtered to the end
        p["spec"]["containers"][0].update(image=f"registry.example/app-{i:03}:1", resources={"requests": {"cpu": "3"}})
        pods.append(p)
    calls = Counter[str]()
    taint_filter = tainttoleration.first_untolerated_taint

    def counted(tolerations: Any, taints: Any) -> Any:
        calls["taint"] += 1
        return taint_filter(tolerations, taints)

    monkeypatch.setattr(tainttoleration, "first_untolerated_taint", counted)
    report = status.analyse(cluster_view(nodes, pods))
    assert len(report.not_on_high) == 300
    assert {p.why for p in report.not_on_high} == {("200/200 net=high node(s): Insufficient cpu",)}
    assert calls["taint"] == 200
