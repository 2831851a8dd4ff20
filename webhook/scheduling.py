"""kube-scheduler's label- and taint-based filtering and its NodeAffinity score, beside the NetQoS
plugin's score, for one pod and a list of nodes. Pure: API data in, dataclasses out.

Filtering follows the default profile. NodeAffinity's PreFilter narrows the candidates when every
required term names nodes (`matchFields metadata.name In`). Then each node goes through the Filter
plugins in their configured order, and the first rejection is the node's only reason (the framework
stops at the first plugin that rejects): NodeUnschedulable, NodeName, TaintToleration,
NodeAffinity. Resource fit, ports, volumes, inter-pod affinity and topology spread come after
these and are not modelled; a node we call feasible may still be rejected by them.

Scoring: NodeAffinity's raw score (the sum of the weights of the matching preferred terms),
normalised over the feasible nodes by DefaultNormalizeScore (`100 * raw / max`, integer
division, all 0 when the max is 0), times the plugin's weight in the default profile (2). The
NetQoS plugin's score is its table: for a `qos=latency-sensitive` pod 100 on `net=high`, 0 on
`net=low`, 10 elsewhere; 0 for every other pod. The plugin has no NormalizeScore.

Sources (kubernetes/kubernetes): pkg/scheduler/framework/plugins/{nodeaffinity,nodename,
nodeunschedulable,tainttoleration,helper/normalize_score.go}, pkg/scheduler/schedule_one.go,
staging/src/k8s.io/component-helpers/scheduling/corev1/{helpers.go,nodeaffinity/nodeaffinity.go},
staging/src/k8s.io/api/core/v1/toleration.go, pkg/scheduler/apis/config/v1/default_plugins.go.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook import apidata
from webhook.affinity import (
    NODE_NAME_FIELD,
    NodeSelectorTerm,
    PreferredTerm,
    node_selector_matches,
    node_selector_term_from_api,
    preferred_score,
    preferred_term_from_api,
)
from webhook.apidata import STRING_IN_YAML, ShapeError, expect

# Reasons, verbatim from kube-scheduler (the Filter statuses that make up "0/N nodes are available").
REASON_UNSCHEDULABLE = "node(s) were unschedulable"  # nodeunschedulable.ErrReasonUnschedulable
REASON_NODE_NAME = "node(s) didn't match the requested node name"  # nodename.ErrReason
REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"  # nodeaffinity.ErrReasonPod
# Nodes left out by NodeAffinity's PreFilter (schedule_one.go, SetAbsentNodesStatus).
REASON_NOT_IN_PREFILTER = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
# NodeAffinity's PreFilter when the required terms name disjoint sets of nodes.
REASON_TERMS_CONFLICT = "pod affinity terms conflict"

MAX_NODE_SCORE = 100  # framework.MaxNodeScore
NODE_AFFINITY_WEIGHT = 2  # NodeAffinity's weight in the default profile
NETQOS_POD_LABEL = ("qos", "latency-sensitive")
NETQOS_NODE_LABEL = "net"
# NodeUnschedulable lets a pod onto a cordoned node if it tolerates this taint.
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
FILTER_EFFECTS = ("NoSchedule", "NoExecute")  # helper.DoNotScheduleTaintsFilterFunc
MIN_FEASIBLE_NODES_TO_FIND = 100  # below this many nodes the scheduler evaluates every node
MIN_FEASIBLE_NODES_PERCENTAGE = 5


def untolerated_taint_reason(taint: Taint) -> str:
    """TaintToleration's reason, naming the first untolerated taint.

    This is the wording of kube-scheduler up to v1.34. From v1.35 (kubernetes/kubernetes#134740,
    backported to v1.34 patch releases) the scheduler writes "node(s) had untolerated taint(s)"
    and logs the taint instead, to keep taint values out of pod status; explain reads nodes the
    user can read anyway, so it names the taint.
    """
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:  # as kubectl prints it: key=value:Effect
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = ""  # empty means Equal
    value: str = ""
    effect: str = ""  # empty means every effect

    def tolerates(self, taint: Taint) -> bool:
        """v1.Toleration.ToleratesTaint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False  # an empty key (with Exists) matches every key
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        # Lt/Gt exist only behind the alpha gate TaintTolerationComparisonOperators (v1.35); with
        # the gate off the API server refuses them, and an unknown operator tolerates nothing.
        return self.operator == "Exists"


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False


@dataclass(frozen=True)
class PodView:
    """The pod fields scheduling reads."""

    name: str
    labels: Mapping[str, str]
    node_selector: Mapping[str, str]
    required: tuple[NodeSelectorTerm, ...] | None  # None: no requiredDuringScheduling...
    preferred: tuple[PreferredTerm, ...]
    tolerations: tuple[Toleration, ...]
    node_name: str = ""


