"""Where one scheduling cycle binds a pod in a cluster of 100 nodes or more, as a probability per
node. Pure: the pod, the cluster and the profile in, a `Landing` out.

Above 100 nodes kube-scheduler does not filter every node. Each cycle walks the node list from
`nextStartNodeIndex`, round the end, and stops once it has found numFeasibleNodesToFind feasible
nodes (`cycle.nodes_scored_at_most`: adaptive, 50% less one point per 125 nodes, at least 5% and
100 nodes; or the profile's percentageOfNodesToScore); only those are scored, and normalised
against each other. The start then moves on by the nodes the cycle processed, so from one pod to
the next it goes round the list (kubernetes v1.36.3 pkg/scheduler/schedule_one.go:
findNodesThatFitPod, findNodesThatPassFilters, numFeasibleNodesToFind).

Which nodes a cycle scores thus depends on where it starts, which the cluster's history of
cycles decides and nobody outside the scheduler sees. This module takes every start alike: for
each start position, the window of feasible nodes the walk finds from there, its scores
normalised over that window, and its best node(s) (tied nodes share it: `cycle.TIES`); a node's
probability is the share of start positions that end on it. Within one cycle the scheduler
filters in parallel and stops when enough nodes passed, so the last few nodes of a window may
differ from the walk in order; the model walks in order.

The node list is the scheduler's node tree (pkg/scheduler/backend/cache/node_tree.go `list`):
zones in the order their first node joined, one node of each zone in turn, each zone's nodes in
the order they joined (`model.cache_order`), a zone being the node's region and zone labels
(k8s.io/component-helpers node/topology GetZoneKey). A PreFilter that names nodes (NodeAffinity's
metadata.name terms) narrows the walk to those nodes.

PreScore reads the filtered nodes: PodTopologySpread's topology weights count their domains. Here
every window is scored with the PreScore state of all the feasible nodes; for a single constraint
that weight scales every node alike, which its normalisation cancels.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from webhook.scheduler import cycle
from webhook.scheduler.cycle import Column, Ranking
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Profile, Snapshot, cache_order
from webhook.scheduler.registry import DEFAULT_PROFILE

ZONE_LABELS = ("failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone")
REGION_LABELS = ("failure-domain.beta.kubernetes.io/region", "topology.kubernetes.io/region")


@dataclass(frozen=True)
class Landing:
    """Where a cycle binds the pod: `probability` of each node (only nodes that can be chosen
    appear; the values sum to 1, or the map is empty when no node can be: the pod stays
    Pending). `walked`: the nodes a cycle walks; `wanted`: how many feasible ones it stops at;
    `feasible`: how many there are."""

    walked: int
    wanted: int
    feasible: int
    probability: Mapping[str, float]

    @property
    def sampled(self) -> bool:
        """A cycle scores only some of the feasible nodes, so where it starts matters."""
        return self.feasible > self.wanted

    def of(self, names: Iterable[str]) -> float:
        """The probability that the pod is bound to one of `names`."""
        return sum(self.probability.get(name, 0.0) for name in set(names))


def zone_key(node: Node) -> str:
    """GetZoneKey: region and zone (the beta labels first), "" when the node has neither."""
    zone = next((node.labels[k] for k in ZONE_LABELS if k in node.labels), "")
    region = next((node.labels[k] for k in REGION_LABELS if k in node.labels), "")
    return "" if not zone and not region else f"{region}:\x00:{zone}"


def tree_order(nodes: Iterable[Node]) -> list[Node]:
    """The nodes as the scheduler's node tree lists them: a node of each zone in turn, zones
    in the order their first node joined, each zone's nodes in the order they joined."""
    zones: dict[str, list[Node]] = {}
    for node in sorted(nodes, key=cache_order):
        zones.setdefault(zone_key(node), []).append(node)
    columns = list(zones.values())
    longest = max((len(c) for c in columns), default=0)
    return [column[i] for i in range(longest) for column in columns if i < len(column)]


