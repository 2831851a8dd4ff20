"""What each Kubernetes release's kube-scheduler computes differently, one table per behaviour and
a row per release, through `plugins.default_profile(version)` (the profile explain, status and
rebalance use for a cluster of that version). Each expectation is worked out from that tag's
sources (k8s.io/kubernetes v1.34.4, v1.35.4, v1.36.3, v1.37.2), cited per table."""

from __future__ import annotations

import pytest

from webhook.kubeversion import KubeVersion
from webhook.scheduler.cycle import rank
from webhook.scheduler.filters import REASON_NODE_NAME, REASON_NOT_IN_PREFILTER, REASON_UNSCHEDULABLE
from webhook.scheduler.model import Node, Taint
from webhook.scheduler.plugins import BALANCED_ALLOCATION, IMAGE_LOCALITY, default_profile, filter_plugins
from webhook.scheduler.read import declared_features_needed, node_info, pod_info
from webhook.testing.pods import pod

V134, V135, V136, V137 = (KubeVersion(1, minor) for minor in (34, 35, 36, 37))
MB = 1024 * 1024


# --- ImageLocality and image volumes ----------------------------------------------------------------
# plugins/imagelocality/image_locality.go: v1.34.4 and v1.35.4 sum the containers' images and scale
# by the containers; v1.36.3 adds the image volumes' sizes to the sum (sumImageScores) but still
# scales by the containers (calculatePriority(imageScores, len(InitContainers)+len(Containers)));
# v1.37.2 also counts each image volume in the scale (sumImageScores returns imageCount).
#
# One container of app:1 (100 MB, on both nodes: spread 1) and an image volume data:1 (500 MB, on
# `both` only: spread 1/2, so 250 MB). The score is 100 x (sum - 23 MB) / (1000 MB x count - 23 MB):
#   containers only:          both 100 MB, one 100 MB, count 1: 7700 / 977 = 7 and 7
#   volumes summed (1.36):    both 350 MB, count 1: 32700 / 977 = 33; one 7
#   summed and counted (1.37): count 2: 32700 / 1977 = 16; one 7700 / 1977 = 3

IMAGE_NODES = [
    Node("both", {}, images={"app:1": 100 * MB, "data:1": 500 * MB}),
    Node("one", {}, images={"app:1": 100 * MB}),
]
IMAGE_VOLUME_POD = pod(
    containers=[{"name": "c", "image": "app:1"}],
    volumes=[{"name": "data", "image": {"reference": "data:1"}}, {"name": "tmp", "emptyDir": {}}],
)


@pytest.mark.parametrize(
    "version, both, one",
    [(V134, 7, 7), (V135, 7, 7), (V136, 33, 7), (V137, 16, 3)],
)
def test_image_locality_scores_image_volumes_as_each_release_does(version: KubeVersion, both: int, one: int) -> None:
    ranking = rank(pod_info(IMAGE_VOLUME_POD), IMAGE_NODES, profile=default_profile(version))
    assert [n.scores[IMAGE_LOCALITY] for n in ranking.nodes] == [both, one]
    assert pod_info(IMAGE_VOLUME_POD).uses == frozenset()  # no volume plugin filters on an image volume


@pytest.mark.parametrize("version", [V134, V135, V136, V137])
def test_a_pod_without_image_volumes_scores_alike_on_every_release(version: KubeVersion) -> None:
    plain = pod(containers=[{"name": "c", "image": "app:1"}])
    ranking = rank(pod_info(plain), IMAGE_NODES, profile=default_profile(version))
    assert [n.scores[IMAGE_LOCALITY] for n in ranking.nodes] == [7, 7]


# --- NodeName: its place in the Filter order, and its PreFilter from 1.37 -----------------------------
# apis/config/v1/default_plugins.go: up to v1.36.3 NodeUnschedulable runs before NodeName; v1.37.2
# runs NodeName first and gives it a PreFilter (plugins/nodename/node_name.go) whose
# PreFilterResult is spec.nodeName. The order alone changes no reason: from 1.37 only the named
# node reaches the Filter plugins, and NodeName passes it. What changes is the other nodes'
# reason: the PreFilter leaves them out, "node(s) didn't satisfy plugin(s) [NodeName]"
# (schedule_one.go findNodesThatFitPod), where 1.36 gave a cordoned node NodeUnschedulable's
# reason and the others NodeName's. Names intersect with NodeAffinity's (framework.go
# RunPreFilterPlugins): none in common fails PreFilter for every node.

