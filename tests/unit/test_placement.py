"""Why a pod is not on a net=high node: the answer `explain`'s ranking gives, with the filter work
shared across pods, so that `status` costs what the variety of the pods' specs costs, not what
their number does."""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from typing import Any

import pytest

from harness.kubeapi import node, pod
from tests.fixtures import NETQOS_TERMS
from webhook import placement
from webhook.scheduler.cycle import rank
from webhook.scheduler.model import Node, usage_by_node, usage_of
from webhook.scheduler.read import node_info, pod_info

QOS = {"qos": "latency-sensitive"}
ALLOCATABLE = {"cpu": "2", "memory": "4Gi", "pods": "10"}


def high_node(name: str, **extra: Any) -> dict[str, Any]:
    return {**node(name, "high", **extra), "status": {"allocatable": ALLOCATABLE}}


def high_nodes() -> list[dict[str, Any]]:
    zone_b = high_node("fast-4")
    zone_b["metadata"]["labels"]["zone"] = "b"
    return [
        high_node("fast-1"),
        high_node("fast-2", taints=[{"key": "dedicated", "value": "fast", "effect": "NoSchedule"}]),
        high_node("fast-3", unschedulable=True),
        zone_b,
        high_node("fast-5"),
    ]


def selected(name: str, cpu: str = "100m", node_name: str = "slow-1", **spec: Any) -> dict[str, Any]:
    p = pod("shop", name, QOS, node_name, preferred=NETQOS_TERMS, **copy.deepcopy(spec))
    p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    return p


TOLERATE = [{"key": "dedicated", "operator": "Equal", "value": "fast", "effect": "NoSchedule"}]
PORT = [{"name": "app", "image": "app:1", "ports": [{"containerPort": 80, "hostPort": 8080}]}]
ON_FAST_1 = [selected("big-1", cpu="1500m", node_name="fast-1")]  # takes most of fast-1's cpu
ON_FAST_5 = [selected("port-1", node_name="fast-5", containers=PORT)]  # holds host port 8080


def ranked(pod_: dict[str, Any], high: list[Node], usage: Any) -> tuple[str, ...]:
    """The answer from `rank`, as `explain` ranks: the reference."""
    view = dataclasses.replace(pod_info(pod_), node_name="")
    ranking = rank(view, high, usage)
    if ranking.feasible:
        return (placement.FEASIBLE_NOW if usage is not None else placement.FEASIBLE_WITHOUT_USAGE,)
    counts = Counter(r for n in ranking.nodes for r in n.reasons)
    return tuple(sorted(f"{c}/{len(high)} net=high node(s): {r}" for r, c in counts.items()))


PODS = [
    selected("small"),
    selected("large", cpu="1"),
    selected("huge", cpu="3"),
    selected("tolerant-huge", cpu="3", tolerations=TOLERATE),
    selected("zone-b", nodeSelector={"zone": "b"}),
    selected("zone-b-huge", cpu="3", nodeSelector={"zone": "b"}),
    selected("zone-c", nodeSelector={"zone": "c"}),
    selected("port", containers=PORT),
    selected(
        "name-conflict",
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["fast-1"]}]},
                    ]
                }
            }
        },
    ),
]


@pytest.mark.parametrize("usage_known", [True, False], ids=["usage-read", "usage-forbidden"])
@pytest.mark.parametrize("pod_", PODS, ids=[p["metadata"]["name"] for p in PODS])
def test_why_not_high_is_the_answer_of_explains_ranking(pod_, usage_known):
    high = [node_info(n) for n in high_nodes()]
    usage = placement.high_usage([*ON_FAST_1, *ON_FAST_5], high) if usage_known else None
    why = placement.WhyNotHigh(high, usage)
    assert why(pod_) == ranked(pod_, high, usage)


def test_pods_of_other_templates_with_the_same_spec_share_the_answer_and_others_get_their_own():
    high = [node_info(n) for n in high_nodes()]
    usage = placement.high_usage(ON_FAST_1, high)
    why = placement.WhyNotHigh(high, usage)
    answers = {}
    for i, original in enumerate(PODS * 3):  # every pod three times, each from a template of its own
        container = {**original["spec"]["containers"][0], "image": f"app-{i}:1"}
        copy = {**original, "spec": {**original["spec"], "containers": [container]}}
        answers.setdefault(original["metadata"]["name"], set()).add(why(copy))
    assert all(len(a) == 1 for a in answers.values())
    assert {name: a.pop() for name, a in answers.items()} == {
        p["metadata"]["name"]: ranked(p, high, usage) for p in PODS
    }


SIDECAR = {"name": "proxy", "image": "proxy:1", "restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}}
INIT = {"name": "setup", "image": "setup:1", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"initContainers": [INIT]},
        {"initContainers": [SIDECAR, INIT]},
        {"overhead": {"cpu": "250m", "memory": "120Mi"}},
        {"resources": {"requests": {"cpu": "2", "memory": "2Gi"}}},
        {"containers": PORT},
    ],
    ids=["containers", "init-container", "sidecar", "overhead", "pod-level-resources", "host-port"],
)
def test_the_usage_of_the_high_nodes_is_what_the_scheduling_view_of_each_pod_takes(spec):
    """Pods that differ in images only share one reading of their resources; the tally is the
    one of every pod's full scheduling view."""
    high = [node_info(n) for n in high_nodes()]
    pods = []
    for i in range(6):
        p = selected(f"on-fast-{i}", node_name="fast-1" if i % 2 else "fast-5", **spec)
        for container in p["spec"]["containers"]:
            container["image"] = f"app-{i}:1"
        pods.append(p)
    finished = selected("done", node_name="fast-1")
    finished["status"]["phase"] = "Succeeded"
    expected = usage_by_node(pod_info(p) for p in pods)
    assert placement.high_usage([*pods, finished], high) == {n.name: expected.get(n.name, usage_of(())) for n in high}
