"""PodTopologySpread as kube-scheduler v1.36 runs it: the pod's own topologySpreadConstraints,
or, for a pod without any, the profile's default constraints with the selector of the Services
and controller that select the pod (`PodInfo.default_spread`): the system defaults (hostname
maxSkew 3, zone maxSkew 5, both ScheduleAnyway) under PodTopologySpreadArgs' defaultingType
System, the args' defaultConstraints under List (`Profile.spread_defaults`; none: such a pod is
not spread). DoNotSchedule constraints filter, ScheduleAnyway ones score.

Filter (PreFilter then Filter): per constraint, the matching pods of the pod's namespace per
topology domain, over the nodes that carry every constraint's key and pass the node inclusion
policies (nodeAffinityPolicy Honor by default, nodeTaintsPolicy Ignore); a node fails when its
domain's count + 1 (if the pod matches its own selector) - the smallest domain's count exceeds
maxSkew, the smallest count being 0 while there are fewer domains than minDomains. Score
(PreScore, Score, NormalizeScore): per constraint, count x log(domains + 2) + maxSkew - 1,
summed and rounded; the node with the fewest matching pods scores 100; nodes lacking a key of
the pod's own constraints, or of a List's default constraints, are ignored (0).

Sources: kubernetes v1.36.3 pkg/scheduler/framework/plugins/podtopologyspread/{common.go,
filtering.go,scoring.go,plugin.go (New, systemDefaultConstraints)}, pkg/scheduler/framework/
plugins/helper/spread.go (DefaultSelector).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from webhook.names import MAX_NODE_SCORE
from webhook.scheduler.framework import FilterPlugin, Normalize, Reads, ScorePlugin, no_filter
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Snapshot, SpreadConstraint, selects
from webhook.scheduler.plugins.nodeaffinity import required_affinity_matches
from webhook.scheduler.plugins.tainttoleration import first_untolerated_taint

NAME = "PodTopologySpread"
HOSTNAME = "kubernetes.io/hostname"  # v1.LabelHostname
ZONE = "topology.kubernetes.io/zone"  # v1.LabelTopologyZone
DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"
REASON_CONSTRAINTS = "node(s) didn't match pod topology spread constraints"  # ErrReasonConstraintsNotMatch
REASON_MISSING_LABEL = REASON_CONSTRAINTS + " (missing required label)"  # ErrReasonNodeLabelNotMatch
SYSTEM_DEFAULT_CONSTRAINTS = (
    SpreadConstraint(3, HOSTNAME, SCHEDULE_ANYWAY, None),
    SpreadConstraint(5, ZONE, SCHEDULE_ANYWAY, None),
)


def constraints(
    pod: PodInfo, action: str, defaults: tuple[SpreadConstraint, ...] | None = None
) -> tuple[SpreadConstraint, ...]:
    """The pod's constraints of `action` (matchLabelKeys merged in), or for a pod without any the
    default constraints of `action` with its default selector (buildDefaultConstraints): the
    profile's `defaults` (PodTopologySpreadArgs.defaultConstraints with defaultingType List), or
    the system defaults where it is None (defaultingType System). A default constraint's
    matchLabelKeys change nothing: the default selector replaces the selector they merge into."""
    if pod.spread:
        return tuple(c.with_pod_labels(pod.labels) for c in pod.spread if c.when_unsatisfiable == action)
    if pod.default_spread is None:
        return ()
    listed = SYSTEM_DEFAULT_CONSTRAINTS if defaults is None else defaults
    return tuple(
        dataclasses.replace(c, selector=pod.default_spread, match_label_keys=())
        for c in listed
        if c.when_unsatisfiable == action
    )


def _included(constraint: SpreadConstraint, pod: PodInfo, node: Node) -> bool:
    """matchNodeInclusionPolicies: the pod's node selector and required affinity, its taints."""
    if constraint.node_affinity_policy == "Honor" and not required_affinity_matches(pod, node):
        return False
    return not (
        constraint.node_taints_policy == "Honor" and first_untolerated_taint(pod.tolerations, node.taints) is not None
    )


def _has_keys(node: Node, spread: Sequence[SpreadConstraint]) -> bool:
    return all(c.topology_key in node.labels for c in spread)


# --- Filter -----------------------------------------------------------------------------------------


def prefilter(
    pod: PodInfo, snapshot: Snapshot, defaults: tuple[SpreadConstraint, ...] | None = None
) -> Callable[[Node], tuple[str, ...]] | None:
    """PreFilter: the matching pods per domain; then the Filter of one node. None: Skip.
    `defaults`: the profile's default constraints (`constraints`)."""
    spread = constraints(pod, DO_NOT_SCHEDULE, defaults)
    if not spread:
        return None
    counts: list[dict[str, int]] = [{} for _ in spread]
    for node in snapshot.nodes:
        if not _has_keys(node, spread):
            continue
        usage = snapshot.usage_of(node)
        for i, c in enumerate(spread):
            if _included(c, pod, node):
                value = node.labels[c.topology_key]
                counts[i][value] = counts[i].get(value, 0) + usage.count(pod.namespace, c.selector)
    # minMatchNum: 0 while there are fewer domains than minDomains
    smallest = [min(n.values()) if len(n) >= c.min_domains and n else 0 for n, c in zip(counts, spread, strict=True)]

    def check(node: Node) -> tuple[str, ...]:
        for i, c in enumerate(spread):
            value = node.labels.get(c.topology_key)
            if value is None:
                return (REASON_MISSING_LABEL,)
            itself = 1 if selects(c.selector, pod.labels) else 0
            if counts[i].get(value, 0) + itself - smallest[i] > c.max_skew:
                return (REASON_CONSTRAINTS,)
        return ()

    return check


