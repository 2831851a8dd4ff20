"""The plugin table: every Filter and Score plugin evaluated here, by kube-scheduler's name, with
the functions it runs, its normalisation and what it reads. `cycle` (explain, status) and
`incremental` (rebalance) iterate these tables and nothing else, so a plugin added here is
evaluated by all of them.

A `Profile` says which Score plugins run, with which weights; `Profile.variants` picks another
entry for a plugin name, of `SCORE_PLUGINS` or of `FILTER_PLUGINS` (a Kubernetes version that runs
a plugin differently is one entry: `BALANCED_ALLOCATION_WITH_POD`, NodeResourcesBalancedAllocation
before 1.36; `NODE_NAME_BEFORE_137`, NodeName without its PreFilter and after NodeUnschedulable;
`INTER_POD_AFFINITY_UNMERGED`, InterPodAffinity before 1.37, a Filter and a Score entry).
The entries of a plugin's own name, and the default profile, are kube-scheduler v1.37's
(pkg/scheduler/apis/config/v1/default_plugins.go); `VERSION_VARIANTS` gives each older release's.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from webhook.affinity import preferred_score
from webhook.kubeversion import NEWEST, KubeVersion, nearest
from webhook.names import DEFAULT_NODE_AFFINITY_WEIGHT
from webhook.scheduler import filters, podaffinity, read, scores, spread
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Profile, Snapshot, selects

# kube-scheduler's plugin names
NODE_UNSCHEDULABLE = "NodeUnschedulable"
NODE_NAME = "NodeName"
TAINT_TOLERATION = "TaintToleration"
NODE_AFFINITY = "NodeAffinity"
NODE_PORTS = "NodePorts"
NODE_RESOURCES_FIT = "NodeResourcesFit"
BALANCED_ALLOCATION = "NodeResourcesBalancedAllocation"
IMAGE_LOCALITY = "ImageLocality"
POD_TOPOLOGY_SPREAD = "PodTopologySpread"
INTER_POD_AFFINITY = "InterPodAffinity"
NODE_DECLARED_FEATURES = "NodeDeclaredFeatures"
NETQOS = "NetQoS"  # the NetQoS scheduler plugin, in a profile that enables it
# The variants older releases run (`VERSION_VARIANTS`), by the name of their table entry.
BALANCED_ALLOCATION_WITH_POD = "NodeResourcesBalancedAllocation (before 1.36)"
IMAGE_LOCALITY_UNCOUNTED_VOLUMES = "ImageLocality (1.36)"  # image volumes in the sum, not the scale
IMAGE_LOCALITY_NO_VOLUMES = "ImageLocality (before 1.36)"  # containers' images only
NODE_NAME_BEFORE_137 = "NodeName (before 1.37)"  # no PreFilter; after NodeUnschedulable
NODE_DECLARED_FEATURES_136 = "NodeDeclaredFeatures (1.36)"  # without VolumeBindMountOptions
NODE_DECLARED_FEATURES_OFF = "NodeDeclaredFeatures (off before 1.36)"  # absent in 1.34, alpha in 1.35
# the incoming pod's namespaceSelectors also match nil labels: NotIn, DoesNotExist select every namespace
INTER_POD_AFFINITY_UNMERGED = "InterPodAffinity (before 1.37)"


class Reads(enum.Enum):
    """What a plugin's verdict on a node depends on besides the pod."""

    NODE = "the node"  # its labels, taints, images, allocatable
    USAGE = "the node and what the pods on it take"  # NodeUsage: requests, pods, host ports
    CLUSTER = "every node and the pods on them"  # the Snapshot: other pods' labels and terms


FilterFunction = Callable[[PodInfo, Node, NodeUsage, Profile], tuple[str, ...]]
# PreFilter over the whole snapshot, then the Filter of one node; None when PreFilter skips the pod
PreFilterFunction = Callable[[PodInfo, Snapshot, Profile], Callable[[Node], tuple[str, ...]] | None]
# A PreFilter's PreFilterResult.NodeNames: the only nodes the cycle filters (None: every node)
NodeNamesFunction = Callable[[PodInfo], frozenset[str] | None]


