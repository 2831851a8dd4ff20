"""The Score plugins' arithmetic: each raw scorer as kube-scheduler computes it, the
normalisations, and Go's integer helpers. Pure functions of numbers, nodes and usage; which
plugin runs which of them, with which weight, is `plugins`.

Sources (kubernetes/kubernetes v1.36): pkg/scheduler/framework/plugins/{tainttoleration,
imagelocality/image_locality.go, noderesources/{least_allocated.go,most_allocated.go,
requested_to_capacity_ratio.go,balanced_allocation.go,resource_allocation.go},
helper/{normalize_score.go,shape_score.go}}; the NetQoS plugin's table:
/work/shared/reference/netqos-scheduler-plugin.txt, docs/scheduling.md.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from webhook.names import MAX_NODE_SCORE
from webhook.policy import Policy, Rule
from webhook.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar
from webhook.scheduler.model import Node, NodeUsage, ScoringStrategy, Taint, Target, Toleration, cache_order
from webhook.scoretable import ScoreTable

# The NetQoS scheduler plugin's port: the pod label it serves and the node label it scores.
NETQOS_POD_LABEL = ("qos", "latency-sensitive")
NETQOS_NODE_LABEL = "net"
NETQOS_TABLE: Mapping[str, int] = {"high": MAX_NODE_SCORE, "low": 0}  # any other value, or none: 10
NETQOS_UNLISTED = 10
NETQOS_TARGET = Target(NETQOS_NODE_LABEL, frozenset(v for v, s in NETQOS_TABLE.items() if s == MAX_NODE_SCORE))
NETQOS_SLOW = frozenset(v for v, s in NETQOS_TABLE.items() if s < NETQOS_UNLISTED)  # low


def fast_target(policy: Policy) -> Target:
    """The nodes `policy` prefers most: the key of its first score table and the values that score
    highest there (above any other value); the NetQoS plugin's `net=high` when no rule has a table
    (terms written by hand)."""
    return _table_target(_fast_table(policy.rules))


def slow_values(policy: Policy) -> frozenset[str]:
    """The values of `fast_target`'s key that `policy` scores lowest, below any other value (the
    plugin's `net=low`): empty when no listed value scores below the unlisted ones."""
    return _table_slow(_fast_table(policy.rules))


def rule_target(policy: Policy, rule: Rule) -> Target:
    """The nodes `rule` prefers most: its own table's key and top-scoring values (`net In [low]`
    for a rule whose table scores low best), else, for terms written by hand, `fast_target`."""
    return _table_target(_fast_table((rule,) + policy.rules))


def rule_slow_values(policy: Policy, rule: Rule) -> frozenset[str]:
    """`slow_values` of `rule`'s own table (`rule_target`'s key)."""
    return _table_slow(_fast_table((rule,) + policy.rules))


def judging_rule(policy: Policy, labels: Mapping[str, str]) -> Rule | None:
    """The rule a pod with `labels` is placed by: the first that selects it and has a score table
    with a best class (`rule_target`), else the first that selects it; None when none does. A pod
    several rules select carries each one's terms; the first table's best class is its target."""
    selecting = [rule for rule in policy.rules if rule.pod_selector.matches(labels)]
    return next((rule for rule in selecting if _fast_table((rule,)) is not None), next(iter(selecting), None))


def _table_target(table: ScoreTable | None) -> Target:
    if table is None:
        return NETQOS_TARGET
    top = max(score for _, score in table.scores)
    return Target(table.key, frozenset(value for value, score in table.scores if score == top))


def _table_slow(table: ScoreTable | None) -> frozenset[str]:
    if table is None:
        return NETQOS_SLOW
    bottom = min(score for _, score in table.scores)
    if bottom >= table.unlisted:
        return frozenset()
    return frozenset(value for value, score in table.scores if score == bottom)


def _fast_table(rules: Iterable[Rule]) -> ScoreTable | None:
    """The first score table of `rules` whose best listed value scores above the unlisted ones."""
    for rule in rules:
        table = rule.table
        if table is not None and table.scores and max(score for _, score in table.scores) > table.unlisted:
            return table
    return None


# ImageLocality's thresholds (image_locality.go).
_MB = 1024 * 1024
IMAGE_MIN_THRESHOLD = 23 * _MB
IMAGE_MAX_CONTAINER_THRESHOLD = 1000 * _MB
# RequestedToCapacityRatio: shape scores are 0-10 (config.MaxCustomPriorityScore), scaled to 0-100.
MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100


def netqos_score(pod_labels: Mapping[str, str], node_labels: Mapping[str, str]) -> int:
    """The NetQoS plugin's score table (see docs/scheduling.md for the plugin's fall-through)."""
    key, value = NETQOS_POD_LABEL
    if pod_labels.get(key) != value:
        return 0
    net = node_labels.get(NETQOS_NODE_LABEL)
    return NETQOS_TABLE.get(net, NETQOS_UNLISTED) if net is not None else NETQOS_UNLISTED


