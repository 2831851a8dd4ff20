"""NodeAffinity: PreFilter narrows the nodes to those the required terms name (`matchFields
metadata.name In`), Filter checks the profile's addedAffinity, then spec.nodeSelector and the
required terms; Score sums the weights of the preferred terms (the pod's and the profile's
addedAffinity) a node matches, normalised so the best node has 100.

Sources: kubernetes/kubernetes v1.36 pkg/scheduler/framework/plugins/nodeaffinity/
node_affinity.go (PreFilter, Filter, PreScore, Score, NormalizeScore), staging/src/k8s.io/
component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go (RequiredNodeAffinity.Match).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from webhook.affinity import NODE_NAME_FIELD, node_selector_matches, preferred_score
from webhook.scheduler.framework import DEFAULT_NORMALIZE, FilterPlugin, Reads, ScorePlugin
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Profile

NAME = "NodeAffinity"
REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"  # nodeaffinity.ErrReasonPod
REASON_ENFORCED_AFFINITY = "node(s) didn't match scheduler-enforced node affinity"  # nodeaffinity.errReasonEnforced
# Nodes left out by NodeAffinity's PreFilter (schedule_one.go, SetAbsentNodesStatus).
REASON_NOT_IN_PREFILTER = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
# NodeAffinity's PreFilter when the required terms name disjoint sets of nodes.
REASON_TERMS_CONFLICT = "pod affinity terms conflict"


def prefilter_node_names(pod: PodInfo) -> frozenset[str] | None:
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


def node_affinity(pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile) -> tuple[str, ...]:
    """NodeAffinity: the profile's addedAffinity, then the pod's node selector and required terms."""
    if profile.added_required is not None and not node_selector_matches(profile.added_required, node.labels, node.name):
        return (REASON_ENFORCED_AFFINITY,)
    return () if required_affinity_matches(pod, node) else (REASON_NODE_AFFINITY,)


def required_affinity_matches(pod: PodInfo, node: Node) -> bool:
    """RequiredNodeAffinity.Match: spec.nodeSelector AND the required node affinity terms."""
    for key, value in pod.node_selector.items():
        if key not in node.labels or node.labels[key] != value:
            return False
    if pod.required is None:
        return True
    return node_selector_matches(pod.required, node.labels, node.name)


def _preferred(pod: PodInfo, profile: Profile) -> Hashable:
    return (*pod.preferred, *profile.added_preferred)


def _affinity_score(terms: Any, node: Node, usage: NodeUsage) -> int:
    return preferred_score(terms, node.labels, node.name)


# PreFilter reads the required terms too
FILTER = FilterPlugin(
    NAME,
    node_affinity,
    Reads.NODE,
    lambda pod: (tuple(sorted(pod.node_selector.items())), pod.required),
    node_names=prefilter_node_names,
    conflict=REASON_TERMS_CONFLICT,
)
SCORE = ScorePlugin(
    NAME,
    lambda pod, snapshot, profile: _preferred(pod, profile),
    _affinity_score,
    DEFAULT_NORMALIZE,
    Reads.NODE,
    _preferred,
)
