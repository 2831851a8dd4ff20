"""Where a cycle binds a pod in a cluster of 100 nodes or more: the share of start positions whose
sample the node wins (`sampling.landing`), checked against `cycle.rank` walked from every start,
and the node tree's order the walk follows."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from harness.pods import pod
from webhook.policy import evaluate
from webhook.policy_file import default_policy
from webhook.scheduler import registry, sampling
from webhook.scheduler.cycle import Column, Sampling, rank
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Taint
from webhook.scheduler.read import pod_info
from webhook.scheduler.sampling import landing, tree_order

ZONE = "topology.kubernetes.io/zone"
CPU = {"cpu": 4000, "memory": 8 << 30, "pods": 110}
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def latency_sensitive() -> PodInfo:
    """A latency-sensitive pod as the webhook admits it (the default policy's terms)."""
    outcome = evaluate(default_policy(), pod(labels={"qos": "latency-sensitive"}))
    return pod_info(outcome.pod)


def cluster(count: int, fast: set[int], **extra: dict[int, dict[str, str]]) -> list[Node]:
    labels = extra.get("labels", {})
    return [
        Node(f"n{i:04}", {"net": "high" if i in fast else "low", **labels.get(i, {})}, allocatable=CPU)
        for i in range(count)
    ]


def brute_force(pod_: PodInfo, nodes: list[Node], usage: dict[str, NodeUsage], percentage: int = 0) -> dict[str, float]:
    """`rank` walked from every start position of the node tree's list: each start's best
    nodes, sharing the start's weight."""
    order = tree_order(nodes)
    shares: dict[str, float] = {}
    for start in range(len(order)):
        best = rank(pod_, order, usage, sampling=Sampling(start=start, percentage=percentage)).predicted
        for name in best:
            shares[name] = shares.get(name, 0.0) + 1 / len(order) / len(best)
    return shares


# --- below 100 nodes, or a sample that holds every feasible node: every cycle is alike ---------


@pytest.mark.parametrize(
    ("count", "percentage", "sampled"),
    [(99, 0, False), (100, 0, False), (200, 100, False), (200, 0, True), (1000, 0, True)],
)
def test_a_cycle_scores_a_sample_only_from_100_nodes_and_below_100_percent(count, percentage, sampled):
    found = landing(latency_sensitive(), cluster(count, {0}), percentage=percentage)
    assert found.sampled is sampled
    assert found.walked == count


def test_without_sampling_the_best_node_is_certain_and_ties_share():
    nodes = cluster(50, {3, 7})
    found = landing(latency_sensitive(), nodes)
    assert found.probability == pytest.approx({"n0003": 0.5, "n0007": 0.5})
    assert found.of(["n0003", "n0007"]) == pytest.approx(1.0)


# --- sampling ------------------------------------------------------------------------------------


def test_one_fast_node_among_200_is_in_half_of_the_samples_and_wins_each():
    """200 nodes: 49% of them is 98, raised to 100; the fast node is in the window of 100 of the
    200 start positions, and wins wherever it is."""
    found = landing(latency_sensitive(), cluster(200, {0}))
    assert (found.wanted, found.feasible) == (100, 200)
    assert found.of(["n0000"]) == pytest.approx(0.5)
    assert sum(found.probability.values()) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("count", "fast", "expected"),
    [
        (1000, 1, 420 / 1000),  # 42% of 1,000 nodes are scored
        (5000, 1, 500 / 5000),  # 10%
        (1000, 5, 1 - (1 - 0.42) ** 5),  # about; exactly the union of 5 spread-out windows
    ],
)
def test_sampling_at_1000_and_5000_nodes(count, fast, expected):
    step = count // fast
    found = landing(latency_sensitive(), cluster(count, {i * step for i in range(fast)}))
    share = found.of(n.name for n in cluster(count, set()) if int(n.name[1:]) % step == 0)
    if fast == 1:
        assert share == pytest.approx(expected)
    else:  # evenly spaced windows overlap less than independent ones
        assert share >= expected - 0.01


def test_infeasible_nodes_give_their_start_positions_to_the_next_feasible_node():
    """Starts on a tainted node walk on to the next node that passes: that node's window."""
    nodes = cluster(200, {150})
    tainted = (Taint("dedicated", "x", "NoSchedule"),)
    nodes = [Node(n.name, n.labels, tainted if 40 <= i < 90 else (), allocatable=CPU) for i, n in enumerate(nodes)]
    found = landing(latency_sensitive(), nodes)
    assert found.of(["n0150"]) == pytest.approx(brute_force(latency_sensitive(), nodes, {})["n0150"])


