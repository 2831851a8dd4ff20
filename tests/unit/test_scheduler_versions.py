"""What each Kubernetes release's kube-scheduler computes differently, one table per behaviour and
a row per release, through `registry.default_profile(version)` (the profile explain, status and
rebalance use for a cluster of that version). Each expectation is worked out from that tag's
sources (k8s.io/kubernetes v1.34.4, v1.35.4, v1.36.3, v1.37.2), cited per table."""

from __future__ import annotations

import pytest

from harness.pods import pod
from webhook.kubeversion import KubeVersion
from webhook.scheduler.cycle import rank
from webhook.scheduler.model import Node, Taint, usage_by_node
from webhook.scheduler.plugins.nodeaffinity import REASON_NOT_IN_PREFILTER
from webhook.scheduler.plugins.nodename import REASON_NODE_NAME
from webhook.scheduler.plugins.nodeunschedulable import REASON_UNSCHEDULABLE
from webhook.scheduler.read import declared_features_needed, node_info, pod_info
from webhook.scheduler.registry import BALANCED_ALLOCATION, IMAGE_LOCALITY, default_profile, filter_plugins

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
    "InterPodAffinity (before 1.37)",
}


@pytest.mark.parametrize(
    "version, variants",
    [
        (V134, BEFORE_136),
        (V135, BEFORE_136),
        (
            V136,
            {
                "NodeName (before 1.37)",
                "ImageLocality (1.36)",
                "NodeDeclaredFeatures (1.36)",
                "InterPodAffinity (before 1.37)",
            },
        ),
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


# --- InterPodAffinity: the incoming pod's namespaceSelector -----------------------------------------
# plugins/interpodaffinity/plugin.go mergeAffinityTermNamespacesIfNotEmpty lists the namespaces a
# term of the incoming pod selects into its namespace set and sets the selector to Nothing. Up to
# v1.36.3 it takes the fwk.AffinityTerm by value: the set (a map) is filled, the selector is reset on
# the copy only, and every match of the term passes nil namespace labels (filtering.go
# getIncomingAffinityAntiAffinityCounts and podMatchesAllAffinityTerms, scoring.go
# processExistingPod): a selector that matches empty labels (NotIn, DoesNotExist) then selects
# the pods of every namespace. v1.37.2 takes the term by pointer: the listed namespaces alone.
# Other pods' terms are matched against the incoming pod's namespace's labels in every release.
#
# `db` (app=db) runs on node a in namespace payments (team=payments); the pod, in namespace web,
# has one term: app=db on the host, with the namespaceSelector of each row.

HOST = "kubernetes.io/hostname"
AFFINITY_NODES = [Node("a", {HOST: "a"}), Node("b", {HOST: "b"})]
NAMESPACES = {
    "payments": {"kubernetes.io/metadata.name": "payments", "team": "payments"},
    "web": {"kubernetes.io/metadata.name": "web"},
}
NO_POD_AFFINITY = "node(s) didn't match pod affinity rules"
NO_POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
PAYMENTS = {"matchLabels": {"team": "payments"}}
NOT_PAYMENTS = {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["payments"]}]}
NO_TEAM = {"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}
SOME_TEAM = {"matchExpressions": [{"key": "team", "operator": "Exists"}]}
UNMERGED = (V134, V135, V136)


def _term(app: str, namespaces: dict[str, object]) -> dict[str, object]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "namespaceSelector": namespaces, "topologyKey": HOST}


def _with(kind: str, field: str, term: dict[str, object], **fields: object) -> dict[str, object]:
    """A pod with one pod (anti-)affinity term: required, or preferred at weight 10."""
    entry = term if field.startswith("required") else {"weight": 10, "podAffinityTerm": term}
    spec = {"affinity": {kind: {field: [entry]}}}
    return pod(**{"namespace": "web", "labels": {"app": "web"}, **fields}, **spec)


REQUIRED_POD = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED_POD = "preferredDuringSchedulingIgnoredDuringExecution"
DB = pod({"app": "db"}, name="db", namespace="payments", nodeName="a")


def _ranked(incoming: dict[str, object], version: KubeVersion, *on_nodes: dict[str, object], namespaces=NAMESPACES):
    usage = usage_by_node(pod_info(p) for p in on_nodes)
    return rank(pod_info(incoming), AFFINITY_NODES, usage, default_profile(version), namespaces=namespaces)


