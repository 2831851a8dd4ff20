"""The monitor's world (`webhook.status.live`): a sequence of watch events gives the gauges the
table says, and after every event they equal what `status` reports of the same objects."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from harness.kubeapi import node, pod
from tests.fixtures import NETQOS_TERMS, cluster_view
from webhook import status
from webhook.status import live

LS = {"qos": "latency-sensitive"}
OPT_OUT = {"netqos.io/inject": "false"}


def frame() -> status.ClusterView:
    return cluster_view(namespaces={ns: {"kubernetes.io/metadata.name": ns} for ns in ("shop", "web", "kube-system")})


def injected(ns: str, name: str, node_name: str | None = None, cpu: str = "100m") -> dict[str, Any]:
    p = pod(ns, name, LS, node_name, preferred=NETQOS_TERMS)
    p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    return p


def missing(ns: str, name: str, node_name: str | None = None) -> dict[str, Any]:
    return pod(ns, name, LS, node_name)


def relabelled(name: str, net: str) -> dict[str, Any]:
    return node(name, net)


Event = Callable[[live.World], Any]


def add_node(n: dict[str, Any]) -> Event:
    return lambda w: w.node_event("ADDED", n)


def add_pod(p: dict[str, Any]) -> Event:
    def apply(w: live.World) -> None:
        w.pod_event("qos", "ADDED", p)
        w.bound_event("ADDED", p) if p["spec"].get("nodeName") else None

    return apply


def delete_pod(p: dict[str, Any]) -> Event:
    def apply(w: live.World) -> None:
        w.pod_event("qos", "DELETED", p)
        w.bound_event("DELETED", p)

    return apply


BIG = {"cpu": "4", "memory": "8Gi", "pods": "110"}
CASES = {
    "an injected pod on a fast node counts as injected and fast": (
        [add_node(node("fast-1", "high")), add_pod(injected("shop", "a", "fast-1"))],
        {("shop", "netqos", "injected"): 1},
        {"fast": 1},
        {},
    ),
    "a pod created without the preference counts as missing": (
        [add_node(node("fast-1", "high")), add_pod(missing("shop", "m", "fast-1"))],
        {("shop", "netqos", "missing"): 1},
        {"fast": 1},
        {},
    ),
    "an opted-out pod counts as opted_out": (
        [add_pod(pod("web", "o", LS, annotations=OPT_OUT))],
        {("web", "netqos", "opted_out"): 1},
        {"pending": 1},
        {},
    ),
    "a pod on a slow node while a fast node has room is stranded": (
        [
            add_node(node("fast-1", "high")),
            add_node(node("slow-1", "low")),
            add_pod(injected("shop", "s", "slow-1")),
        ],
        {("shop", "netqos", "injected"): 1},
        {"slow": 1},
        {"shop": 1},
    ),
    "a pod on a slow node is not stranded when the fast node is full": (
        [
            add_node(node("fast-1", "high")),
            add_node(node("slow-1", "low")),
            add_pod(injected("web", "big", "fast-1", cpu="4")),
            add_pod(injected("shop", "s", "slow-1")),
        ],
        {("web", "netqos", "injected"): 1, ("shop", "netqos", "injected"): 1},
        {"fast": 1, "slow": 1},
        {},
    ),
    "a pod that fills the fast node, deleted, leaves the slow pod stranded again": (
        [
            add_node(node("fast-1", "high")),
            add_node(node("slow-1", "low")),
            add_pod(big := injected("web", "big", "fast-1", cpu="4")),
            add_pod(injected("shop", "s", "slow-1")),
            delete_pod(big),
        ],
        {("shop", "netqos", "injected"): 1},
        {"slow": 1},
        {"shop": 1},
    ),
    "a fast node relabelled net=low moves its pods to slow": (
        [
            add_node(node("fast-1", "high")),
            add_pod(injected("shop", "a", "fast-1")),
            add_node(relabelled("fast-1", "low")),
        ],
        {("shop", "netqos", "injected"): 1},
        {"slow": 1},
        {},
    ),
    "a deleted pod is no longer counted": (
        [add_node(node("fast-1", "high")), add_pod(p := injected("shop", "a", "fast-1")), delete_pod(p)],
        {},
        {},
        {},
    ),
    "a pod in kube-system is not admitted there, so it is not counted": (
        [add_pod(missing("kube-system", "k"))],
        {},
        {},
        {},
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_events_give_the_gauges_and_equal_status(name: str) -> None:
    events, selected, classes, stranded = CASES[name]
    world = live.World(frame())
    for event in events:
        event(world)
        assert_equal_to_status(world)
    gauges = world.gauges()
    assert dict(gauges.selected) == selected
    assert {k: v for k, v in gauges.node_class.items() if v} == classes
    assert dict(gauges.stranded) == stranded


def test_a_relist_replaces_the_pods_of_its_store_only() -> None:
    world = live.World(frame())
    world.replace_pods("qos", [injected("shop", "a"), injected("shop", "b")])
    world.replace_pods("other", [injected("web", "c")])
    world.replace_pods("qos", [injected("shop", "b")])
    assert dict(world.gauges().selected) == {
        ("shop", "netqos", "injected"): 1,
        ("web", "netqos", "injected"): 1,
    }


def test_a_node_becoming_fast_asks_for_the_bound_pods_again() -> None:
    world = live.World(frame())
    assert world.node_event("ADDED", node("n1", "low")) is False
    assert world.node_event("MODIFIED", node("n1", "high")) is True
    assert world.node_event("MODIFIED", node("n1", "high")) is False


def test_the_room_on_fast_nodes_is_allocatable_less_what_their_pods_request() -> None:
    world = live.World(frame())
    world.replace_nodes([node("fast-1", "high"), node("fast-2", "high"), node("slow-1", "low")])
    world.replace_bound([injected("shop", "a", "fast-1", cpu="1500m"), injected("shop", "b", "slow-1", cpu="1")])
    room = world.gauges().fast_room
    assert room["cpu"] == pytest.approx(8 - 1.5)
    assert room["pods"] == 220 - 1
    assert room["memory"] == 2 * 8 * 2**30


def test_slim_records_drop_what_the_judgement_does_not_read() -> None:
    p = injected("shop", "a", "fast-1")
    p["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    p["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "x" * 1000}
    p["spec"]["containers"][0]["env"] = [{"name": "A", "value": "b"}]
    slim = live.slim_pod(p)
    assert "managedFields" not in slim["metadata"] and "annotations" not in slim["metadata"]
    assert "env" not in slim["spec"]["containers"][0]
    assert slim["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "100m"}}


def assert_equal_to_status(world: live.World) -> None:
    """The gauges equal `status.analyse` run on the full objects the world holds."""
    pods = list({live.key_of(p): p for held in world.pods.values() for p in held.values()}.values())
    view = dataclasses.replace(
        frame(), nodes=list(world.nodes.values()), pods=pods, pods_on_nodes=lambda h, n: list(world.bound.values())
    )
    report = status.analyse(view)
    gauges = world.gauges()
    assert +gauges.pods == +Counter({k: v for k, v in report.pods.items() if k != "selected"})
    assert +Counter(gauges.node_class) == +Counter({live.NODE_CLASSES[k]: v for k, v in report.placement.items()})
    assert +Counter(gauges.stranded) == +Counter(
        p.namespace for p in report.not_on_high if p.node and status.could_fit(p)
    )


def test_a_node_no_longer_fast_lets_go_of_its_pods() -> None:
    world = live.World(frame())
    world.replace_nodes([node("fast-1", "high")])
    world.replace_bound([injected("shop", "a", "fast-1")])
    world.node_event("MODIFIED", node("fast-1", "low"))
    assert world.bound == {}


def test_two_rules_with_their_own_fast_nodes_are_placed_and_stranded_as_status_says() -> None:
    from tests.fixtures import FIXTURES
    from webhook.policy_file import load_policy

    two = dataclasses.replace(frame(), policy=load_policy(str(FIXTURES / "policy-two-tables.yaml")))
    world = live.World(two)
    for n in (node("high-1", "high"), node("low-1", "low"), node("plain-1")):
        world.node_event("ADDED", n)
    for p in (
        pod("shop", "ls-on-low", LS, "low-1"),
        pod("shop", "batch-on-low", {"qos": "batch"}, "low-1"),
        pod("web", "batch-on-high", {"qos": "batch"}, "high-1"),
        pod("web", "batch-pending", {"qos": "batch"}),
    ):
        world.pod_event(p["metadata"]["labels"]["qos"], "ADDED", p)
        world.bound_event("ADDED", p) if p["spec"].get("nodeName") else None
    pods = list({live.key_of(p): p for held in world.pods.values() for p in held.values()}.values())
    report = status.analyse(
        dataclasses.replace(two, nodes=list(world.nodes.values()), pods=pods, pods_on_nodes=lambda h, n: pods)
    )
    gauges = world.gauges()
    assert +Counter(gauges.node_class) == +Counter({live.NODE_CLASSES[k]: v for k, v in report.placement.items()})
    # each rule against its own best class: batch-on-low is on its fast nodes, batch-on-high on its slow ones
    assert dict(gauges.node_class) == {"fast": 1, "slow": 2, "pending": 1}
    assert +Counter(gauges.stranded) == +Counter(
        p.namespace for p in report.not_on_high if p.node and status.could_fit(p)
    )
    assert {k[1] for k in gauges.selected} == {"netqos", "batch"}