CORDONED = Node("cordoned", {}, (), True)
NAMED = Node("named", {})
TAINTED = Node("tainted", {}, (Taint("dedicated", "gpu", "NoSchedule"),))
NAME_NODES = [CORDONED, NAMED, TAINTED]
NOT_NAMED = "node(s) didn't satisfy plugin(s) [NodeName]"
BOTH = "node(s) didn't satisfy plugin(s) [NodeAffinity NodeName]"
SIMULTANEOUSLY = "node(s) didn't satisfy plugin(s) [NodeAffinity NodeName] simultaneously"
UNTIL_136 = [REASON_UNSCHEDULABLE, None, REASON_NODE_NAME]


@pytest.mark.parametrize(
    "version, reasons",
    [(V134, UNTIL_136), (V135, UNTIL_136), (V136, UNTIL_136), (V137, [NOT_NAMED, None, NOT_NAMED])],
)
def test_nodes_other_than_spec_node_name_are_filtered_as_each_release_does(version, reasons) -> None:
    ranking = rank(pod_info(pod(nodeName="named")), NAME_NODES, profile=default_profile(version))
    assert [n.reason for n in ranking.nodes] == reasons


@pytest.mark.parametrize(
    "version, message",
    [
        (
            V136,
            "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match the requested node name.",
        ),
        (V137, "0/3 nodes are available: 3 node(s) didn't satisfy plugin(s) [NodeName]."),
    ],
)
def test_a_node_name_no_node_has_fails_every_node_as_each_release_says(version, message) -> None:
    ranking = rank(pod_info(pod(nodeName="gone")), NAME_NODES, profile=default_profile(version))
    assert ranking.filter_message() == message


def _names(*names: str) -> list[dict[str, object]]:
    """Required terms naming nodes, one a term (a field's In takes exactly one value)."""
    return [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]} for name in names]


@pytest.mark.parametrize(
    "version, allowed, reasons, failure",
    [
        # 1.36: NodeAffinity's PreFilter alone; NodeName then rejects what it lets through
        (V136, ("named", "tainted"), [REASON_NOT_IN_PREFILTER, None, REASON_NODE_NAME], None),
        (V137, ("named", "tainted"), [BOTH, None, BOTH], None),
        (V136, ("cordoned",), [REASON_UNSCHEDULABLE, REASON_NOT_IN_PREFILTER, REASON_NOT_IN_PREFILTER], None),
        (V137, ("cordoned",), [SIMULTANEOUSLY] * 3, SIMULTANEOUSLY),
    ],
)
def test_node_name_and_node_affinity_prefilters_intersect_from_137(version, allowed, reasons, failure) -> None:
    named = pod(nodeName="named", required=_names(*allowed))
    ranking = rank(pod_info(named), NAME_NODES, profile=default_profile(version))
    assert [n.reason for n in ranking.nodes] == reasons
    assert ranking.prefilter_failure == failure


UNSCHEDULABLE_FIRST = ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity"]


@pytest.mark.parametrize(
    "version, order",
    [
        (V134, UNSCHEDULABLE_FIRST),
        (V135, UNSCHEDULABLE_FIRST),
        (V136, UNSCHEDULABLE_FIRST),
        (V137, ["NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity"]),
    ],
)
def test_each_release_runs_one_node_name_filter_in_its_place(version: KubeVersion, order: list[str]) -> None:
    names = [p.name for p in filter_plugins(default_profile(version))]
    assert names[:4] == order and names.count("NodeName") == 1


# --- the variants each release's profile picks ---------------------------------------------------------


BEFORE_136 = {
    "NodeName (before 1.37)",
    "NodeResourcesBalancedAllocation (before 1.36)",
    "ImageLocality (before 1.36)",
    "NodeDeclaredFeatures (off before 1.36)",
}


@pytest.mark.parametrize(
    "version, variants",
    [
        (V134, BEFORE_136),
        (V135, BEFORE_136),
        (V136, {"NodeName (before 1.37)", "ImageLocality (1.36)", "NodeDeclaredFeatures (1.36)"}),
        (V137, set()),
    ],
)
def test_each_release_picks_its_variants(version: KubeVersion, variants: set[str]) -> None:
    assert set(default_profile(version).variants.values()) == variants
    assert BALANCED_ALLOCATION in default_profile(version).weights


