"""One kube-scheduler cycle for one pod over a list of nodes and what the pods already on them
take: PreFilter, the Filter plugins, the Score plugins normalised and weighted, the total and the
predicted node(s). Pure: the model in, a `Ranking` out. The plugins are `registry`'s tables.

Filtering (schedule_one.go findNodesThatPassFilters): NodeAffinity's PreFilter narrows the
candidates when every required term names nodes (`matchFields metadata.name In`), and from 1.37
NodeName's to spec.nodeName (`prefilter`); then each node
goes through the Filter plugins in order, and the first that rejects it gives the node's reasons
(the framework stops there). Plugins of the profile that are not in the tables
(`Profile.not_evaluated`) are taken to pass every node: a node called feasible may still be
rejected by them. With `Sampling` the cycle stops once it has found numFeasibleNodesToFind
feasible nodes, as the scheduler does in large clusters.

Scoring, per feasible node: each Score plugin of the profile (`registry.score_plugins`), PreScore
once for the pod, the raw score per node, its NormalizeScore over the feasible nodes, times its
weight; the total is their sum and the prediction the best total (ties: the scheduler picks at
random among them).

Sources (kubernetes/kubernetes v1.36): pkg/scheduler/schedule_one.go (findNodesThatFitPod,
findNodesThatPassFilters, numFeasibleNodesToFind, prioritizeNodes), pkg/scheduler/framework/
types.go (FitError), pkg/scheduler/framework/runtime/framework.go (RunScorePlugins).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from webhook.affinity import PREFERRED, preferred_terms_problem
from webhook.scheduler import registry
from webhook.scheduler.framework import FilterPlugin, Normalize, no_node_in_prefilter, not_in_prefilter
from webhook.scheduler.model import EMPTY_USAGE, Node, NodeUsage, PodInfo, Profile, Snapshot
from webhook.scheduler.plugins.netqos import NETQOS_NODE_LABEL, netqos_score
from webhook.scheduler.registry import DEFAULT_PROFILE, DEFAULT_WEIGHTS, NODE_AFFINITY

MIN_FEASIBLE_NODES_TO_FIND = 100  # below this many nodes the scheduler evaluates every node
MIN_FEASIBLE_NODES_PERCENTAGE = 5
NO_SNAPSHOT = Snapshot(nodes=(), usage={})  # what a PreFilter that reads the pod alone is given
# Between equal totals kube-scheduler without extenders binds the node its heap of scores
# (nodeScoreHeap, whose Randomizer only extenders set) yields first, which depends on the order
# the parallel filtering found the nodes in: no prediction can name one (v1.36.3 schedule_one.go).
TIES = (
    "kube-scheduler binds the one its heap of scores yields first, which depends on the order its filtering "
    "found them in"
)


@dataclass(frozen=True)
class NodeResult:
    name: str
    net: str | None  # the node's `net` label, None when it has none
    reasons: tuple[str, ...]  # why the scheduler filters it out; () when feasible
    netqos_score: int
    affinity_raw: int
    affinity_normalized: int | None  # None for infeasible nodes: the scheduler never scores them
    affinity_weighted: int | None
    scores: Mapping[str, int]  # normalised 0-100 per score plugin, before weights; {} when infeasible
    total: int | None  # the sum of the weighted scores; None when infeasible

    @property
    def feasible(self) -> bool:
        return not self.reasons

    @property
    def reason(self) -> str | None:
        return self.reasons[0] if self.reasons else None


@dataclass(frozen=True)
class Ranking:
    nodes: tuple[NodeResult, ...]
    prefilter_failure: str | None  # a PreFilter rejection applies to every node at once
    weights: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    skipped: tuple[str, ...] = ()  # score plugins whose PreScore skipped them for this pod
    # NodeAffinity's PreScore error when the pod's preferred terms do not parse: with more than
    # one feasible node the scheduling cycle fails there and the pod stays Pending.
    score_failure: str | None = None
    processed: int = 0  # nodes the cycle filtered (with `Sampling`: how far the next cycle starts on)

    @property
    def feasible(self) -> tuple[NodeResult, ...]:
        return tuple(n for n in self.nodes if n.feasible)

    @property
    def scoring_skipped(self) -> bool:
        """One feasible node: the scheduler binds it without running PreScore/Score."""
        return len(self.feasible) == 1

    @property
    def affinity_choice(self) -> tuple[str, ...]:
        return _top(self.feasible, lambda n: n.affinity_normalized or 0)

    @property
    def netqos_choice(self) -> tuple[str, ...]:
        return _top(self.feasible, lambda n: n.netqos_score)

    @property
    def scoring_fails(self) -> bool:
        """PreScore runs (several feasible nodes) and fails: no node is chosen this cycle."""
        return self.score_failure is not None and len(self.feasible) > 1

    @property
    def predicted(self) -> tuple[str, ...]:
        """The feasible node(s) with the best total: the scheduler binds one of them (`TIES`).
        None when scoring fails: the cycle ends in an error and the pod waits (Pending)."""
        if self.scoring_fails:
            return ()
        return _top(self.feasible, lambda n: n.total or 0)

    def filter_message(self) -> str:
        """The scheduler's FitError text for these nodes: "K/N nodes are available: <reasons>."

        The scheduler only emits it when K is 0 (the FailedScheduling event, which then goes on
        with the preemption outcome, not modelled here). Reasons are grouped with their counts
        and sorted as strings, as FitError.Error does.
        """
        total, feasible = len(self.nodes), len(self.feasible)
        head = f"{feasible}/{total} nodes are available"
        if self.prefilter_failure:
            return f"{head}: {self.prefilter_failure}."
        counts = Counter(r for n in self.nodes for r in n.reasons)
        if not counts:
            return f"{head}."
        return f"{head}: {', '.join(sorted(f'{c} {r}' for r, c in counts.items()))}."


def _top(nodes: Sequence[NodeResult], score: Callable[[NodeResult], int]) -> tuple[str, ...]:
    if not nodes:
        return ()
    best = max(score(n) for n in nodes)
    return tuple(n.name for n in nodes if score(n) == best)


def nodes_scored_at_most(node_count: int, percentage: int = 0) -> int:
    """numFeasibleNodesToFind (schedule_one.go): once this many feasible nodes are found the
    scheduler stops filtering, so only those are scored and normalised against each other.

    `percentage` is percentageOfNodesToScore; 0 (unset) is adaptive: 50% minus 1% per 125 nodes,
    at least 5%. Below 100 nodes every node is evaluated, and never fewer than 100.
    """
    if node_count < MIN_FEASIBLE_NODES_TO_FIND:
        return node_count
    if percentage == 0:
        percentage = max(50 - node_count // 125, MIN_FEASIBLE_NODES_PERCENTAGE)
    return max(node_count * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass(frozen=True)
class Sampling:
    """How a scheduling cycle walks a large cluster (schedule_one.go, findNodesThatPassFilters):
    from nextStartNodeIndex (`start`) round the node list, filtering until it has found
    `nodes_scored_at_most(len(nodes), percentage)` feasible nodes. The scheduler then advances
    nextStartNodeIndex by the nodes it processed (`Ranking.processed`). It filters in parallel,
    so which nodes beyond the first few it has seen when it stops may differ slightly; this walks
    them in order. (kubernetes v1.36.3 pkg/scheduler/schedule_one.go: findNodesThatPassFilters,
    numFeasibleNodesToFind, and `sched.nextStartNodeIndex = (sched.nextStartNodeIndex +
    processedNodes) % len(allNodes)` in findNodesThatFitPod.)"""

    start: int = 0
    percentage: int = 0  # percentageOfNodesToScore; 0: the adaptive default


# ---------------------------------------------------------------------------------------------
# Filtering


def node_only_reasons(pod: PodInfo, node: Node, profile: Profile = DEFAULT_PROFILE) -> tuple[str, ...]:
    """The Filter plugins that read the pod and the node alone, which the default profile runs
    first (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity): the first one's reasons.
    Their verdict depends on the pod's node name, tolerations, node selector and required
    affinity only, so pods that share those share it, whatever the pods on the node."""
    return first_reasons(registry.node_filters(profile), pod, node, EMPTY_USAGE, profile)


def usage_reasons(pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile = DEFAULT_PROFILE) -> tuple[str, ...]:
    """The Filter plugins that read what the pods already on the node take, which the default
    profile runs next (NodePorts, NodeResourcesFit): the first one's reasons."""
    return first_reasons(registry.usage_filters(profile), pod, node, usage, profile)


