"""The ONE plugin table: every Filter and Score plugin evaluated here, by kube-scheduler's name,
composed from the plugin modules (`plugins/<plugin>.py`, each exposing its entries), the default
profile and the variants each modelled release runs. `cycle` (explain, status) and `incremental`
(rebalance) iterate these tables and nothing else, so a plugin added here (one module, one line
below) is evaluated by all of them; kube-scheduler's NewInTreeRegistry
(pkg/scheduler/framework/plugins/registry.go) is its counterpart.

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
from collections.abc import Mapping
from types import MappingProxyType

from webhook.kubeversion import NEWEST, KubeVersion, nearest
from webhook.names import DEFAULT_NODE_AFFINITY_WEIGHT
from webhook.scheduler.framework import FilterPlugin, Reads, ScorePlugin
from webhook.scheduler.model import Profile
from webhook.scheduler.plugins import (
    imagelocality,
    interpodaffinity,
    netqos,
    nodeaffinity,
    nodedeclaredfeatures,
    nodename,
    nodeports,
    noderesources,
    nodeunschedulable,
    podtopologyspread,
    tainttoleration,
)

# kube-scheduler's plugin names
NODE_UNSCHEDULABLE = nodeunschedulable.NAME
NODE_NAME = nodename.NAME
TAINT_TOLERATION = tainttoleration.NAME
NODE_AFFINITY = nodeaffinity.NAME
NODE_PORTS = nodeports.NAME
NODE_RESOURCES_FIT = noderesources.NAME
BALANCED_ALLOCATION = noderesources.BALANCED_ALLOCATION
IMAGE_LOCALITY = imagelocality.NAME
POD_TOPOLOGY_SPREAD = podtopologyspread.NAME
INTER_POD_AFFINITY = interpodaffinity.NAME
NODE_DECLARED_FEATURES = nodedeclaredfeatures.NAME
NETQOS = netqos.NAME  # the NetQoS scheduler plugin, in a profile that enables it
# The variants older releases run (`VERSION_VARIANTS`), by the name of their table entry.
BALANCED_ALLOCATION_WITH_POD = noderesources.BALANCED_ALLOCATION_WITH_POD
IMAGE_LOCALITY_UNCOUNTED_VOLUMES = imagelocality.UNCOUNTED_VOLUMES
IMAGE_LOCALITY_NO_VOLUMES = imagelocality.NO_VOLUMES
NODE_NAME_BEFORE_137 = nodename.NAME_BEFORE_137
NODE_DECLARED_FEATURES_136 = nodedeclaredfeatures.NAME_136
NODE_DECLARED_FEATURES_OFF = nodedeclaredfeatures.NAME_OFF
INTER_POD_AFFINITY_UNMERGED = interpodaffinity.UNMERGED

# In the default profile's Filter order: the framework stops at the first plugin that rejects a
# node, and its reasons are the node's. The plugins that read the node alone run first. A
# release's variant sits where that release runs it: v1.37.2 runs NodeName first, with a
# PreFilter naming spec.nodeName; v1.34.4-v1.36.3 after NodeUnschedulable, without one
# (default_plugins.go getDefaultPlugins, plugins/nodename/node_name.go at each tag).
FILTER_PLUGINS: tuple[FilterPlugin, ...] = (
    nodename.FILTER,
    nodeunschedulable.FILTER,
    nodename.FILTER_BEFORE_137,
    tainttoleration.FILTER,
    nodeaffinity.FILTER,
    nodeports.FILTER,
    noderesources.FIT_FILTER,
    podtopologyspread.FILTER,
    interpodaffinity.FILTER,
    interpodaffinity.FILTER_UNMERGED,
    nodedeclaredfeatures.FILTER,
    nodedeclaredfeatures.FILTER_136,
    nodedeclaredfeatures.FILTER_OFF,
)

# In the order scores are computed and shown.
_SCORE_PLUGINS: tuple[ScorePlugin, ...] = (
    tainttoleration.SCORE,
    nodeaffinity.SCORE,
    noderesources.FIT_SCORE,
    podtopologyspread.SCORE,
    interpodaffinity.SCORE,
    noderesources.BALANCED_SCORE,
    imagelocality.SCORE,
    netqos.SCORE,
)
_VARIANTS = {
    BALANCED_ALLOCATION_WITH_POD: noderesources.BALANCED_SCORE_WITH_POD,
    IMAGE_LOCALITY_UNCOUNTED_VOLUMES: imagelocality.SCORE_UNCOUNTED_VOLUMES,
    IMAGE_LOCALITY_NO_VOLUMES: imagelocality.SCORE_NO_VOLUMES,
    INTER_POD_AFFINITY_UNMERGED: interpodaffinity.SCORE_UNMERGED,
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
#   takes the term by value up to 1.36, by pointer from 1.37: `plugins.interpodaffinity`).
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