# --- Score ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreState:
    namespace: str
    constraints: tuple[SpreadConstraint, ...]
    ignored: frozenset[str]  # feasible nodes missing a key of the pod's own constraints
    domain_counts: tuple[dict[str, int], ...]  # per constraint (not hostname): matching pods per domain
    weights: tuple[float, ...]  # topologyNormalizingWeight per constraint


def prescore(
    pod: PodInfo, snapshot: Snapshot, defaults: tuple[SpreadConstraint, ...] | None = None
) -> ScoreState | None:
    """PreScore over the feasible nodes (`snapshot.feasible`); None: Skip. `defaults`: the
    profile's default constraints (`constraints`)."""
    spread = constraints(pod, SCHEDULE_ANYWAY, defaults)
    if not spread or not snapshot.nodes:
        return None
    # scoring.go PreScore: requireAllTopologies unless the system defaults apply (systemDefaulted),
    # which spread nodes without a zone by hostname still; a List's defaults ignore such nodes
    require_all = bool(pod.spread) or defaults is not None
    ignored = set()
    domains: list[dict[str, int]] = [{} for _ in spread]
    for node in snapshot.feasible:
        if require_all and not _has_keys(node, spread):
            ignored.add(node.name)
            continue
        for i, c in enumerate(spread):
            if c.topology_key != HOSTNAME:
                domains[i].setdefault(node.labels.get(c.topology_key, ""), 0)
    for node in snapshot.nodes:
        if require_all and not _has_keys(node, spread):
            continue
        usage = snapshot.usage_of(node)
        for i, c in enumerate(spread):
            value = node.labels.get(c.topology_key, "")
            if value in domains[i] and _included(c, pod, node):
                domains[i][value] += usage.count(pod.namespace, c.selector)
    sizes = [
        len(snapshot.feasible) - len(ignored) if c.topology_key == HOSTNAME else len(domains[i])
        for i, c in enumerate(spread)
    ]
    weights = tuple(math.log(size + 2) for size in sizes)
    return ScoreState(pod.namespace, spread, frozenset(ignored), tuple(domains), weights)


def score(state: ScoreState, node: Node, usage: NodeUsage) -> int:
    """Score: the weighted matching pods of the node's domains; -1 for an ignored node."""
    if node.name in state.ignored:
        return -1  # invalidScore: NormalizeScore gives it 0 and leaves it out of the range
    total = 0.0
    for i, c in enumerate(state.constraints):
        value = node.labels.get(c.topology_key)
        if value is None:
            continue
        if c.topology_key == HOSTNAME:
            count = usage.count(state.namespace, c.selector)
        else:
            count = state.domain_counts[i].get(value, 0)
        total += count * state.weights[i] + (c.max_skew - 1)
    return int(math.floor(total + 0.5))  # math.Round of a non-negative number


def normalize_one(raw: int, low: int | None, high: int | None) -> int:
    """NormalizeScore of one node: MaxNodeScore x (max + min - score) / max over the nodes not
    ignored (`low`, `high`: their extremes); an ignored node (raw -1) scores 0."""
    if raw < 0 or low is None or high is None:
        return 0
    return MAX_NODE_SCORE if high == 0 else MAX_NODE_SCORE * (high + low - raw) // high


def _spread_key(pod: PodInfo) -> Hashable:
    """The pod's constraints (or default selector), the node fields its inclusion policies read,
    and which of its own selectors select it."""
    if not pod.spread and pod.default_spread is None:
        return None
    own = tuple(selects(c.selector, pod.labels) for c in pod.spread)
    return (
        pod.spread,
        pod.default_spread,
        pod.namespace,
        own,
        selects(pod.default_spread, pod.labels),
        tuple(sorted(pod.node_selector.items())),
        pod.required,
        pod.tolerations,
    )


NORMALIZE = Normalize(normalize_one, ignore_negative=True)
FILTER = FilterPlugin(
    NAME,
    no_filter,
    Reads.CLUSTER,
    _spread_key,
    lambda pod, snapshot, profile: prefilter(pod, snapshot, profile.spread_defaults),
)
SCORE = ScorePlugin(
    NAME,
    lambda pod, snapshot, profile: prescore(pod, snapshot, profile.spread_defaults),
    score,
    NORMALIZE,
    Reads.CLUSTER,
    lambda pod, profile: _spread_key(pod),
)