def first_reasons(
    plugins: Sequence[FilterPlugin], pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile
) -> tuple[str, ...]:
    """The reasons of the first of `plugins` that rejects `node`, () when none does."""
    for plugin in plugins:
        reasons = plugin.filter(pod, node, usage, profile)
        if reasons:
            return reasons
    return ()


def filter_reasons(
    pod: PodInfo, node: Node, usage: NodeUsage = EMPTY_USAGE, profile: Profile = DEFAULT_PROFILE
) -> tuple[str, ...]:
    """Why `node` cannot take `pod` given what the pods already on it use: the reasons of the
    first Filter plugin that rejects it, in the profile's order; () when every plugin passes."""
    return node_only_reasons(pod, node, profile) or usage_reasons(pod, node, usage, profile)


def prefilter(
    pod: PodInfo, nodes: Sequence[Node], profile: Profile = DEFAULT_PROFILE
) -> tuple[str | None, Callable[[Node], tuple[str, ...]]]:
    """The PreFilters that narrow the nodes (NodeAffinity's; NodeName's from 1.37): their failure
    for every node (None when there is none), and each node's reasons from them (() for a node
    they let through to the Filter plugins). As RunPreFilterPlugins: the node names are
    intersected in the profile's order; a plugin's own rejection, or an empty intersection,
    fails the cycle; a node outside the intersection is absent, naming every plugin that named
    nodes (framework/runtime/framework.go, schedule_one.go findNodesThatFitPod)."""
    allowed: frozenset[str] | None = None
    naming: list[str] = []
    for plugin in registry.node_name_prefilters(profile):
        assert plugin.node_names is not None
        names = plugin.node_names(pod)
        if names is None:
            continue
        if not names:
            return _failing(plugin.conflict)
        naming.append(plugin.name)
        allowed = names if allowed is None else allowed & names
        if not allowed:
            return _failing(no_node_in_prefilter(naming))
    if allowed is None:
        return None, lambda node: ()
    absent = (not_in_prefilter(naming),)
    return None, lambda node: () if node.name in allowed else absent


