"""NodeDeclaredFeatures: a node must declare every node feature the pod needs; PreFilter skips a pod
that needs none. Absent in 1.34, off (alpha) in 1.35, on in 1.36 (beta) and 1.37 (GA), whose
registry adds VolumeBindMountOptions.

Sources: kubernetes/kubernetes pkg/scheduler/framework/plugins/nodedeclaredfeatures/
nodedeclaredfeatures.go (v1.36.3, v1.37.2), k8s.io/component-helpers nodedeclaredfeatures/features/
registry.go, pkg/features/kube_features.go (NodeDeclaredFeatures).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from webhook.scheduler import read
from webhook.scheduler.framework import FilterPlugin, PreFilterFunction, Reads, no_filter
from webhook.scheduler.model import Node, PodInfo, Profile, Snapshot

NAME = "NodeDeclaredFeatures"
# The variants older releases run (`registry.VERSION_VARIANTS`), by the name of their table entry.
NAME_136 = "NodeDeclaredFeatures (1.36)"  # without VolumeBindMountOptions
NAME_OFF = "NodeDeclaredFeatures (off before 1.36)"  # absent in 1.34, alpha in 1.35
# nodedeclaredfeatures.errReasonUnsatisfiedRequirements
REASON_UNDECLARED_FEATURES = "node(s) didn't match Pod's required features"


def undeclared_features(needed: frozenset[str], node: Node) -> tuple[str, ...]:
    """NodeDeclaredFeatures.Filter: the node declares every feature the pod needs
    (plugins/nodedeclaredfeatures/nodedeclaredfeatures.go, v1.36.3 and v1.37.2)."""
    return () if needed <= node.declared_features else (REASON_UNDECLARED_FEATURES,)


def _declared_features(known: frozenset[str]) -> PreFilterFunction:
    """NodeDeclaredFeatures' PreFilter and Filter as a release runs it: the features of `known`
    (its registry, k8s.io/component-helpers nodedeclaredfeatures/features/registry.go) the pod
    needs; PreFilter skips a pod that needs none."""

    def prefilter(pod: PodInfo, snapshot: Snapshot, profile: Profile) -> Callable[[Node], tuple[str, ...]] | None:
        needed = pod.node_features & known
        return (lambda node: undeclared_features(needed, node)) if needed else None

    return prefilter


def _features_key(pod: PodInfo) -> Hashable:
    return pod.node_features


_FEATURES_136 = frozenset({read.RESTART_ALL_CONTAINERS, read.USER_NAMESPACES_HOST_NETWORK})
_FEATURES_137 = _FEATURES_136 | {read.VOLUME_BIND_MOUNT_OPTIONS}

# Appended to the default plugins where its feature gate is on (default_plugins.go
# applyFeatureGates), so it filters last; it reads the node alone, but sits with the plugins
# that run last, whose PreFilter may skip the pod as its own does.
FILTER = FilterPlugin(
    NAME, no_filter, Reads.CLUSTER, _features_key, _declared_features(_FEATURES_137), snapshot_free=True
)
FILTER_136 = FilterPlugin(
    NAME,
    no_filter,
    Reads.CLUSTER,
    _features_key,
    _declared_features(_FEATURES_136),
    variant=NAME_136,
    snapshot_free=True,
)
FILTER_OFF = FilterPlugin(NAME, no_filter, Reads.CLUSTER, _features_key, variant=NAME_OFF)