def landing(
    pod: PodInfo,
    nodes: Sequence[Node],
    usage: Mapping[str, NodeUsage] | None = None,
    profile: Profile = DEFAULT_PROFILE,
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    percentage: int | None = None,
    ranking: Ranking | None = None,
) -> Landing:
    """The probability of each node that one cycle binds `pod` there, over every start position
    (`percentage`: percentageOfNodesToScore, 0 for the adaptive default; the profile's when None).
    `ranking`: the pod's `cycle.rank` over every one of `nodes` without sampling, when the caller
    has it (the result does not depend on their order)."""
    order, walked, wanted = walk(pod, nodes, profile, percentage)
    if ranking is None:
        ranking = cycle.rank(pod, order, usage, profile, namespaces=namespaces)
    passed = {n.name for n in ranking.nodes if n.feasible}
    if len(passed) <= wanted or ranking.scoring_fails:
        return Landing(len(walked), wanted, len(passed), _shared(ranking))
    chosen = [n for n in order if n.name in passed]
    snapshot = Snapshot(order, usage or {}, chosen, namespaces or {})
    columns, _ = cycle.raw_columns(pod, snapshot, profile)
    position = {n.name: i for i, n in enumerate(walked)}
    return windowed(len(walked), wanted, columns, [n.name for n in chosen], [position[n.name] for n in chosen])


def walk(
    pod: PodInfo,
    nodes: Sequence[Node],
    profile: Profile = DEFAULT_PROFILE,
    percentage: int | None = None,
    order: list[Node] | None = None,
) -> tuple[list[Node], list[Node], int]:
    """The nodes in the node tree's order, those a cycle walks (PreFilter's names; every node
    when it names none) and how many feasible ones it stops at (`percentage` as `landing`'s).
    `order`: `tree_order(nodes)`, when the caller keeps it."""
    order = tree_order(nodes) if order is None else order
    _, excluded = cycle.prefilter(pod, order, profile)
    walked = [n for n in order if not excluded(n)]
    if percentage is None:
        percentage = profile.percentage_of_nodes_to_score
    return order, walked, cycle.nodes_scored_at_most(len(walked), percentage)


def windowed(
    walked: int, wanted: int, columns: Sequence[Column], names: Sequence[str], positions: Sequence[int]
) -> Landing:
    """The landing of a cycle that scores `wanted` of more feasible nodes: `names`, in the walk's
    order, at `positions` in the `walked` nodes, their raw scores in `columns` (`cycle.raw_columns`
    over them, in that order)."""
    starts = _start_shares(positions, walked)
    return Landing(walked, wanted, len(names), _windows(columns, names, wanted, starts))


def _shared(ranking: Ranking) -> dict[str, float]:
    """Every cycle scores every feasible node: the best share the pod."""
    best = ranking.predicted
    return {name: 1 / len(best) for name in best}


def _start_shares(positions: Sequence[int], walked: int) -> list[float]:
    """For each feasible node, in walk order (`positions` in the walked list), the share of start
    positions whose walk finds it first: those after the previous feasible node, up to it."""
    return [((p - positions[j - 1]) % walked or walked) / walked for j, p in enumerate(positions)]


def _windows(columns: Sequence[Column], names: Sequence[str], size: int, starts: Sequence[float]) -> dict[str, float]:
    """Each window of `size` consecutive feasible nodes (round the end), entered with the share
    `starts[j]` at its first node j: its scores normalised over the window, its best nodes.
    Windows whose normalising columns span the same range share their totals, and consecutive
    windows with the same best nodes share one sum of their shares (`_best_runs`)."""
    count = len(names)
    plain = [c for c in columns if c.normalize is None]
    scaled = [c for c in columns if c.normalize is not None]
    # the weighted scores that do not depend on the window, per node (integers: any order sums alike)
    base = [0] * count
    for column in plain:
        base = list(map(operator.add, base, map(column.weight.__mul__, column.raw)))
    runs: list[tuple[int, int, list[int]]] = []
    for j, end, key in _range_groups(scaled, size, count):
        length = end - j + size
        totals = _totals(scaled, key, _rotated(base, j, length), j, length)
        nodes = [(j + i) % count for i in range(length)]
        runs += [(j + first, j + last, best) for first, last, best in _best_runs(totals, size, end - j + 1, nodes)]
    runs.sort(key=lambda run: run[0])  # in window order: nodes are named in the order they first win
    # summed per node position (a list: with every node tied, each window adds to every node of it)
    summed: list[float | None] = [None] * count
    order: list[int] = []
    for first, last, best in runs:
        share = sum(starts[first:last]) / len(best)
        for n in best:
            before = summed[n]
            if before is None:
                summed[n] = share
                order.append(n)
            else:
                summed[n] = before + share
    return {names[n]: summed[n] or 0.0 for n in order}