def _failing(reason: str) -> tuple[str, Callable[[Node], tuple[str, ...]]]:
    return reason, lambda node: (reason,)


def node_only_filter(
    pod: PodInfo, nodes: Sequence[Node], profile: Profile = DEFAULT_PROFILE
) -> tuple[str | None, list[tuple[str, ...]]]:
    """PreFilter, then `node_only_reasons`, for each node: the PreFilter conflict (None when
    there is none) and each node's reasons, () for a node that passes them. What stays to check
    on a node that passes is `usage_reasons`."""
    conflict, excluded = prefilter(pod, nodes, profile)
    plugins = registry.node_filters(profile)  # once, not per node: nodes number thousands
    return conflict, [excluded(node) or first_reasons(plugins, pod, node, EMPTY_USAGE, profile) for node in nodes]


def cluster_checks(pod: PodInfo, snapshot: Snapshot, profile: Profile) -> list[Callable[[Node], tuple[str, ...]]]:
    """The PreFilter of each Filter plugin that reads the whole cluster (PodTopologySpread,
    InterPodAffinity), as the Filter of one node; those whose PreFilter skips the pod left out."""
    checks = (p.prefilter(pod, snapshot, profile) for p in registry.cluster_filters(profile) if p.prefilter)
    return [c for c in checks if c is not None]


def late_node_checks(pod: PodInfo, profile: Profile) -> list[Callable[[Node], tuple[str, ...]]]:
    """`cluster_checks` of the plugins that need no snapshot (NodeDeclaredFeatures), for a judge
    that reads no other pod (`placement.WhyNotHigh`); they filter last, as in the cycle."""
    checks = (p.prefilter(pod, NO_SNAPSHOT, profile) for p in registry.late_node_filters(profile) if p.prefilter)
    return [c for c in checks if c is not None]


def cluster_reasons(checks: Sequence[Callable[[Node], tuple[str, ...]]], node: Node) -> tuple[str, ...]:
    """The reasons of the first of `checks` that rejects `node`."""
    for check in checks:
        reasons = check(node)
        if reasons:
            return reasons
    return ()