@dataclass(frozen=True)
class NodeResult:
    name: str
    net: str | None  # the node's `net` label, None when it has none
    feasible: bool
    reason: str | None  # why the scheduler filters it out; None when feasible
    netqos_score: int
    affinity_raw: int
    affinity_normalized: int | None  # None for infeasible nodes: the scheduler never scores them
    affinity_weighted: int | None


@dataclass(frozen=True)
class Ranking:
    nodes: tuple[NodeResult, ...]
    prefilter_failure: str | None  # a PreFilter rejection applies to every node at once

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
        counts = Counter(n.reason for n in self.nodes if n.reason)
        if not counts:
            return f"{head}."
        return f"{head}: {', '.join(sorted(f'{c} {r}' for r, c in counts.items()))}."


def _top(nodes: Sequence[NodeResult], score) -> tuple[str, ...]:
    if not nodes:
        return ()
    best = max(score(n) for n in nodes)
    return tuple(n.name for n in nodes if score(n) == best)


# ---------------------------------------------------------------------------------------------
# Reading API data. Field paths in errors are relative to the object; callers prefix the file.


def pod_view(pod: Any) -> PodView:
    """The scheduling view of a Pod object (API JSON data); ShapeError names a bad field."""
    expect(pod, dict, "(pod)", "a Pod object")
    meta = apidata.obj(pod, "metadata", "metadata")
    spec = apidata.obj(pod, "spec", "spec")
    base = "spec.affinity.nodeAffinity"
    node_affinity = apidata.obj(apidata.obj(spec, "affinity", "spec.affinity"), "nodeAffinity", base)
    required = None
    raw_required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if raw_required is not None:
        path = f"{base}.requiredDuringSchedulingIgnoredDuringExecution"
        expect(raw_required, dict, path, "an object")
        terms = apidata.items(raw_required, "nodeSelectorTerms", f"{path}.nodeSelectorTerms")
        required = tuple(node_selector_term_from_api(t, f"{path}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms))
    path = f"{base}.preferredDuringSchedulingIgnoredDuringExecution"
    preferred = tuple(
        _checked_weight(preferred_term_from_api(t, f"{path}[{i}]"), f"{path}[{i}].weight")
        for i, t in enumerate(apidata.items(node_affinity, "preferredDuringSchedulingIgnoredDuringExecution", path))
    )
    tolerations = tuple(
        _toleration(t, f"spec.tolerations[{i}]")
        for i, t in enumerate(apidata.items(spec, "tolerations", "spec.tolerations"))
    )
    return PodView(
        name=apidata.text(meta, "name", "metadata.name") or apidata.text(meta, "generateName", "metadata.generateName"),
        labels=apidata.string_map(meta, "labels", "metadata.labels", STRING_IN_YAML),
        node_selector=apidata.string_map(spec, "nodeSelector", "spec.nodeSelector", STRING_IN_YAML),
        required=required,
        preferred=preferred,
        tolerations=tolerations,
        node_name=apidata.text(spec, "nodeName", "spec.nodeName"),
    )


def node_from_api(node: Any) -> Node:
    """A Node object (API JSON data) as scheduling reads it; ShapeError names a bad field."""
    expect(node, dict, "(node)", "a Node object")
    meta = apidata.obj(node, "metadata", "metadata")
    name = apidata.text(meta, "name", "metadata.name")
    if not name:
        raise ShapeError("metadata.name", "a non-empty string", meta.get("name"))
    spec = apidata.obj(node, "spec", "spec")
    taints = tuple(_taint(t, f"spec.taints[{i}]") for i, t in enumerate(apidata.items(spec, "taints", "spec.taints")))
    unschedulable = spec.get("unschedulable")
    if unschedulable is not None:
        expect(unschedulable, bool, "spec.unschedulable", "a boolean")
    return Node(
        name, apidata.string_map(meta, "labels", "metadata.labels", STRING_IN_YAML), taints, bool(unschedulable)
    )


def _checked_weight(term: PreferredTerm, path: str) -> PreferredTerm:
    # The API server refuses other weights; the scheduler's normalisation assumes them.
    if not 1 <= term.weight <= 100:
        raise ShapeError(path, "an integer from 1 to 100 (the API server rejects other weights)", term.weight)
    return term


def _toleration(raw: Any, path: str) -> Toleration:
    expect(raw, dict, path, "an object")
    return Toleration(*(apidata.text(raw, f, f"{path}.{f}") for f in ("key", "operator", "value", "effect")))


def _taint(raw: Any, path: str) -> Taint:
    expect(raw, dict, path, "an object")
    return Taint(*(apidata.text(raw, f, f"{path}.{f}") for f in ("key", "value", "effect")))


# ---------------------------------------------------------------------------------------------
# Filtering


def prefilter_node_names(pod: PodView) -> frozenset[str] | None:
    """NodeAffinity.PreFilter: the only candidate nodes, or None when every node is a candidate.

    Only when every required term has a `metadata.name In` field requirement: the names of one
    term are intersected, those of the terms united. An empty result is a conflict.
    """
    if not pod.required:
        return None
    names: set[str] = set()
    for term in pod.required:
        term_names: set[str] | None = None
        for req in term.fields:
            if req.key == NODE_NAME_FIELD and req.operator == "In":
                term_names = set(req.values) if term_names is None else term_names & set(req.values)
        if term_names is None:
            return None  # this term can match any node, and terms are ORed
        names |= term_names
    return frozenset(names)


def filter_reason(pod: PodView, node: Node) -> str | None:
    """The first Filter plugin's rejection of `node`, in default-profile order; None if it passes."""
    if node.unschedulable and not _tolerates(pod, Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")):
        return REASON_UNSCHEDULABLE
    if pod.node_name and pod.node_name != node.name:
        return REASON_NODE_NAME
    taint = first_untolerated_taint(pod.tolerations, node.taints)
    if taint is not None:
        return untolerated_taint_reason(taint)
    if not required_affinity_matches(pod, node):
        return REASON_NODE_AFFINITY
    return None


def first_untolerated_taint(tolerations: Sequence[Toleration], taints: Sequence[Taint]) -> Taint | None:
    """FindMatchingUntoleratedTaint over the NoSchedule and NoExecute taints, in node order."""
    for taint in taints:
        if taint.effect in FILTER_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def required_affinity_matches(pod: PodView, node: Node) -> bool:
    """RequiredNodeAffinity.Match: spec.nodeSelector AND the required node affinity terms."""
    for key, value in pod.node_selector.items():
        if key not in node.labels or node.labels[key] != value:
            return False
    if pod.required is None:
        return True
    return node_selector_matches(pod.required, node.labels, node.name)


def _tolerates(pod: PodView, taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in pod.tolerations)


# ---------------------------------------------------------------------------------------------
# Scoring


def netqos_score(pod_labels: Mapping[str, str], node_labels: Mapping[str, str]) -> int:
    """The NetQoS plugin's score table (see docs/scheduling.md for the plugin's fall-through)."""
    key, value = NETQOS_POD_LABEL
    if pod_labels.get(key) != value:
        return 0
    net = node_labels.get(NETQOS_NODE_LABEL)
    if net == "high":
        return MAX_NODE_SCORE
    if net == "low":
        return 0
    return 10


def normalize(raw_scores: Sequence[int]) -> list[int]:
    """helper.DefaultNormalizeScore(MaxNodeScore, reverse=false) over non-negative raw scores."""
    top = max(raw_scores, default=0)
    if top == 0:
        return [0] * len(raw_scores)
    return [MAX_NODE_SCORE * score // top for score in raw_scores]


def nodes_scored_at_most(node_count: int) -> int:
    """numFeasibleNodesToFind with the default percentageOfNodesToScore (adaptive).

    In a cluster of this many nodes the scheduler stops filtering once it has found this many
    feasible nodes, so only those are scored and normalised against each other.
    """
    if node_count < MIN_FEASIBLE_NODES_TO_FIND:
        return node_count
    percentage = max(50 - node_count // 125, MIN_FEASIBLE_NODES_PERCENTAGE)
    return max(node_count * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def rank(pod: PodView, nodes: Sequence[Node]) -> Ranking:
    """Filter every node for `pod`, then score the feasible ones, as one scheduling cycle would."""
    allowed = prefilter_node_names(pod)
    conflict = REASON_TERMS_CONFLICT if allowed is not None and not allowed else None
    reasons = []
    for node in nodes:
        if conflict:
            reasons.append(conflict)
        elif allowed is not None and node.name not in allowed:
            reasons.append(REASON_NOT_IN_PREFILTER)
        else:
            reasons.append(filter_reason(pod, node))
    raw = [preferred_score(pod.preferred, n.labels, n.name) for n in nodes]
    feasible_raw = [r for r, why in zip(raw, reasons) if why is None]
    normalized = iter(normalize(feasible_raw))
    results = []
    for node, why, score in zip(nodes, reasons, raw):
        norm = next(normalized) if why is None else None
        results.append(
            NodeResult(
                name=node.name,
                net=node.labels.get(NETQOS_NODE_LABEL),
                feasible=why is None,
                reason=why,
                netqos_score=netqos_score(pod.labels, node.labels),
                affinity_raw=score,
                affinity_normalized=norm,
                affinity_weighted=None if norm is None else norm * NODE_AFFINITY_WEIGHT,
            )
        )
    return Ranking(tuple(results), conflict)