@pytest.mark.parametrize("version", [V134, V135, V136, V137])
@pytest.mark.parametrize(
    "namespaces, reasons, reasons_137",
    [
        pytest.param(PAYMENTS, [None, NO_POD_AFFINITY], [None, NO_POD_AFFINITY], id="team=payments"),
        pytest.param(SOME_TEAM, [None, NO_POD_AFFINITY], [None, NO_POD_AFFINITY], id="team-exists"),
        # nil labels match NotIn and DoesNotExist: payments' db counts up to 1.36
        pytest.param(NOT_PAYMENTS, [None, NO_POD_AFFINITY], [NO_POD_AFFINITY] * 2, id="team-notin-payments"),
        pytest.param(NO_TEAM, [None, NO_POD_AFFINITY], [NO_POD_AFFINITY] * 2, id="team-doesnotexist"),
    ],
)
def test_the_incoming_pods_required_namespace_selector_filters_as_each_release_matches_it(
    version, namespaces, reasons, reasons_137
) -> None:
    incoming = _with("podAffinity", REQUIRED_POD, _term("db", namespaces))
    ranking = _ranked(incoming, version, DB)
    assert [n.reason for n in ranking.nodes] == (reasons if version in UNMERGED else reasons_137)


@pytest.mark.parametrize("version, reasons", [(V136, [NO_POD_ANTI_AFFINITY, None]), (V137, [None, None])])
def test_the_incoming_pods_required_anti_affinity_with_notin_repels_every_namespace_until_137(version, reasons) -> None:
    incoming = _with("podAntiAffinity", REQUIRED_POD, _term("db", NOT_PAYMENTS))
    assert [n.reason for n in _ranked(incoming, version, DB).nodes] == reasons


@pytest.mark.parametrize("version, scores", [(V135, [100, 0]), (V136, [100, 0]), (V137, [None, None])])
def test_the_incoming_pods_preferred_notin_namespace_selector_scores_every_namespace_until_137(version, scores) -> None:
    incoming = _with("podAffinity", PREFERRED_POD, _term("db", NOT_PAYMENTS))
    ranking = _ranked(incoming, version, DB)
    assert [n.scores.get("InterPodAffinity") for n in ranking.nodes] == scores  # 1.37: PreScore skips


@pytest.mark.parametrize("version, feasible", [(V134, True), (V136, True), (V137, False)])
def test_the_first_pod_of_a_group_matches_its_own_notin_selector_until_137(version, feasible) -> None:
    """podMatchesAllAffinityTerms of the pod itself, with no match anywhere: up to 1.36 nil labels
    let a pod whose own namespace the selector leaves out in as the first of its group."""
    first = _with("podAffinity", REQUIRED_POD, _term("db", NOT_PAYMENTS), namespace="payments", labels={"app": "db"})
    expected = [None, None] if feasible else [NO_POD_AFFINITY] * 2
    assert [n.reason for n in _ranked(first, version).nodes] == expected


@pytest.mark.parametrize("version", [V134, V137])
@pytest.mark.parametrize(
    "namespaces, reasons",
    [
        pytest.param(NAMESPACES, [EXISTING_ANTI_AFFINITY, None], id="labels-read"),
        pytest.param({}, [None, None], id="name-label-alone"),
    ],
)
def test_an_existing_pods_namespace_selector_matches_the_incoming_pods_namespace_labels(
    version, namespaces, reasons
) -> None:
    guard = _with("podAntiAffinity", REQUIRED_POD, _term("web", PAYMENTS), name="guard", nodeName="a")
    incoming = pod({"app": "web"}, namespace="payments")
    assert [n.reason for n in _ranked(incoming, version, guard, namespaces=namespaces).nodes] == reasons


@pytest.mark.parametrize("version", [V136, V137])
def test_a_labelled_namespace_is_selected_only_when_its_labels_are_known(version) -> None:
    """Without the Namespace objects, a namespace has its kubernetes.io/metadata.name label alone."""
    incoming = _with("podAffinity", REQUIRED_POD, _term("db", PAYMENTS))
    assert [n.reason for n in _ranked(incoming, version, DB, namespaces={}).nodes] == [NO_POD_AFFINITY] * 2