@dataclass(frozen=True)
class FilterChain:
    """The ONE composition of a cycle's filtering for one pod, in the profile's order: PreFilter
    (the node names it narrows to), the Filter plugins that read the node alone, those that read
    what the pods on it take, then those that read every node's pods (`checks`: their PreFilter
    run over one snapshot, or, without a snapshot, the ones that need none: `late_node_checks`).
    The first stage that rejects a node gives its reasons, as the framework stops at the first
    plugin that rejects it.

    The cycle (`rank`), what-if placement (`incremental.Predictor`) and `placement.WhyNotHigh`
    all filter through it; the latter two share a stage's verdict where it allows (the node-only
    verdict per `keys.node_filter_key`, the usage verdict per node until its usage changes) and
    pass it in, so the order is stated here only."""

    pod: PodInfo
    profile: Profile
    checks: tuple[Callable[[Node], tuple[str, ...]], ...] = ()

    # The profile's node-only and usage Filter plugins, picked once per chain (when first needed)
    # rather than once per node judged: a what-if plan judges thousands of nodes per chain.
    @functools.cached_property
    def node_filters(self) -> tuple[FilterPlugin, ...]:
        return registry.node_filters(self.profile)

    @functools.cached_property
    def usage_filters(self) -> tuple[FilterPlugin, ...]:
        return registry.usage_filters(self.profile)

    @classmethod
    def over(cls, pod: PodInfo, profile: Profile, snapshot: Snapshot | None = None) -> FilterChain:
        """The chain for `pod`, its cluster stage PreFiltered over `snapshot` (None: only the
        plugins that need no snapshot, for a judge that reads no other pod)."""
        if snapshot is None:
            return cls(pod, profile, tuple(late_node_checks(pod, profile)))
        return cls(pod, profile, tuple(cluster_checks(pod, snapshot, profile)))

    def prefilter(self, nodes: Sequence[Node]) -> tuple[str | None, Callable[[Node], tuple[str, ...]]]:
        """The PreFilter stage (`prefilter`): its failure, and each node's reasons from it."""
        return prefilter(self.pod, nodes, self.profile)

    def node_only(self, nodes: Sequence[Node]) -> tuple[str | None, list[tuple[str, ...]]]:
        """The PreFilter and node-only stages over `nodes` (`node_only_filter`), the verdict
        pods that share `keys.node_filter_key` share."""
        return node_only_filter(self.pod, nodes, self.profile)

    def through_usage(self, node: Node, usage: NodeUsage, node_only: tuple[str, ...]) -> tuple[str, ...]:
        """The verdict up to the usage stage, given the node-only stage's (`node_only`)."""
        return node_only or first_reasons(self.usage_filters, self.pod, node, usage, self.profile)

    def through_cluster(self, node: Node, through_usage: tuple[str, ...]) -> tuple[str, ...]:
        """The whole chain's verdict, given the verdict up to the usage stage (`through_usage`)."""
        return through_usage or cluster_reasons(self.checks, node)

    def reasons(self, node: Node, usage: NodeUsage, excluded: Callable[[Node], tuple[str, ...]]) -> tuple[str, ...]:
        """Every stage on `node`, PreFilter's verdict being `excluded` (`prefilter`)."""
        node_only = excluded(node) or first_reasons(self.node_filters, self.pod, node, EMPTY_USAGE, self.profile)
        return self.through_cluster(node, self.through_usage(node, usage, node_only))


def _walk(
    pod: PodInfo, snapshot: Snapshot, profile: Profile, sampling: Sampling | None
) -> tuple[str | None, list[Node], list[tuple[str, ...]]]:
    """The nodes one cycle filters, with their reasons: every node, or with `sampling` from
    `sampling.start` round the list until it has found enough feasible ones."""
    nodes, usage = snapshot.nodes, snapshot.usage
    chain = FilterChain.over(pod, profile, snapshot)
    conflict, excluded = chain.prefilter(nodes)
    start, wanted = (
        (0, len(nodes)) if sampling is None else (sampling.start, nodes_scored_at_most(len(nodes), sampling.percentage))
    )
    scanned: list[Node] = []
    reasons: list[tuple[str, ...]] = []
    found = 0
    for i in range(len(nodes)):
        node = nodes[(start + i) % len(nodes)]
        why = chain.reasons(node, usage.get(node.name, EMPTY_USAGE), excluded)
        scanned.append(node)
        reasons.append(why)
        found += not why
        if found >= wanted:
            break
    return conflict, scanned, reasons


