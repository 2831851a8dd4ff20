"""InterPodAffinity as kube-scheduler v1.36 runs it: required and preferred pod affinity and
anti-affinity of the incoming pod against the pods on the nodes, and the existing pods' terms
against the incoming pod (their required anti-affinity filters; their required affinity, at
InterPodAffinityArgs' hardPodAffinityWeight (1 by default, 0 leaves them out), and preferred
terms score; with ignorePreferredTermsOfExistingPods, PreScore skips a pod without preferred
terms of its own, so the existing pods' terms then score nothing).

Filter: a node fails when a term of the pod's required affinity finds no matching pod in the
node's domain (unless no pod matches anywhere and the pod matches its own terms: the first pod of
a group), when a matching pod is in the domain of one of its required anti-affinity terms, or when
an existing pod's required anti-affinity term matches the pod in the node's domain. Score: per
topology domain the weights of the terms that match, summed per node, scaled to 0-100 between the
lowest and the highest node.

Namespaces: a term's `namespaces`, or its pod's own namespace; a namespaceSelector is matched
against the namespaces' labels when they were read (`Snapshot.namespaces`), else against the
`kubernetes.io/metadata.name` label every namespace carries. matchLabelKeys and mismatchLabelKeys
are merged into the selectors by the API server when a pod is created; pods read from files are
taken as they are written.

The incoming pod's own namespaceSelectors, as v1.34-v1.36 evaluate them (`unmerged`):
PreFilter and PreScore list the namespaces a term's selector selects into its namespace set and
mean to replace the selector by labels.Nothing(), but `mergeAffinityTermNamespacesIfNotEmpty`
(interpodaffinity/plugin.go, v1.36.3) takes the fwk.AffinityTerm by value: the set is a map and is
filled, the selector is set on the copy only. Every match of those terms then passes nil namespace
labels (filtering.go getIncomingAffinityAntiAffinityCounts, podMatchesAllAffinityTerms; scoring.go
processExistingPod), and a selector that matches empty labels (`NotIn`, `DoesNotExist`) matches the
pods of every namespace. v1.37.2 passes the term by pointer: only the listed namespaces match.
Other pods' terms are matched against the incoming pod's namespace's labels in every release.

Terminating pods (metadata.deletionTimestamp set) count like any other, as in kube-scheduler: the
scheduler's cache keeps a pod in its NodeInfo until the pod is deleted (NodeInfo.AddPodInfo and
update in pkg/scheduler/framework/types.go look at no deletionTimestamp), and neither filtering.go
nor scoring.go skips one; only PodTopologySpread leaves them out (podtopologyspread/common.go
countPodsMatchSelector). So an evicted pod still in its grace period repels or attracts a
replacement as it does in the real scheduler.

Sources: kubernetes v1.36.3 pkg/scheduler/framework/plugins/interpodaffinity/{filtering.go,
scoring.go (PreScore, processExistingPod),plugin.go}, staging/src/k8s.io/kube-scheduler/framework/
types.go (AffinityTerm), pkg/scheduler/apis/config/v1/defaults.go
(SetDefaults_InterPodAffinityArgs: hardPodAffinityWeight 1); for the incoming pod's
namespaceSelector, plugin.go mergeAffinityTermNamespacesIfNotEmpty and its callers at v1.34.4,
v1.35.4 (as v1.36.3) and v1.37.2.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.names import MAX_NODE_SCORE
from webhook.scheduler.framework import FilterPlugin, Normalize, Reads, ScorePlugin, no_filter
from webhook.scheduler.model import (
    AffinityTerm,
    LabelsKey,
    Node,
    NodeUsage,
    PodInfo,
    Profile,
    Snapshot,
    WeightedAffinityTerm,
    namespace_labels,
)

NAME = "InterPodAffinity"
# The variant releases before 1.37 run (`registry.VERSION_VARIANTS`), by the name of its table entry:
# the incoming pod's namespaceSelectors also match nil labels: NotIn, DoesNotExist select every namespace
UNMERGED = "InterPodAffinity (before 1.37)"
HARD_POD_AFFINITY_WEIGHT = 1  # InterPodAffinityArgs.hardPodAffinityWeight's default
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
Pair = tuple[str, str]  # (topology key, value)


def _pods(usage: NodeUsage) -> Iterable[tuple[LabelsKey, int]]:
    """Every pod of the node, terminating ones included: NodeInfo.Pods holds a pod until it is
    deleted, and neither the Filter (filtering.go getIncomingAffinityAntiAffinityCounts ranges over
    nodeInfo.GetPods()) nor the Score (scoring.go PreScore's podsToProcess) looks at its
    deletionTimestamp, where PodTopologySpread does (podtopologyspread/common.go)."""
    yield from usage.labelled.items()
    yield from usage.terminating.items()


def own_term_matches(
    term: AffinityTerm, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str], unmerged: bool
) -> bool:
    """Whether a term of the incoming pod selects a pod of `namespace` with `labels`: its namespace
    named or selected by its labels `ns_labels`; with `unmerged` (v1.34-v1.36), also any namespace
    when the namespaceSelector, left in place, matches the nil labels every match passes."""
    if term.matches(namespace, labels, ns_labels):
        return True
    return unmerged and term.matches(namespace, labels, {})


def _matches_all(
    terms: Sequence[AffinityTerm],
    namespace: str,
    labels: Mapping[str, str],
    ns_labels: Mapping[str, str],
    unmerged: bool,
) -> bool:
    """podMatchesAllAffinityTerms: the incoming pod's terms all select the pod."""
    return bool(terms) and all(own_term_matches(t, namespace, labels, ns_labels, unmerged) for t in terms)


# --- Filter -----------------------------------------------------------------------------------------


def prefilter(pod: PodInfo, snapshot: Snapshot, unmerged: bool = False) -> Callable[[Node], tuple[str, ...]] | None:
    """PreFilter: the domains of existing pods' anti-affinity that match the pod, and of the pods
    that match its own required terms (with `unmerged`, their namespaceSelectors as v1.34-v1.36
    match them: `own_term_matches`); then the Filter of one node. None: Skip."""
    own = pod.pod_affinity
    ns_labels = namespace_labels(snapshot.namespaces, pod.namespace)
    existing_anti: Counter[Pair] = Counter()
    affinity: Counter[Pair] = Counter()
    anti: Counter[Pair] = Counter()
    # without required terms of its own, only the nodes of pods with terms can say anything
    own_terms = bool(own.required or own.required_anti)
    for node in snapshot.nodes if own_terms else snapshot.with_affinity:
        usage = snapshot.usage_of(node)
        for other in usage.with_affinity:
            for term in other.pod_affinity.required_anti:
                if term.matches(pod.namespace, pod.labels, ns_labels) and term.topology_key in node.labels:
                    existing_anti[(term.topology_key, node.labels[term.topology_key])] += 1
        if not own.required and not own.required_anti:
            continue
        for (namespace, frozen), count in _pods(usage):
            labels, their_ns = dict(frozen), namespace_labels(snapshot.namespaces, namespace)
            if _matches_all(own.required, namespace, labels, their_ns, unmerged):
                for term in own.required:
                    if term.topology_key in node.labels:
                        affinity[(term.topology_key, node.labels[term.topology_key])] += count
            for term in own.required_anti:
                if own_term_matches(term, namespace, labels, their_ns, unmerged) and term.topology_key in node.labels:
                    anti[(term.topology_key, node.labels[term.topology_key])] += count
    if not existing_anti and not own.required and not own.required_anti:
        return None
    first_of_group = not affinity and _matches_all(own.required, pod.namespace, pod.labels, ns_labels, unmerged)

    def check(node: Node) -> tuple[str, ...]:
        if not _satisfies_affinity(own.required, affinity, node, first_of_group):
            return (REASON_AFFINITY,)
        for term in own.required_anti:
            value = node.labels.get(term.topology_key)
            if value is not None and anti[(term.topology_key, value)] > 0:
                return (REASON_ANTI_AFFINITY,)
        if any(existing_anti[pair] > 0 for pair in node.labels.items()):
            return (REASON_EXISTING_ANTI_AFFINITY,)
        return ()

    return check


def _satisfies_affinity(terms: Sequence[AffinityTerm], counts: Counter[Pair], node: Node, first_of_group: bool) -> bool:
    """satisfyPodAffinity."""
    pods_exist = True
    for term in terms:
        value = node.labels.get(term.topology_key)
        if value is None:
            return False
        if counts[(term.topology_key, value)] <= 0:
            pods_exist = False
    return pods_exist or first_of_group


# --- Score ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreState:
    scores: dict[Pair, int]  # (topology key, value) -> the summed weights of the terms that match


def prescore(
    pod: PodInfo,
    snapshot: Snapshot,
    unmerged: bool = False,
    hard_weight: int = HARD_POD_AFFINITY_WEIGHT,
    ignore_existing_preferred: bool = False,
) -> ScoreState | None:
    """PreScore: for every existing pod (with the pod's own preferred terms) or every pod with
    affinity terms (without), the weights of the terms that match, per topology domain (with
    `unmerged`, the pod's own namespaceSelectors as v1.34-v1.36 match them: `own_term_matches`);
    an existing pod's required affinity term counts `hard_weight`, not at all at 0. None: Skip,
    as for a pod without preferred terms of its own when `ignore_existing_preferred`
    (InterPodAffinityArgs.ignorePreferredTermsOfExistingPods)."""
    own = pod.pod_affinity
    has_preferred = bool(own.preferred or own.preferred_anti)
    if ignore_existing_preferred and not has_preferred:
        return None
    scores: dict[Pair, int] = {}
    touched = False

    def add(
        terms: Iterable[WeightedAffinityTerm],
        namespace: str,
        labels: Mapping[str, str],
        sign: int,
        node: Node,
        times: int = 1,
        own_terms: bool = False,
    ) -> None:
        nonlocal touched
        their_ns = namespace_labels(snapshot.namespaces, namespace)
        for weighted in terms:
            term = weighted.term
            if own_terms:
                matched = own_term_matches(term, namespace, labels, their_ns, unmerged)
            else:
                matched = term.matches(namespace, labels, their_ns)
            if matched and term.topology_key in node.labels:
                pair = (term.topology_key, node.labels[term.topology_key])
                scores[pair] = scores.get(pair, 0) + sign * weighted.weight * times
                touched = True

    for node in snapshot.nodes if has_preferred else snapshot.with_affinity:
        if not node.labels:
            continue  # processExistingPod: a node without labels adds nothing
        usage = snapshot.usage_of(node)
        if has_preferred:
            for (namespace, frozen), count in _pods(usage):
                labels = dict(frozen)
                add(own.preferred, namespace, labels, 1, node, count, own_terms=True)
                add(own.preferred_anti, namespace, labels, -1, node, count, own_terms=True)
        for other in usage.with_affinity:
            if hard_weight > 0:  # processExistingPod: `pl.args.HardPodAffinityWeight > 0`
                hard = (WeightedAffinityTerm(hard_weight, t) for t in other.pod_affinity.required)
                add(hard, pod.namespace, pod.labels, 1, node)
            add(other.pod_affinity.preferred, pod.namespace, pod.labels, 1, node)
            add(other.pod_affinity.preferred_anti, pod.namespace, pod.labels, -1, node)
    return ScoreState(scores) if touched else None


def score(state: ScoreState, node: Node, usage: NodeUsage) -> int:
    return sum(state.scores.get(pair, 0) for pair in node.labels.items())


def normalize_one(raw: int, low: int | None, high: int | None) -> int:
    """NormalizeScore of one node: 100 x (score - min) / (max - min), 0 when all score alike."""
    if low is None or high is None or high == low:
        return 0
    return int(MAX_NODE_SCORE * ((raw - low) / (high - low)))


def _pod_affinity_key(pod: PodInfo) -> Hashable:
    return pod.pod_affinity, pod.namespace


def _pod_affinity_prescore(pod: PodInfo, snapshot: Snapshot, profile: Profile, unmerged: bool = False) -> Any:
    """InterPodAffinity's PreScore with the profile's InterPodAffinityArgs."""
    return prescore(
        pod, snapshot, unmerged, profile.hard_pod_affinity_weight, profile.ignore_preferred_terms_of_existing_pods
    )


NORMALIZE = Normalize(normalize_one)
FILTER = FilterPlugin(
    NAME,
    no_filter,
    Reads.CLUSTER,
    _pod_affinity_key,
    lambda pod, snapshot, profile: prefilter(pod, snapshot),
    labels=True,
)
FILTER_UNMERGED = FilterPlugin(
    NAME,
    no_filter,
    Reads.CLUSTER,
    _pod_affinity_key,
    lambda pod, snapshot, profile: prefilter(pod, snapshot, unmerged=True),
    labels=True,
    variant=UNMERGED,
)
SCORE = ScorePlugin(
    NAME,
    lambda pod, snapshot, profile: _pod_affinity_prescore(pod, snapshot, profile),
    score,
    NORMALIZE,
    Reads.CLUSTER,
    lambda pod, profile: _pod_affinity_key(pod),
    labels=True,
)
SCORE_UNMERGED = ScorePlugin(
    NAME,
    lambda pod, snapshot, profile: _pod_affinity_prescore(pod, snapshot, profile, unmerged=True),
    score,
    NORMALIZE,
    Reads.CLUSTER,
    lambda pod, profile: _pod_affinity_key(pod),
    labels=True,
)