def intolerable_prefer_no_schedule(tolerations: Sequence[Toleration], taints: Sequence[Taint]) -> int:
    """TaintToleration.Score: how many PreferNoSchedule taints no toleration tolerates."""
    return sum(1 for t in taints if t.effect == "PreferNoSchedule" and not any(tol.tolerates(t) for tol in tolerations))


def least_allocated(requested: Sequence[int], allocatable: Sequence[int], weights: Sequence[int]) -> int:
    """least_allocated.go leastResourceScorer: free share x 100, weighted mean over resources."""
    score = weight_sum = 0
    for req, alloc, weight in zip(requested, allocatable, weights, strict=True):
        if alloc == 0:
            continue
        score += (0 if req > alloc else (alloc - req) * MAX_NODE_SCORE // alloc) * weight
        weight_sum += weight
    return score // weight_sum if weight_sum else 0


def most_allocated(requested: Sequence[int], allocatable: Sequence[int], weights: Sequence[int]) -> int:
    """most_allocated.go mostResourceScorer: used share x 100 (capped at full), weighted mean."""
    score = weight_sum = 0
    for req, alloc, weight in zip(requested, allocatable, weights, strict=True):
        if alloc == 0:
            continue
        score += min(req, alloc) * MAX_NODE_SCORE // alloc * weight
        weight_sum += weight
    return score // weight_sum if weight_sum else 0


def broken_linear(shape: Sequence[tuple[int, int]], p: int) -> int:
    """helper.BuildBrokenLinearFunction over (utilization, score) points, in Go's integer division."""
    for i, (utilization, score) in enumerate(shape):
        if p <= utilization:
            if i == 0:
                return score
            u0, s0 = shape[i - 1]
            return s0 + go_div((score - s0) * (p - u0), utilization - u0)
    return shape[-1][1]


def requested_to_capacity_ratio(
    requested: Sequence[int], allocatable: Sequence[int], weights: Sequence[int], shape: Sequence[tuple[int, int]]
) -> int:
    """requested_to_capacity_ratio.go: the shape at each resource's utilisation, weighted, rounded."""
    scaled = [(u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in shape]
    score = weight_sum = 0
    for req, alloc, weight in zip(requested, allocatable, weights, strict=True):
        if alloc == 0:
            continue
        if req > alloc:
            resource_score = broken_linear(scaled, MAX_UTILIZATION)
        else:
            resource_score = broken_linear(scaled, req * MAX_UTILIZATION // alloc)
        if resource_score > 0:
            score += resource_score * weight
            weight_sum += weight
    return go_round(score / weight_sum) if weight_sum else 0


def balanced_allocation(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """balanced_allocation.go balancedResourceScorer: (1 - standard deviation of the used shares) x 100."""
    fractions = [min(req / alloc, 1.0) for req, alloc in zip(requested, allocatable, strict=True) if alloc != 0]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


@dataclass(frozen=True)
class ImageState:
    """fwk.ImageStateSummary as ImageLocality reads it: the one size the scheduler's cache keeps
    for an image name, and how many nodes list the name (NumNodes)."""

    size: int
    nodes: int


def image_states(images: Iterable[str], nodes: Iterable[Node]) -> dict[str, ImageState]:
    """The cache's summary of each of `images` that a node lists, over `nodes`: every node of the
    cluster, not only the feasible ones (the cache holds them all, and Score divides by them all).

    kube-scheduler keeps ONE size per image name (v1.36.3 pkg/scheduler/backend/cache/cache.go
    addNodeImageStates): the first node the cache adds that lists the name creates its summary
    with that entry's sizeBytes; later nodes only join its node set, whatever size they report,
    and the summary stays until no node lists the name (removeNodeImageStates). ImageLocality
    scores every node that holds the image by that size (framework/plugins/imagelocality/
    image_locality.go sumImageScores, scaledImageScore). The first node is taken to be the oldest
    (`model.cache_order`), the informer's order being unknown here."""
    wanted = frozenset(images)
    first: dict[str, Node] = {}
    count: Counter[str] = Counter()
    for node in nodes:
        for name in wanted:
            if name not in node.images:
                continue
            count[name] += 1
            held = first.get(name)
            if held is None or cache_order(node) < cache_order(held):
                first[name] = node
    return {name: ImageState(node.images[name], count[name]) for name, node in first.items()}


def image_locality(
    images: Sequence[str], node: Node, states: Mapping[str, ImageState], total_nodes: int, containers: int
) -> int:
    """image_locality.go: the sizes of the pod's images already on the node (its containers' and
    its image volumes'), each the size the cache keeps for it (`image_states`) scaled by the share
    of nodes that have it, clamped between 23 MB and 1000 MB per container (image volumes add no
    room), to 0-100."""
    total = sum(int(states[i].size * (states[i].nodes / total_nodes)) for i in images if i in node.images)
    max_threshold = IMAGE_MAX_CONTAINER_THRESHOLD * containers
    if max_threshold <= IMAGE_MIN_THRESHOLD:  # no containers: Go divides by a negative range
        return 0
    clamped = min(max(total, IMAGE_MIN_THRESHOLD), max_threshold)
    return MAX_NODE_SCORE * (clamped - IMAGE_MIN_THRESHOLD) // (max_threshold - IMAGE_MIN_THRESHOLD)


def default_normalize(scores: Sequence[int], reverse: bool = False) -> list[int]:
    """helper.DefaultNormalizeScore(MaxNodeScore, reverse) over non-negative scores."""
    top = max(scores, default=0)
    return [normalized(score, top, reverse) for score in scores]


def normalized(score: int, top: int, reverse: bool = False) -> int:
    """One score of `default_normalize`, given the best raw score `top` of the nodes normalised."""
    if top == 0:
        return MAX_NODE_SCORE if reverse else 0
    value = MAX_NODE_SCORE * score // top
    return MAX_NODE_SCORE - value if reverse else value


def normalize(raw_scores: Sequence[int]) -> list[int]:
    """NodeAffinity's normalisation: DefaultNormalizeScore(MaxNodeScore, reverse=false)."""
    return default_normalize(raw_scores)


def go_div(a: int, b: int) -> int:
    """Go's integer division, which truncates toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def go_round(x: float) -> int:
    """math.Round: half away from zero."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def _resource_vectors(
    resources: Sequence[tuple[str, int]],
    pod_request: Mapping[str, int],
    node: Node,
    usage: NodeUsage,
    non_zero: bool,
) -> tuple[list[int], list[int], list[int]]:
    """resourceAllocationScorer.score's inputs: (requested incl. the pod, allocatable, weights).

    calculateResourceAllocatableRequest: cpu and memory count the node's non-zero requests when
    `non_zero` (NodeResourcesFit) and its real requests otherwise (BalancedAllocation); an
    extended resource the pod does not request is left out (0, 0).
    """
    requested, allocatable, weights = [], [], []
    node_alloc = node.allocatable or {}
    node_used = usage.non_zero_requested if non_zero else usage.requested
    for name, weight in resources:
        wanted = pod_request.get(name, 0)
        alloc = node_alloc.get(name, 0)
        if name in (CPU, MEMORY):
            used = node_used.get(name, 0)
        elif name == EPHEMERAL_STORAGE or (is_scalar(name) and wanted and name in node_alloc):
            used = usage.requested.get(name, 0)
        else:
            alloc = used = 0
        requested.append(used + wanted if alloc else 0)
        allocatable.append(alloc)
        weights.append(weight)
    return requested, allocatable, weights


def fit_score(pod_request: Mapping[str, int], node: Node, usage: NodeUsage, strategy: ScoringStrategy) -> int:
    """NodeResourcesFit.Score with its scoring strategy; `pod_request` is the non-zero request."""
    requested, allocatable, weights = _resource_vectors(strategy.resources, pod_request, node, usage, True)
    if strategy.type == "MostAllocated":
        return most_allocated(requested, allocatable, weights)
    if strategy.type == "RequestedToCapacityRatio":
        return requested_to_capacity_ratio(requested, allocatable, weights, strategy.shape)
    return least_allocated(requested, allocatable, weights)


def balanced_score(
    pod_request: Mapping[str, int], node: Node, usage: NodeUsage, resources: Sequence[tuple[str, int]]
) -> int:
    """NodeResourcesBalancedAllocation.Score as kube-scheduler 1.36 computes it; `pod_request` is
    the real (not non-zero) request.

    Since Kubernetes 1.36 (balanced_allocation.go balancedResourceScorer) it scores how much the
    pod improves the node's balance: 50 + (50 + balance with the pod - balance without it) / 2,
    each balance `balanced_allocation` of the used shares; 75 when the pod changes nothing.
    """
    requested, allocatable, _ = _resource_vectors(resources, pod_request, node, usage, False)
    allocated = [
        used - pod_request.get(name, 0) if alloc else 0
        for (name, _), used, alloc in zip(resources, requested, allocatable, strict=True)
    ]
    with_pod = balanced_allocation(requested, allocatable)
    without_pod = balanced_allocation(allocated, allocatable)
    half = MAX_NODE_SCORE // 2
    return half + go_div(half + with_pod - without_pod, 2)


def balanced_score_with_pod(
    pod_request: Mapping[str, int], node: Node, usage: NodeUsage, resources: Sequence[tuple[str, int]]
) -> int:
    """NodeResourcesBalancedAllocation.Score before Kubernetes 1.36 (v1.35 balanced_allocation.go):
    the balance of the node's used shares with the pod on it, `balanced_allocation`."""
    requested, allocatable, _ = _resource_vectors(resources, pod_request, node, usage, False)
    return balanced_allocation(requested, allocatable)


def is_best_effort(request: Mapping[str, int], resources: Sequence[tuple[str, int]]) -> bool:
    """BalancedAllocation.PreScore skips a pod that requests none of its resources."""
    return not any(request.get(name, 0) for name, _ in resources)