# ---------------------------------------------------------------------------------------------
# Scoring


@dataclass(frozen=True)
class Column:
    """One Score plugin's raw scores over the feasible nodes, in their order, before NormalizeScore."""

    name: str
    weight: int
    raw: list[int]
    normalize: Normalize | None


def raw_columns(pod: PodInfo, snapshot: Snapshot, profile: Profile) -> tuple[list[Column], tuple[str, ...]]:
    """PreScore, then Score, of each Score plugin of `profile` over the feasible nodes
    (`snapshot.feasible`): a column each, and the plugins PreScore skipped."""
    columns: list[Column] = []
    skipped: list[str] = []
    feasible = snapshot.feasible
    use = [snapshot.usage_of(n) for n in feasible]
    for plugin, weight in registry.score_plugins(profile):
        state = plugin.prepare(pod, snapshot, profile)
        if state is None:
            skipped.append(plugin.name)
            continue
        raw = [plugin.score(state, n, u) for n, u in zip(feasible, use, strict=True)]
        columns.append(Column(plugin.name, weight, raw, plugin.normalize))
    return columns, tuple(skipped)


def score(pod: PodInfo, snapshot: Snapshot, profile: Profile) -> tuple[dict[str, dict[str, int]], tuple[str, ...]]:
    """Each Score plugin of `profile` over the feasible nodes (`snapshot.feasible`), normalised as
    the plugin does: the scores per node and plugin, and the plugins PreScore skipped."""
    raw, skipped = raw_columns(pod, snapshot, profile)
    columns = {c.name: c.normalize(c.raw) if c.normalize else c.raw for c in raw}
    feasible = snapshot.feasible
    scores = {node.name: {name: column[i] for name, column in columns.items()} for i, node in enumerate(feasible)}
    return scores, skipped


def rank(
    pod: PodInfo,
    nodes: Sequence[Node],
    usage: Mapping[str, NodeUsage] | None = None,
    profile: Profile = DEFAULT_PROFILE,
    sampling: Sampling | None = None,
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
) -> Ranking:
    """Filter every node for `pod`, then score the feasible ones, as one scheduling cycle would.

    `usage` maps node names to what the pods already there use and who they are (none when
    absent); `namespaces` the namespaces' labels, when read. With `sampling`, only the nodes the
    cycle walks are filtered and shown, in the order it walks them.
    """
    snapshot = Snapshot(nodes, usage or {}, namespaces=namespaces or {})
    conflict, scanned, reasons = _walk(pod, snapshot, profile, sampling)
    feasible = [n for n, why in zip(scanned, reasons, strict=True) if not why]
    snapshot = snapshot.narrowed(feasible)
    scores, skipped = score(pod, snapshot, profile)
    # NodeAffinity's scores are shown even when the profile does not weigh them.
    affinity = registry.SCORE_PLUGINS[NODE_AFFINITY]
    terms = affinity.prepare(pod, snapshot, profile)
    raw = {n.name: affinity.score(terms, n, EMPTY_USAGE) for n in scanned}
    assert affinity.normalize is not None
    normalized = dict(zip((n.name for n in feasible), affinity.normalize([raw[n.name] for n in feasible]), strict=True))
    affinity_weight = profile.weights.get(NODE_AFFINITY, 0)
    weights = profile.weights
    results = []
    for node, why in zip(scanned, reasons, strict=True):
        plugin_scores = scores.get(node.name, {})
        norm = normalized.get(node.name)
        results.append(
            NodeResult(
                name=node.name,
                net=node.labels.get(NETQOS_NODE_LABEL),
                reasons=why,
                netqos_score=netqos_score(pod.labels, node.labels),
                affinity_raw=raw[node.name],
                affinity_normalized=norm,
                affinity_weighted=None if norm is None else norm * affinity_weight,
                scores=plugin_scores,
                total=None if why else sum([s * weights[p] for p, s in plugin_scores.items()]),
            )
        )
    score_failure = preferred_terms_problem(pod.preferred, f"spec.affinity.nodeAffinity.{PREFERRED}")
    return Ranking(tuple(results), conflict, dict(profile.weights), skipped, score_failure, len(scanned))
