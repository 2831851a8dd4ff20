"""The what-if world keeps which nodes run a pod with pod (anti-)affinity terms as pods move, and a
snapshot narrowed to the feasible nodes keeps it too, as does a landing's snapshot over the node
tree's order: each says what `Snapshot.with_affinity` derives over every node, so InterPodAffinity
reads the same nodes whichever way it is asked. Each snapshot's usage is the world's after the
moves."""

from __future__ import annotations

import random

import pytest

from harness.pods import pod
from webhook.scheduler.incremental import World, _Sampler
from webhook.scheduler.model import Node, PodInfo, Snapshot, UsageTally
from webhook.scheduler.plugins.netqos import NETQOS_TARGET
from webhook.scheduler.read import pod_info
from webhook.scheduler.registry import DEFAULT_PROFILE

ALLOCATABLE = {"cpu": 64000, "memory": 256 << 30, "pods": 110}
SELF = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
SPREAD_OUT = {
    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": SELF}]}
}


def web(with_terms: bool) -> PodInfo:
    spec = pod(labels={"app": "web"})
    if with_terms:
        spec["spec"]["affinity"] = SPREAD_OUT
    return pod_info(spec)


def derived(snapshot: Snapshot) -> tuple[Node, ...]:
    """`with_affinity` as a snapshot nobody told derives it."""
    return Snapshot(snapshot.nodes, snapshot.usage, snapshot.feasible, snapshot.namespaces).with_affinity


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_worlds_affinity_nodes_equal_those_derived_after_every_move(seed):
    rng = random.Random(seed)
    nodes = [Node(f"n{i:02}", {}, allocatable=ALLOCATABLE) for i in range(30)]
    tallies = {n.name: UsageTally() for n in nodes}
    for i in rng.sample(range(30), 6):
        tallies[nodes[i].name].add(web(True))
    w = World(nodes, tallies, DEFAULT_PROFILE, NETQOS_TARGET)
    placed: list[tuple[int, PodInfo]] = [
        (w.index[name], p) for name, t in tallies.items() for p in t.usage().with_affinity
    ]
    assert w.snapshot().with_affinity == derived(w.snapshot()) and len(w.snapshot().with_affinity) == 6
    for _ in range(60):
        if placed and rng.random() < 0.5:  # one leaves: its node may have no such pod left
            i, p = placed.pop(rng.randrange(len(placed)))
            w.move(i, p, remove=True)
        else:  # one arrives, with terms or without
            i, p = rng.randrange(30), web(rng.random() < 0.5)
            w.move(i, p, remove=False)
            if p.pod_affinity.preferred_anti:
                placed.append((i, p))
        snapshot = w.snapshot()
        assert snapshot.with_affinity == derived(snapshot)
        assert snapshot.usage == {n.name: t.usage() for n, t in zip(w.nodes, w.tallies, strict=True)}
        narrowed = snapshot.narrowed(snapshot.nodes[::3])
        assert narrowed.feasible == snapshot.nodes[::3] and narrowed.with_affinity == derived(snapshot)


def test_a_narrowed_snapshot_derives_what_it_was_not_told():
    nodes = [Node("a", {}, allocatable=ALLOCATABLE), Node("b", {}, allocatable=ALLOCATABLE)]
    tally = UsageTally()
    tally.add(web(True))
    snapshot = Snapshot(nodes, {"b": tally.usage()}, nodes)
    assert snapshot.narrowed(nodes[:1]).with_affinity == (nodes[1],)


def test_a_landings_snapshot_over_the_node_trees_order_is_told_its_affinity_nodes_in_that_order():
    """Above 100 nodes a landing walks the node tree (zones in turn), not the name order."""
    rng = random.Random(4)
    zone = "topology.kubernetes.io/zone"
    nodes = [Node(f"n{i:03}", {zone: f"z{i // 50}"}, allocatable=ALLOCATABLE) for i in range(150)]
    tallies = {n.name: UsageTally() for n in nodes}
    for i in rng.sample(range(150), 20):
        tallies[nodes[i].name].add(web(True))
    w = World(nodes, tallies, DEFAULT_PROFILE, NETQOS_TARGET)
    for i in rng.sample(range(150), 10):
        w.move(i, web(True), remove=False)
    sampler = _Sampler(web(False), w, DEFAULT_PROFILE)
    assert [n.name for n in sampler.order][:4] == ["n000", "n050", "n100", "n001"]
    told = sampler._with_affinity()
    assert told == Snapshot(sampler.order, w.snapshot().usage, sampler.order).with_affinity
    assert len(told) == len(w.with_affinity) >= 20