@pytest.mark.parametrize("fast", [0.25, 0.01], ids=["many-fast", "few-fast"])
@pytest.mark.parametrize("seed", range(6, 12))
def test_the_probabilities_are_ranks_walked_from_every_start(seed, fast):
    """Random clusters of 100 to 180 nodes (net classes, PreferNoSchedule taints, NoSchedule
    taints, requests taken): each node's probability is the share of start positions whose
    sampled cycle (`rank` with `Sampling`) predicts it. With few fast nodes most samples hold
    none, and their own best NodeAffinity score (110, not 200) normalises them."""
    rng = random.Random(seed)
    count = rng.randint(100, 180)
    nodes = []
    usage: dict[str, NodeUsage] = {}
    for i in range(count):
        net = "high" if rng.random() < fast else rng.choice(["low", None])
        taints = [Taint("soft", "x", "PreferNoSchedule")] if rng.random() < 0.2 else []
        if rng.random() < 0.15:
            taints.append(Taint("hard", "x", "NoSchedule"))
        labels = {"net": net} if net else {}
        node = Node(f"n{i:04}", labels, tuple(taints), allocatable=CPU, created=T0 + dt.timedelta(seconds=i // 7))
        nodes.append(node)
        cpu, memory = rng.randrange(0, 3000, 50), rng.randrange(0, 6 << 30, 1 << 28)
        usage[node.name] = NodeUsage({"cpu": cpu, "memory": memory}, {"cpu": cpu, "memory": memory}, pods=1)
    percentage = rng.choice([0, 0, 30, 60])
    found = landing(latency_sensitive(), nodes, usage, percentage=percentage)
    expected = brute_force(latency_sensitive(), nodes, usage, percentage)
    assert found.probability.keys() == expected.keys()
    for name, share in expected.items():
        assert found.probability[name] == pytest.approx(share), name


# --- the windows of feasible nodes, against normalising each window on its own -------------------


def normalizers() -> list:
    """The default profile's NormalizeScores, each once (one leaves negative scores out)."""
    found: list = []
    for plugin, _ in registry.score_plugins(registry.DEFAULT_PROFILE):
        if plugin.normalize is not None and all(plugin.normalize is not n for n in found):
            found.append(plugin.normalize)
    return found


def each_window(columns: list[Column], names: list[str], size: int, starts: list[float]) -> dict[str, float]:
    """Window by window: each normalising column scaled to the window's own (min, max), the best
    totals sharing the window's start share."""
    count = len(names)
    shares: dict[str, float] = {}
    for j in range(count):
        window = [(j + i) % count for i in range(size)]
        totals = dict.fromkeys(window, 0)
        for column in columns:
            normalize = column.normalize
            kept = [
                column.raw[n]
                for n in window
                if normalize is None or not normalize.ignore_negative or column.raw[n] >= 0
            ]
            low, high = (min(kept), max(kept)) if kept else (None, None)
            for n in window:
                score = column.raw[n] if normalize is None else normalize.scale(column.raw[n], low, high)
                totals[n] += score * column.weight
        top = max(totals.values())
        best = [n for n in window if totals[n] == top]
        for n in best:
            shares[names[n]] = shares.get(names[n], 0.0) + starts[j] / len(best)
    return shares


def shaped(rng: random.Random, shape: str, count: int, scaled: bool) -> list[int]:
    if shape == "random":
        return [rng.randint(-3, 100) for _ in range(count)]
    if shape == "few-values":  # each window holds the lowest and the highest: one range for all
        return [rng.choice([0, 50, 100]) for _ in range(count)]
    if shape == "falling":  # one range for all, each window's best its first node: many passes, then a sliding maximum
        return (
            [rng.randint(0, 100)] * count
            if scaled
            else sorted((rng.randint(0, 1000) for _ in range(count)), reverse=True)
        )
    if shape == "all-tied":  # every node alike: every window's best is every node of it
        return [rng.randint(0, 100)] * count
    return [rng.choice([0, 0, 0, 0, 7]) for _ in range(count)]  # "rare-best": long runs without one


@pytest.mark.parametrize("shape", ["random", "few-values", "falling", "rare-best", "all-tied"])
@pytest.mark.parametrize("seed", range(40))
def test_every_window_is_normalised_on_its_own_and_its_best_nodes_share_its_start(seed, shape):
    """`windowed` decides runs of windows at once (the highest total first, windows with the same
    range of scores together); each window's own normalisation and best nodes give the same
    shares, named in the order the nodes first win a window."""
    rng = random.Random(seed)
    count = rng.randint(2, 80)
    size = rng.randint(1, count)
    scales = normalizers()
    plain = rng.randint(1 if shape == "falling" else 0, 2)
    columns = [Column("plain", rng.randint(1, 3), shaped(rng, shape, count, False), None) for _ in range(plain)]
    columns += [
        Column("scaled", rng.randint(1, 3), shaped(rng, shape, count, True), rng.choice(scales))
        for _ in range(rng.randint(1, 2))
    ]
    walked = rng.randint(count, 3 * count)
    positions = sorted(rng.sample(range(walked), count))
    names = [f"n{i:04}" for i in range(count)]
    starts = [((p - positions[j - 1]) % walked or walked) / walked for j, p in enumerate(positions)]
    found = sampling.windowed(walked, size, columns, names, positions).probability
    expected = each_window(columns, names, size, starts)
    assert list(found) == list(expected)  # in the order they first win a window
    for name, share in expected.items():
        assert found[name] == pytest.approx(share, rel=1e-12, abs=1e-15), name


# --- the node tree's order -----------------------------------------------------------------------


def zoned(name: str, zone: str | None, seconds: int) -> Node:
    return Node(name, {ZONE: zone} if zone else {}, created=T0 + dt.timedelta(seconds=seconds))


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        ([zoned("b", None, 0), zoned("a", None, 0), zoned("c", None, 1)], ["a", "b", "c"]),
        (
            [zoned("a1", "a", 0), zoned("a2", "a", 1), zoned("a3", "a", 2), zoned("b1", "b", 3), zoned("b2", "b", 4)],
            ["a1", "b1", "a2", "b2", "a3"],
        ),
        ([zoned("late", "z", 0), zoned("x1", "x", 1), zoned("x2", "x", 2)], ["late", "x1", "x2"]),
    ],
    ids=["by-join-then-name", "zones-in-turn", "zones-in-join-order"],
)
def test_the_walk_follows_the_node_trees_order(nodes, expected):
    assert [n.name for n in tree_order(nodes)] == expected


def test_the_zone_key_is_region_and_zone():
    assert sampling.zone_key(Node("n", {})) == ""
    assert sampling.zone_key(Node("n", {ZONE: "a", "topology.kubernetes.io/region": "r"})) == "r:\x00:a"