def _rotated(values: Sequence[int], start: int, length: int) -> list[int]:
    """values[(start + i) % len(values)] for each i below `length` (at most twice the values)."""
    return [*values[start:], *values, *values][:length]


def _range_groups(
    columns: Sequence[Column], size: int, count: int
) -> list[tuple[int, int, tuple[tuple[int | None, int | None], ...]]]:
    """(first, last, ranges): the windows first..last (by their first node) over whose nodes each
    normalising column spans the same (min, max), consecutive windows grouped."""
    constant = [_constant_extremes(c, size) for c in columns]
    if all(c is not None for c in constant):  # most worlds: every window holds each column's extremes
        return [(0, count - 1, tuple(c for c in constant if c is not None))]
    ranges = list(zip(*(_sliding_extremes(c, size) for c in columns), strict=True)) if columns else [()] * count
    groups = []
    j = 0
    while j < count:
        end = j
        while end + 1 < count and ranges[end + 1] == ranges[j]:
            end += 1
        groups.append((j, end, ranges[j]))
        j = end + 1
    return groups


def _totals(
    columns: Sequence[Column],
    ranges: Sequence[tuple[int | None, int | None]],
    base: list[int],
    start: int,
    length: int,
) -> list[int]:
    """The totals of the `length` nodes from `start` (round the end): `base` (theirs) plus each
    normalising column scaled to its range (a NormalizeScore's scale reads the raw score and the
    range alone, so once per raw value)."""
    totals = base
    for column, (low, high) in zip(columns, ranges, strict=True):
        assert column.normalize is not None
        scale, weight = column.normalize.scale, column.weight
        raw = _rotated(column.raw, start, length)
        scaled = {value: scale(value, low, high) * weight for value in set(raw)}
        totals = list(map(operator.add, totals, map(scaled.__getitem__, raw)))
    return totals


def _constant_extremes(column: Column, size: int) -> tuple[int | None, int | None] | None:
    """The column's (min, max) when every window of `size` holds both, None when some does not."""
    assert column.normalize is not None
    values = column.raw
    kept = [v for v in values if v >= 0] if column.normalize.ignore_negative else values
    if not kept:
        return (None, None)
    least, most = min(kept), max(kept)
    if _in_every_window(values, least, size) and _in_every_window(values, most, size):
        return (least, most)
    return None


def _sliding_extremes(column: Column, size: int) -> list[tuple[int | None, int | None]]:
    """(min, max) of the column's raw scores over each window of `size` from each start, the
    values the normaliser leaves out (negative, with `ignore_negative`) not counted."""
    assert column.normalize is not None
    values = column.raw
    count = len(values)
    constant = _constant_extremes(column, size)
    if constant is not None:
        return [constant] * count
    ignore = column.normalize.ignore_negative
    low: deque[int] = deque()
    high: deque[int] = deque()
    out: list[tuple[int | None, int | None]] = []
    for i in range(count + size - 1):
        value = values[i % count]
        if not (ignore and value < 0):
            while low and values[low[-1] % count] >= value:
                low.pop()
            low.append(i)
            while high and values[high[-1] % count] <= value:
                high.pop()
            high.append(i)
        start = i - size + 1
        if start < 0:
            continue
        while low and low[0] < start:
            low.popleft()
        while high and high[0] < start:
            high.popleft()
        out.append((values[low[0] % count], values[high[0] % count]) if low else (None, None))
    return out


