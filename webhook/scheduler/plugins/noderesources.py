"""kube-scheduler's noderesources package: NodeResourcesFit (Filter: every resource the node lacks;
Score: its scoring strategy, LeastAllocated, MostAllocated or RequestedToCapacityRatio) and
NodeResourcesBalancedAllocation (Score: how balanced the node's used shares are, as each release
computes it).

Sources: kubernetes/kubernetes v1.36 pkg/scheduler/framework/plugins/noderesources/{fit.go,
least_allocated.go,most_allocated.go,requested_to_capacity_ratio.go,balanced_allocation.go,
resource_allocation.go}, pkg/scheduler/framework/plugins/helper/shape_score.go; v1.35
balanced_allocation.go for `BALANCED_ALLOCATION_WITH_POD`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from webhook.names import MAX_NODE_SCORE
from webhook.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, is_scalar
from webhook.scheduler.framework import FilterPlugin, Reads, ScorePlugin, go_div, go_round
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Profile, ScoringStrategy, Snapshot
from webhook.validation import is_qualified_name

NAME = "NodeResourcesFit"
BALANCED_ALLOCATION = "NodeResourcesBalancedAllocation"
# The variant releases before 1.36 run (`registry.VERSION_VARIANTS`), by the name of its table entry.
BALANCED_ALLOCATION_WITH_POD = "NodeResourcesBalancedAllocation (before 1.36)"
REASON_TOO_MANY_PODS = "Too many pods"  # noderesources: InsufficientResource for pods


def node_resources_fit(pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile) -> tuple[str, ...]:
    """NodeResourcesFit: every resource the node lacks for the pod, but the extended resources
    its args ignore (`checked_scalars`)."""
    scalars = pod.scalar_requests
    if profile.ignored_resources or profile.ignored_resource_groups:
        scalars = checked_scalars(scalars, profile.ignored_resources, profile.ignored_resource_groups)
    return insufficient_resources(pod.requests, node.allocatable, usage, scalars)


def checked_scalars(scalars: Sequence[str], ignored: frozenset[str], ignored_groups: frozenset[str]) -> tuple[str, ...]:
    """The scalar resources NodeResourcesFit's Filter checks: an extended resource is skipped when
    NodeResourcesFitArgs.ignoredResources names it or ignoredResourceGroups names the part of its
    name before "/" (noderesources/fit.go fitsRequest, v1.36.3); hugepages and
    `kubernetes.io/` resources are never skipped."""
    return tuple(
        name
        for name in scalars
        if not (is_extended_resource(name) and (name in ignored or name.split("/", 1)[0] in ignored_groups))
    )


def is_extended_resource(name: str) -> bool:
    """v1helper.IsExtendedResourceName (pkg/apis/core/v1/helper/helpers.go, v1.36.3): a name with
    a "/" outside the kubernetes.io/ namespace, not `requests.`-prefixed, that is a qualified name
    once prefixed so."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return not is_qualified_name(f"requests.{name}")


def insufficient_resources(
    request: Mapping[str, int],
    allocatable: Mapping[str, int] | None,
    usage: NodeUsage,
    scalars: Sequence[str] | None = None,
) -> tuple[str, ...]:
    """NodeResourcesFit.Filter (fitsRequest): every resource the node lacks, with its reason.

    A Node object without status.allocatable reads as {}: nothing allocatable, as NodeInfo's zero
    Allocatable, so no pod fits it (Too many pods). None (a model built without resources) is not
    checked. `scalars`: the scalar resources of `request`, sorted, when the caller has them already.
    """
    if allocatable is None:
        return ()
    reasons = []
    if usage.pods + 1 > allocatable.get(PODS, 0):
        reasons.append(REASON_TOO_MANY_PODS)
    if scalars is None:
        scalars = sorted(name for name in request if is_scalar(name))
    if not any(request.get(name, 0) for name in (CPU, MEMORY, EPHEMERAL_STORAGE)) and not scalars:
        return tuple(reasons)
    for name in (CPU, MEMORY, EPHEMERAL_STORAGE, *scalars):
        wanted = request.get(name, 0)
        if wanted > 0 and wanted > allocatable.get(name, 0) - usage.requested.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return tuple(reasons)


# RequestedToCapacityRatio: shape scores are 0-10 (config.MaxCustomPriorityScore), scaled to 0-100.
MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100


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


def _resource_vectors(
    resources: Sequence[tuple[str, int]], pod_request: Mapping[str, int], node: Node, usage: NodeUsage, non_zero: bool
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


def _fit_state(pod: PodInfo, snapshot: Snapshot, profile: Profile) -> Any:
    return pod.scored_requests, profile.scoring_strategy


def _fit_score(state: Any, node: Node, usage: NodeUsage) -> int:
    request, strategy = state
    return fit_score(request, node, usage, strategy)


def _balanced_state(pod: PodInfo, snapshot: Snapshot, profile: Profile) -> Any:
    if is_best_effort(pod.requests, profile.balanced_resources):
        return None
    return pod.requests, profile.balanced_resources


def _balanced_score(state: Any, node: Node, usage: NodeUsage) -> int:
    return balanced_score(state[0], node, usage, state[1])


def _balanced_with_pod_score(state: Any, node: Node, usage: NodeUsage) -> int:
    return balanced_score_with_pod(state[0], node, usage, state[1])


def _requests_key(pod: PodInfo, profile: Profile) -> Hashable:
    return tuple(sorted(pod.requests.items())), tuple(sorted(pod.scored_requests.items()))


FIT_FILTER = FilterPlugin(NAME, node_resources_fit, Reads.USAGE, lambda pod: tuple(sorted(pod.requests.items())))
FIT_SCORE = ScorePlugin(NAME, _fit_state, _fit_score, None, Reads.USAGE, _requests_key)
BALANCED_SCORE = ScorePlugin(BALANCED_ALLOCATION, _balanced_state, _balanced_score, None, Reads.USAGE, _requests_key)
BALANCED_SCORE_WITH_POD = ScorePlugin(
    BALANCED_ALLOCATION, _balanced_state, _balanced_with_pod_score, None, Reads.USAGE, _requests_key
)