def _no_filter(pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class FilterPlugin:
    """One Filter plugin: `filter` gives a node's reasons, () when it passes; a plugin that
    reads the whole cluster has a `prefilter` instead, which returns that function for one
    cycle. `key` is what of the pod its verdict depends on (pods with one key are filtered
    alike), `labels` whether other pods' selectors read the pod's own labels too.

    `node_names` is a PreFilter that narrows the nodes the cycle filters (PreFilterResult); an
    empty set is the plugin rejecting the pod with `conflict`. `variant` names an entry that is
    a release's version of plugin `name` (a profile picks it through `Profile.variants`)."""

    name: str
    filter: FilterFunction
    reads: Reads
    key: Callable[[PodInfo], Hashable]
    prefilter: PreFilterFunction | None = None
    labels: bool = False
    node_names: NodeNamesFunction | None = None
    conflict: str = ""
    variant: str = ""
    # a plugin that filters with the last ones whose PreFilter reads the pod alone and whose Filter
    # reads the node alone: judged without the snapshot, as `status` judges (`late_node_filters`)
    snapshot_free: bool = False

    @property
    def entry(self) -> str:
        """The entry's name in the table: the variant's, else the plugin's."""
        return self.variant or self.name


@dataclass(frozen=True)
class Normalize:
    """A NormalizeScore: `scale` gives one node's score from its raw score and the lowest and
    highest raw scores over the nodes normalised (None when there are none); with
    `ignore_negative`, a negative raw score marks a node the plugin ignores (it is left out of
    the range)."""

    scale: Callable[[int, int | None, int | None], int]
    ignore_negative: bool = False

    def extremes(self, values: Iterable[int]) -> tuple[int | None, int | None]:
        kept = [v for v in values if v >= 0] if self.ignore_negative else list(values)
        return (min(kept), max(kept)) if kept else (None, None)

    def __call__(self, raw: Sequence[int]) -> list[int]:
        low, high = self.extremes(raw)
        return [self.scale(r, low, high) for r in raw]


# helper.DefaultNormalizeScore: the best feasible node has 100 (reversed: a node scoring 0 has 100)
DEFAULT_NORMALIZE = Normalize(lambda raw, low, high: scores.normalized(raw, high or 0))
DEFAULT_NORMALIZE_REVERSE = Normalize(lambda raw, low, high: scores.normalized(raw, high or 0, reverse=True))
SPREAD_NORMALIZE = Normalize(spread.normalize_one, ignore_negative=True)
POD_AFFINITY_NORMALIZE = Normalize(podaffinity.normalize_one)


@dataclass(frozen=True)
class ScorePlugin:
    """One Score plugin: `prepare` is its PreScore (the state its scores share for one pod over
    the snapshot; None when PreScore skips the pod), `score` the raw score of a node given that
    state, `normalize` its NormalizeScore (None: already 0-100), `key` what of the pod and the
    profile its state depends on (pods with one key score alike), `labels` whether other pods'
    selectors read the pod's own labels too."""

    name: str
    prepare: Callable[[PodInfo, Snapshot, Profile], Any]
    score: Callable[[Any, Node, NodeUsage], int]
    normalize: Normalize | None
    reads: Reads
    key: Callable[[PodInfo, Profile], Hashable]
    labels: bool = False


# ---------------------------------------------------------------------------------------------
# Score plugins: PreScore state and raw score


def _preferred(pod: PodInfo, profile: Profile) -> Hashable:
    return (*pod.preferred, *profile.added_preferred)


def _affinity_score(terms: Any, node: Node, usage: NodeUsage) -> int:
    return preferred_score(terms, node.labels, node.name)


def _taint_score(tolerations: Any, node: Node, usage: NodeUsage) -> int:
    return scores.intolerable_prefer_no_schedule(tolerations, node.taints)


def _fit_state(pod: PodInfo, snapshot: Snapshot, profile: Profile) -> Any:
    return pod.scored_requests, profile.scoring_strategy


def _fit_score(state: Any, node: Node, usage: NodeUsage) -> int:
    request, strategy = state
    return scores.fit_score(request, node, usage, strategy)


def _balanced_state(pod: PodInfo, snapshot: Snapshot, profile: Profile) -> Any:
    if scores.is_best_effort(pod.requests, profile.balanced_resources):
        return None
    return pod.requests, profile.balanced_resources


def _balanced_score(state: Any, node: Node, usage: NodeUsage) -> int:
    return scores.balanced_score(state[0], node, usage, state[1])


def _balanced_with_pod_score(state: Any, node: Node, usage: NodeUsage) -> int:
    return scores.balanced_score_with_pod(state[0], node, usage, state[1])


def _requests_key(pod: PodInfo, profile: Profile) -> Hashable:
    return tuple(sorted(pod.requests.items())), tuple(sorted(pod.scored_requests.items()))


@dataclass(frozen=True)
class _Images:
    images: tuple[str, ...]
    # image name -> the cache's summary over every node of the snapshot: the one size it keeps
    # for the name and how many nodes have it (`scores.image_states`)
    states: Mapping[str, scores.ImageState]
    total: int
    containers: int  # the score's scale: how many images each may bring up to 1000 MB


def _image_state(sums_volumes: bool, counts_volumes: bool) -> Callable[[PodInfo, Snapshot, Profile], _Images]:
    """ImageLocality's PreScore state as a release computes it (image_locality.go sumImageScores
    and calculatePriority at each tag): v1.37.2 sums the image volumes' sizes with the containers'
    and counts each volume in the scale; v1.36.3 sums them but scales by the containers alone;
    v1.34.4 and v1.35.4 read the containers' images only (`pod.images` lists them first).
    Each image is scored by the one size the scheduler's cache keeps for its name, summarised
    over every node of the snapshot (`snapshot.nodes`, not the feasible ones): the state depends
    on the pod's images and on those nodes alone, so `_images_key` shares it within one snapshot."""

    def prepare(pod: PodInfo, snapshot: Snapshot, profile: Profile) -> _Images:
        images = pod.images if sums_volumes else pod.images[: pod.containers]
        scale = len(pod.images) if counts_volumes else pod.containers
        return _Images(images, scores.image_states(images, snapshot.nodes), len(snapshot.nodes), scale)

    return prepare


def _images_key(pod: PodInfo, profile: Profile) -> Hashable:
    return pod.images, pod.containers


def _image_score(state: Any, node: Node, usage: NodeUsage) -> int:
    if not state.states:
        return 0  # no node has one of its images: every node scores 0
    return scores.image_locality(state.images, node, state.states, state.total, state.containers)


def _netqos_score(labels: Any, node: Node, usage: NodeUsage) -> int:
    return scores.netqos_score(labels, node.labels)


def _netqos_key(pod: PodInfo, profile: Profile) -> Hashable:
    return pod.labels.get(scores.NETQOS_POD_LABEL[0])


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


def _pod_affinity_key(pod: PodInfo) -> Hashable:
    return pod.pod_affinity, pod.namespace


def _pod_affinity_prescore(pod: PodInfo, snapshot: Snapshot, profile: Profile, unmerged: bool = False) -> Any:
    """InterPodAffinity's PreScore with the profile's InterPodAffinityArgs."""
    return podaffinity.prescore(
        pod,
        snapshot,
        unmerged,
        profile.hard_pod_affinity_weight,
        profile.ignore_preferred_terms_of_existing_pods,
    )


def _declared_features(known: frozenset[str]) -> PreFilterFunction:
    """NodeDeclaredFeatures' PreFilter and Filter as a release runs it: the features of `known`
    (its registry, k8s.io/component-helpers nodedeclaredfeatures/features/registry.go) the pod
    needs; PreFilter skips a pod that needs none."""

    def prefilter(pod: PodInfo, snapshot: Snapshot, profile: Profile) -> Callable[[Node], tuple[str, ...]] | None:
        needed = pod.node_features & known
        return (lambda node: filters.undeclared_features(needed, node)) if needed else None

    return prefilter


def _features_key(pod: PodInfo) -> Hashable:
    return pod.node_features


_FEATURES_136 = frozenset({read.RESTART_ALL_CONTAINERS, read.USER_NAMESPACES_HOST_NETWORK})
_FEATURES_137 = _FEATURES_136 | {read.VOLUME_BIND_MOUNT_OPTIONS}


# ---------------------------------------------------------------------------------------------
# The tables

# In the default profile's Filter order: the framework stops at the first plugin that rejects a
# node, and its reasons are the node's. The plugins that read the node alone run first. A
# release's variant sits where that release runs it: v1.37.2 runs NodeName first, with a
# PreFilter naming spec.nodeName; v1.34.4-v1.36.3 after NodeUnschedulable, without one
# (default_plugins.go getDefaultPlugins, plugins/nodename/node_name.go at each tag).
FILTER_PLUGINS: tuple[FilterPlugin, ...] = (
    FilterPlugin(NODE_NAME, filters.node_name, Reads.NODE, lambda pod: pod.node_name, node_names=filters.named_node),
    FilterPlugin(NODE_UNSCHEDULABLE, filters.node_unschedulable, Reads.NODE, lambda pod: pod.tolerations),
    FilterPlugin(NODE_NAME, filters.node_name, Reads.NODE, lambda pod: pod.node_name, variant=NODE_NAME_BEFORE_137),
    FilterPlugin(TAINT_TOLERATION, filters.taint_toleration, Reads.NODE, lambda pod: pod.tolerations),
    # PreFilter reads the required terms too
    FilterPlugin(
        NODE_AFFINITY,
        filters.node_affinity,
        Reads.NODE,
        lambda pod: (tuple(sorted(pod.node_selector.items())), pod.required),
        node_names=filters.prefilter_node_names,
        conflict=filters.REASON_TERMS_CONFLICT,
    ),
    FilterPlugin(NODE_PORTS, filters.node_ports, Reads.USAGE, lambda pod: pod.host_ports),
    FilterPlugin(
        NODE_RESOURCES_FIT, filters.node_resources_fit, Reads.USAGE, lambda pod: tuple(sorted(pod.requests.items()))
    ),
    FilterPlugin(
        POD_TOPOLOGY_SPREAD,
        _no_filter,
        Reads.CLUSTER,
        _spread_key,
        lambda pod, snapshot, profile: spread.prefilter(pod, snapshot, profile.spread_defaults),
    ),
    FilterPlugin(
        INTER_POD_AFFINITY,
        _no_filter,
        Reads.CLUSTER,
        _pod_affinity_key,
        lambda pod, snapshot, profile: podaffinity.prefilter(pod, snapshot),
        labels=True,
    ),
    FilterPlugin(
        INTER_POD_AFFINITY,
        _no_filter,
        Reads.CLUSTER,
        _pod_affinity_key,
        lambda pod, snapshot, profile: podaffinity.prefilter(pod, snapshot, unmerged=True),
        labels=True,
        variant=INTER_POD_AFFINITY_UNMERGED,
    ),
    # Appended to the default plugins where its feature gate is on (default_plugins.go
    # applyFeatureGates), so it filters last; it reads the node alone, but sits with the plugins
    # that run last, whose PreFilter may skip the pod as its own does.
    FilterPlugin(
        NODE_DECLARED_FEATURES,
        _no_filter,
        Reads.CLUSTER,
        _features_key,
        _declared_features(_FEATURES_137),
        snapshot_free=True,
    ),
    FilterPlugin(
        NODE_DECLARED_FEATURES,
        _no_filter,
        Reads.CLUSTER,
        _features_key,
        _declared_features(_FEATURES_136),
        variant=NODE_DECLARED_FEATURES_136,
        snapshot_free=True,
    ),
    FilterPlugin(NODE_DECLARED_FEATURES, _no_filter, Reads.CLUSTER, _features_key, variant=NODE_DECLARED_FEATURES_OFF),
)

_SCORE_PLUGINS = (
    ScorePlugin(
        TAINT_TOLERATION,
        lambda pod, snapshot, profile: pod.tolerations,
        _taint_score,
        DEFAULT_NORMALIZE_REVERSE,
        Reads.NODE,
        lambda pod, profile: pod.tolerations,
    ),
    ScorePlugin(
        NODE_AFFINITY,
        lambda pod, snapshot, profile: _preferred(pod, profile),
        _affinity_score,
        DEFAULT_NORMALIZE,
        Reads.NODE,
        _preferred,
    ),
    ScorePlugin(NODE_RESOURCES_FIT, _fit_state, _fit_score, None, Reads.USAGE, _requests_key),
    ScorePlugin(
        POD_TOPOLOGY_SPREAD,
        lambda pod, snapshot, profile: spread.prescore(pod, snapshot, profile.spread_defaults),
        spread.score,
        SPREAD_NORMALIZE,
        Reads.CLUSTER,
        lambda pod, profile: _spread_key(pod),
    ),
    ScorePlugin(
        INTER_POD_AFFINITY,
        lambda pod, snapshot, profile: _pod_affinity_prescore(pod, snapshot, profile),
        podaffinity.score,
        POD_AFFINITY_NORMALIZE,
        Reads.CLUSTER,
        lambda pod, profile: _pod_affinity_key(pod),
        labels=True,
    ),
    ScorePlugin(BALANCED_ALLOCATION, _balanced_state, _balanced_score, None, Reads.USAGE, _requests_key),
    ScorePlugin(IMAGE_LOCALITY, _image_state(True, True), _image_score, None, Reads.NODE, _images_key),
    ScorePlugin(NETQOS, lambda pod, snapshot, profile: pod.labels, _netqos_score, None, Reads.NODE, _netqos_key),
)
_VARIANTS = {
    BALANCED_ALLOCATION_WITH_POD: ScorePlugin(
        BALANCED_ALLOCATION, _balanced_state, _balanced_with_pod_score, None, Reads.USAGE, _requests_key
    ),
    IMAGE_LOCALITY_UNCOUNTED_VOLUMES: ScorePlugin(
        IMAGE_LOCALITY, _image_state(True, False), _image_score, None, Reads.NODE, _images_key
    ),
    IMAGE_LOCALITY_NO_VOLUMES: ScorePlugin(
        IMAGE_LOCALITY, _image_state(False, False), _image_score, None, Reads.NODE, _images_key
    ),
    INTER_POD_AFFINITY_UNMERGED: ScorePlugin(
        INTER_POD_AFFINITY,
        lambda pod, snapshot, profile: _pod_affinity_prescore(pod, snapshot, profile, unmerged=True),
        podaffinity.score,
        POD_AFFINITY_NORMALIZE,
        Reads.CLUSTER,
        lambda pod, profile: _pod_affinity_key(pod),
        labels=True,
    ),
}
# Every Score plugin by its entry name: its kube-scheduler name, or a variant's.
SCORE_PLUGINS: Mapping[str, ScorePlugin] = MappingProxyType({p.name: p for p in _SCORE_PLUGINS} | _VARIANTS)
SCORE_ORDER = tuple(p.name for p in _SCORE_PLUGINS)  # the order scores are computed and shown

# The default profile's Score plugins evaluated here, with their weights (default_plugins.go).
DEFAULT_WEIGHTS: Mapping[str, int] = MappingProxyType(
    {
        TAINT_TOLERATION: 3,
        NODE_AFFINITY: DEFAULT_NODE_AFFINITY_WEIGHT,
        NODE_RESOURCES_FIT: 1,
        POD_TOPOLOGY_SPREAD: 2,
        INTER_POD_AFFINITY: 2,
        BALANCED_ALLOCATION: 1,
        IMAGE_LOCALITY: 1,
    }
)
EVALUATED_SCORE_PLUGINS = tuple(DEFAULT_WEIGHTS)
# The default profile's Score plugins that are not evaluated, with their weights.
NOT_EVALUATED_SCORE: Mapping[str, int] = MappingProxyType({})
# Plugins of the default profile whose Filter or Score is not evaluated here.
NOT_EVALUATED = (
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    "DynamicResources",
)
DEFAULT_PROFILE = Profile(DEFAULT_WEIGHTS, not_evaluated=NOT_EVALUATED)

# Per Kubernetes minor release, the entries its default profile runs where they are not the
# newest's. Read from each tag's sources (v1.34.4, v1.35.4, v1.36.3, v1.37.2): the default plugins
# and weights (pkg/scheduler/apis/config/v1/default_plugins.go getDefaultPlugins) are the same in
# all four; what differs is
# - NodeResourcesBalancedAllocation: the balance with the pod up to 1.35, the change the pod makes
#   from 1.36 (plugins/noderesources/balanced_allocation.go balancedResourceScorer);
# - ImageLocality: image volumes ignored up to 1.35, summed in 1.36, summed and counted in the
#   scale from 1.37 (plugins/imagelocality/image_locality.go sumImageScores, calculatePriority);
# - NodeName: from 1.37 first and with a PreFilter naming spec.nodeName, so the other nodes are
#   "node(s) didn't satisfy plugin(s) [NodeName]" (plugins/nodename/node_name.go PreFilter);
# - NodeDeclaredFeatures: absent in 1.34, off in 1.35 (alpha), on in 1.36 (beta) and 1.37 (GA),
#   whose registry adds VolumeBindMountOptions (pkg/features/kube_features.go NodeDeclaredFeatures);
# - InterPodAffinity: up to 1.36 the incoming pod's namespaceSelectors stay in its terms and are
#   matched against nil labels, so NotIn and DoesNotExist select every namespace; from 1.37 only
#   the namespaces they list (plugins/interpodaffinity/plugin.go mergeAffinityTermNamespacesIfNotEmpty
#   takes the term by value up to 1.36, by pointer from 1.37: `podaffinity`).
# What else moved and is not modelled (feature-gated plugins off by default) is in
# docs/scheduling.md, "Kubernetes versions".
_BEFORE_136 = {
    NODE_NAME: NODE_NAME_BEFORE_137,
    BALANCED_ALLOCATION: BALANCED_ALLOCATION_WITH_POD,
    IMAGE_LOCALITY: IMAGE_LOCALITY_NO_VOLUMES,
    NODE_DECLARED_FEATURES: NODE_DECLARED_FEATURES_OFF,
    INTER_POD_AFFINITY: INTER_POD_AFFINITY_UNMERGED,
}
VERSION_VARIANTS: Mapping[KubeVersion, Mapping[str, str]] = MappingProxyType(
    {
        KubeVersion(1, 34): MappingProxyType(_BEFORE_136),
        KubeVersion(1, 35): MappingProxyType(_BEFORE_136),
        KubeVersion(1, 36): MappingProxyType(
            {
                NODE_NAME: NODE_NAME_BEFORE_137,
                IMAGE_LOCALITY: IMAGE_LOCALITY_UNCOUNTED_VOLUMES,
                NODE_DECLARED_FEATURES: NODE_DECLARED_FEATURES_136,
                INTER_POD_AFFINITY: INTER_POD_AFFINITY_UNMERGED,
            }
        ),
        KubeVersion(1, 37): MappingProxyType({}),
    }
)


def for_version(profile: Profile, version: KubeVersion) -> Profile:
    """`profile` as kube-scheduler `version` runs it (a version outside 1.34-1.37: the nearest)."""
    known, _ = nearest(version)
    return dataclasses.replace(profile, variants=MappingProxyType({**VERSION_VARIANTS[known], **profile.variants}))


def default_profile(version: KubeVersion = NEWEST) -> Profile:
    """kube-scheduler's default profile in `version` (the newest by default)."""
    return for_version(DEFAULT_PROFILE, version)


def score_plugins(profile: Profile) -> list[tuple[ScorePlugin, int]]:
    """The Score plugins `profile` runs, in `SCORE_ORDER`, each with its weight."""
    return [
        (SCORE_PLUGINS[profile.variants.get(name, name)], profile.weights[name])
        for name in SCORE_ORDER
        if name in profile.weights
    ]


def _entries(profile: Profile) -> tuple[FilterPlugin, ...]:
    """Of each Filter plugin the entry the profile's variants pick, in the table's order."""
    return tuple(p for p in FILTER_PLUGINS if profile.variants.get(p.name, p.name) == p.entry)


def filter_plugins(profile: Profile) -> tuple[FilterPlugin, ...]:
    """The Filter plugins `profile` runs, in the table's order (kube-scheduler's default order;
    a profile that lists a plugin again at its filter point runs it earlier, which can change
    a rejected node's reason, never whether it is rejected): those it does not disable."""
    return tuple(p for p in _entries(profile) if p.name not in profile.disabled_filters)


def node_filters(profile: Profile) -> tuple[FilterPlugin, ...]:
    """The Filter plugins that read the pod and the node alone, in order."""
    return tuple(p for p in filter_plugins(profile) if p.reads is Reads.NODE)


def usage_filters(profile: Profile) -> tuple[FilterPlugin, ...]:
    """The Filter plugins that read what the pods on the node take, in order (after the others)."""
    return tuple(p for p in filter_plugins(profile) if p.reads is Reads.USAGE)


def cluster_filters(profile: Profile) -> tuple[FilterPlugin, ...]:
    """The Filter plugins that read every node's pods, in order (after the others)."""
    return tuple(p for p in filter_plugins(profile) if p.reads is Reads.CLUSTER)


def late_node_filters(profile: Profile) -> tuple[FilterPlugin, ...]:
    """Those of `cluster_filters` that need no snapshot (`FilterPlugin.snapshot_free`), in order."""
    return tuple(p for p in cluster_filters(profile) if p.snapshot_free)


def node_name_prefilters(profile: Profile) -> tuple[FilterPlugin, ...]:
    """The plugins whose PreFilter can narrow the nodes filtered, in order: a PreFilter runs
    whether or not the plugin's Filter does (the two are separate extension points), unless the
    profile disables it."""
    return tuple(p for p in _entries(profile) if p.node_names is not None and p.name not in profile.disabled_prefilters)


def reads_labels(profile: Profile) -> bool:
    """Whether a plugin of the profile lets other pods' selectors read the pod's own labels."""
    return any(p.labels for p in filter_plugins(profile)) or any(p.labels for p, _ in score_plugins(profile))