# --- NodeDeclaredFeatures -------------------------------------------------------------------------------
# default_plugins.go applyFeatureGates appends it where the NodeDeclaredFeatures gate is on
# (pkg/features/kube_features.go: absent in v1.34.4, alpha and off in v1.35.4, beta and on in
# v1.36.3, GA in v1.37.2), so it filters last. plugins/nodedeclaredfeatures: PreFilter infers the
# features the pod needs (k8s.io/component-helpers nodedeclaredfeatures, InferForScheduling: a
# RestartAllContainers restart rule, hostNetwork with hostUsers false, and from v0.37.2 a volume
# mount with bindMountOptions) and skips a pod that needs none; Filter rejects a node whose
# status.declaredFeatures lacks one: "node(s) didn't match Pod's required features".

DECLARES = Node(
    "declares",
    {},
    allocatable={"cpu": 4000, "memory": 8 * 2**30, "pods": 110},
    declared_features=frozenset({"UserNamespacesHostNetworkSupport", "VolumeBindMountOptions"}),
)
SILENT = Node("silent", {}, allocatable={"cpu": 4000, "memory": 8 * 2**30, "pods": 110})
FULL = Node("full", {}, allocatable={"cpu": 100, "memory": 8 * 2**30, "pods": 110})
FEATURE_NODES = [DECLARES, SILENT, FULL]
UNDECLARED = "node(s) didn't match Pod's required features"
HOST_USERNS = pod(
    hostNetwork=True, hostUsers=False, containers=[{"name": "c", "image": "a", "resources": {"requests": {"cpu": "1"}}}]
)
BIND_MOUNT = pod(
    containers=[
        {
            "name": "c",
            "image": "a",
            "resources": {"requests": {"cpu": "1"}},
            "volumeMounts": [{"name": "v", "mountPath": "/v", "bindMountOptions": {"propagation": "x"}}],
        }
    ]
)
ABSENT = [None, None, "Insufficient cpu"]
REJECTED = [None, UNDECLARED, "Insufficient cpu"]  # NodeResourcesFit rejects `full` first


@pytest.mark.parametrize(
    "spec, version, reasons",
    [
        (HOST_USERNS, V134, ABSENT),
        (HOST_USERNS, V135, ABSENT),
        (HOST_USERNS, V136, REJECTED),
        (HOST_USERNS, V137, REJECTED),
        (BIND_MOUNT, V134, ABSENT),
        (BIND_MOUNT, V135, ABSENT),
        (BIND_MOUNT, V136, ABSENT),  # not in 1.36's registry
        (BIND_MOUNT, V137, REJECTED),
    ],
)
def test_nodes_that_do_not_declare_a_needed_feature_are_filtered_from_136(spec, version, reasons) -> None:
    ranking = rank(pod_info(spec), FEATURE_NODES, profile=default_profile(version))
    assert [n.reason for n in ranking.nodes] == reasons


@pytest.mark.parametrize(
    "spec, needed",
    [
        ({}, set()),
        ({"hostNetwork": True}, set()),
        ({"hostNetwork": True, "hostUsers": True}, set()),
        ({"hostNetwork": True, "hostUsers": False}, {"UserNamespacesHostNetworkSupport"}),
        ({"hostUsers": False}, set()),
        (
            {"initContainers": [{"name": "i", "restartPolicyRules": [{"action": "RestartAllContainers"}]}]},
            {"RestartAllContainersOnContainerExits"},
        ),
        ({"containers": [{"name": "c", "restartPolicyRules": [{"action": "Restart"}]}]}, set()),
        (
            {"ephemeralContainers": [{"name": "e", "volumeMounts": [{"name": "v", "bindMountOptions": {"a": 1}}]}]},
            {"VolumeBindMountOptions"},
        ),
        ({"containers": [{"name": "c", "volumeMounts": [{"name": "v", "bindMountOptions": {}}]}]}, set()),
    ],
)
def test_the_features_a_pod_needs_declared_are_inferred_from_its_spec(spec, needed) -> None:
    assert declared_features_needed(spec) == needed


def test_a_nodes_declared_features_are_read_from_its_status() -> None:
    obj = {"metadata": {"name": "n"}, "status": {"declaredFeatures": ["VolumeBindMountOptions", "Other"]}}
    assert node_info(obj).declared_features == {"VolumeBindMountOptions", "Other"}