def _in_every_window(values: Sequence[int], value: int, size: int) -> bool:
    """Every window of `size` consecutive values (round the end) holds `value`. Each such window
    holds a whole block of size // 2 aligned from the first value, so blocks that all hold it
    settle it at C speed; otherwise no two of its positions, round the end, may be more than
    `size` apart."""
    count, block = len(values), size // 2
    if block and value in values:
        extended = [*values, *values[:size]]
        if all(value in extended[k : k + block] for k in range(0, count + size - block + 1, block)):
            return True
    at = _positions(values, value, 0, count)
    if not at:
        return False
    gaps = (b - a for a, b in zip(at, [*at[1:], at[0] + count], strict=True))
    return max(gaps) <= size


def _positions(values: Sequence[int], value: int, start: int, stop: int) -> list[int]:
    """The positions of `value` in values[start:stop], found by the list's own search."""
    found: list[int] = []
    i = start - 1
    while True:
        try:
            i = values.index(value, i + 1, stop)
        except ValueError:
            return found
        found.append(i)


SCANS = 8  # passes over the totals `_best_runs` makes before one sliding maximum takes over


def _best_runs(totals: list[int], size: int, windows: int, nodes: Sequence[int]) -> list[tuple[int, int, list[int]]]:
    """(first, last, best) for each run of consecutive windows of `size` over `totals` (window s
    covers s..s+size-1, the first `windows` of them): windows first..last-1 have the same best
    positions, whose `nodes` are `best`. The highest total decides at once every window that holds one of its
    positions; the windows between them are searched again, their highest total being lower.
    Past `SCANS` passes over the totals (scores falling steadily along the walk), the rest are
    decided by one sliding maximum."""
    runs: list[tuple[int, int, list[int]]] = []
    todo = [(0, windows)]
    scanned = 0
    while todo:
        a, b = todo.pop()
        stop = b - 1 + size  # the positions the windows a..b-1 hold
        if scanned > SCANS * len(totals):
            runs += _sliding_runs(totals, size, a, b, nodes)
            continue
        scanned += stop - a
        at = _positions(totals, max(totals[a:stop]), a, stop)
        named = [nodes[p] for p in at]  # once: each run's best nodes are a slice of them
        # the best positions change where one of `at` enters a window or leaves it
        cuts = sorted({a, b, *(min(max(p - size + 1, a), b) for p in at), *(min(p + 1, b) for p in at)})
        for first, last in itertools.pairwise(cuts):
            low, high = bisect.bisect_left(at, first), bisect.bisect_right(at, first + size - 1)
            if low < high:
                runs.append((first, last, named[low:high]))
            else:
                todo.append((first, last))
    return runs


def _sliding_runs(
    totals: Sequence[int], size: int, a: int, b: int, nodes: Sequence[int]
) -> list[tuple[int, int, list[int]]]:
    """`_best_runs` for the windows a..b-1, by one sliding maximum over their positions."""
    runs: list[tuple[int, int, list[int]]] = []
    for start, found in _window_bests(totals[a : b - 1 + size], size, b - a):
        s, best = a + start, [nodes[a + i] for i in found]
        if runs and runs[-1][1] == s and runs[-1][2] == best:
            runs[-1] = (runs[-1][0], s + 1, best)
        else:
            runs.append((s, s + 1, best))
    return runs


def _window_bests(totals: Sequence[int], size: int, windows: int) -> Iterable[tuple[int, list[int]]]:
    """For each of `windows` windows of `size` over `totals` (window s covers s..s+size-1): s
    and the positions of its best total."""
    positions: dict[int, list[int]] = {}
    for i, total in enumerate(totals):
        positions.setdefault(total, []).append(i)
    high: deque[int] = deque()
    for i, total in enumerate(totals):
        while high and totals[high[-1]] <= total:
            high.pop()
        high.append(i)
        start = i - size + 1
        if start < 0:
            continue
        while high[0] < start:
            high.popleft()
        at = positions[totals[high[0]]]
        yield start, at[bisect.bisect_left(at, start) : bisect.bisect_right(at, i)]
        if start + 1 >= windows:
            return
