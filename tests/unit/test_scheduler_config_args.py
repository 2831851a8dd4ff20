"""KubeSchedulerConfiguration plugin arguments and plugin sets as kube-scheduler v1.36.3 applies
them: PodTopologySpread's defaultingType and defaultConstraints, InterPodAffinity's
hardPodAffinityWeight and ignorePreferredTermsOfExistingPods, NodeResourcesFit's ignoredResources
and ignoredResourceGroups, disabled Filter and PreFilter plugins, percentageOfNodesToScore; what is
not evaluated is named; a value kube-scheduler refuses is refused naming the field and the value."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.fixtures import cluster_view
from webhook import status
from webhook.commands.plan import SchedulerProfiles
from webhook.errors import UsageError
from webhook.explain import explain
from webhook.kubeversion import KubeVersion
from webhook.policy_file import default_policy
from webhook.scheduler.config import SchedulerConfigError, profile_for, profile_notes, profiles
from webhook.scheduler.cycle import rank
from webhook.scheduler.model import SpreadConstraint, usage_by_node
from webhook.scheduler.plugins.nodeaffinity import REASON_NOT_IN_PREFILTER
from webhook.scheduler.plugins.nodeports import REASON_NODE_PORTS
from webhook.scheduler.plugins.podtopologyspread import REASON_MISSING_LABEL
from webhook.scheduler.read import node_info, pod_info, selectors_from_api
from webhook.scheduler.registry import DEFAULT_PROFILE, for_version

SCHEDULER = "list-scheduler"


def config(*profiles: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": SCHEDULER, **p} for p in profiles],
        **top,
    }


def args_of(plugin: str, args: dict[str, Any], **profile: Any) -> dict[str, Any]:
    return config({"pluginConfig": [{"name": plugin, "args": args}], **profile})


def profile(doc: dict[str, Any]):
    return for_version(profile_for(doc, SCHEDULER), KubeVersion(1, 36))


def node(name: str, labels: dict[str, str] | None = None, **allocatable: str) -> Any:
    obj = {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110", **allocatable}},
    }
    return obj


def pod(name: str = "p", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": labels or {}},
        "spec": {"schedulerName": SCHEDULER, "containers": [{"name": "c", "image": "x"}], **spec},
    }


# ---------------------------------------------------------------------------------------------
# The default profile stays kube-scheduler's


def test_a_profile_that_says_nothing_is_the_default_profile():
    read = profile_for(config({}), SCHEDULER)
    assert dataclasses.replace(read, scheduler_name=DEFAULT_PROFILE.scheduler_name) == DEFAULT_PROFILE


# ---------------------------------------------------------------------------------------------
# PodTopologySpread: defaultingType, defaultConstraints

# Ten pods a Service selects on node-a; the pod, behind the same Service, prefers node-a (weights
# 10 and 5: NodeAffinity 100 there, 33 on node-b). The system defaults spread it to node-b (the
# hostname constraint); without default constraints nothing spreads it and node-a wins.
SPREAD_NODES = [node("node-a", {"pool": "a"}), node("node-b", {"pool": "b"})]
SERVICE = selectors_from_api([{"metadata": {"namespace": "ns", "name": "s"}, "spec": {"selector": {"app": "web"}}}])
PREFERS_A = [
    {"weight": 10, "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}},
    {"weight": 5, "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a", "b"]}]}},
]
SIBLINGS = [pod(f"s{i}", {"app": "web"}, nodeName="node-a") for i in range(10)]


def constraint(key: str, skew: int, when: str) -> dict[str, Any]:
    return {"topologyKey": key, "maxSkew": skew, "whenUnsatisfiable": when}


HOSTNAME, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"
SPREAD_CASES = [
    # (PodTopologySpreadArgs, Profile.spread_defaults, predicted node(s), node-b's reasons)
    ({}, None, ("node-b",), ()),
    ({"defaultingType": "System"}, None, ("node-b",), ()),
    ({"defaultingType": "List"}, (), ("node-a",), ()),
    ({"defaultingType": "List", "defaultConstraints": []}, (), ("node-a",), ()),
    (
        {"defaultingType": "List", "defaultConstraints": [constraint(HOSTNAME, 1, "ScheduleAnyway")]},
        (SpreadConstraint(1, HOSTNAME, "ScheduleAnyway", None),),
        ("node-b",),
        (),
    ),
    (  # DoNotSchedule: node-a has 10 of the Service's pods, node-b none
        {"defaultingType": "List", "defaultConstraints": [constraint(HOSTNAME, 1, "DoNotSchedule")]},
        (SpreadConstraint(1, HOSTNAME, "DoNotSchedule", None),),
        ("node-b",),
        (),
    ),
    (  # a List's constraints need their key on a node, as the pod's own do: no node has a zone
        {"defaultingType": "List", "defaultConstraints": [constraint(ZONE, 1, "DoNotSchedule")]},
        (SpreadConstraint(1, ZONE, "DoNotSchedule", None),),
        (),
        (REASON_MISSING_LABEL,),
    ),
]


@pytest.mark.parametrize("args, defaults, predicted, b_reasons", SPREAD_CASES)
def test_pod_topology_spread_spreads_a_pod_by_the_profiles_default_constraints(args, defaults, predicted, b_reasons):
    read = profile(args_of("PodTopologySpread", args))
    assert read.spread_defaults == defaults
    me = pod_info(
        pod(
            "p",
            {"app": "web"},
            affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": PREFERS_A}},
        ),
        SERVICE,
    )
    ranking = rank(me, [node_info(n) for n in SPREAD_NODES], usage_by_node(pod_info(p) for p in SIBLINGS), read)
    assert ranking.predicted == predicted
    assert ranking.nodes[1].reasons == b_reasons


def test_a_lists_default_constraints_ignore_a_node_without_their_key_where_the_system_defaults_spread_it():
    """scoring.go: requireAllTopologies unless systemDefaulted. node-c has no zone label: under
    the system defaults it is still spread by hostname; under a List with a zone constraint it is
    ignored (PodTopologySpread scores it 0)."""
    nodes = [node_info(node("node-a", {ZONE: "z1"})), node_info(node("node-c"))]
    usage = usage_by_node(pod_info(p) for p in SIBLINGS)
    me = pod_info(pod("p", {"app": "web"}), SERVICE)
    listed = {"defaultingType": "List", "defaultConstraints": [constraint(ZONE, 5, "ScheduleAnyway")]}
    system = rank(me, nodes, usage, profile(args_of("PodTopologySpread", {})))
    with_list = rank(me, nodes, usage, profile(args_of("PodTopologySpread", listed)))
    assert [n.scores["PodTopologySpread"] for n in system.nodes] == [5, 100]
    assert [n.scores["PodTopologySpread"] for n in with_list.nodes] == [100, 0]


# ---------------------------------------------------------------------------------------------
# InterPodAffinity: hardPodAffinityWeight, ignorePreferredTermsOfExistingPods


def affinity_term(app: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME}


# On node-a a pod whose required affinity selects the incoming pod (app=web), on node-b one whose
# preferred affinity (weight 7) does.
EXISTING = [
    pod(
        "wants-web",
        {"app": "db"},
        nodeName="node-a",
        affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [affinity_term("web")]}},
    ),
    pod(
        "likes-web",
        {"app": "cache"},
        nodeName="node-b",
        affinity={
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 7, "podAffinityTerm": affinity_term("web")}
                ]
            }
        },
    ),
]
PREFERS_CACHE = {
    "podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 3, "podAffinityTerm": affinity_term("cache")}]
    }
}
POD_AFFINITY_CASES = [
    # (InterPodAffinityArgs, the incoming pod's affinity, node-a and node-b's normalised scores; None: skipped)
    ({}, None, (0, 100)),  # hard weight 1 on a, 7 on b
    ({"hardPodAffinityWeight": 10}, None, (100, 0)),  # 10 on a, 7 on b
    ({"hardPodAffinityWeight": 0}, None, (0, 100)),  # the required term counts nothing: 0 and 7
    ({"hardPodAffinityWeight": 0, "ignorePreferredTermsOfExistingPods": True}, None, None),
    ({"ignorePreferredTermsOfExistingPods": True}, None, None),  # PreScore skips the pod
    ({"ignorePreferredTermsOfExistingPods": True}, PREFERS_CACHE, (0, 100)),  # 1 on a, 7 + 3 on b
    ({"ignorePreferredTermsOfExistingPods": False}, None, (0, 100)),
]


@pytest.mark.parametrize("args, affinity, scores", POD_AFFINITY_CASES)
def test_inter_pod_affinity_weighs_existing_pods_terms_by_the_profiles_args(args, affinity, scores):
    read = profile(args_of("InterPodAffinity", args))
    extra = {"affinity": affinity} if affinity else {}
    me = pod_info(pod("p", {"app": "web"}, **extra))
    nodes = [node_info(node("node-a")), node_info(node("node-b"))]
    ranking = rank(me, nodes, usage_by_node(pod_info(p) for p in EXISTING), read)
    if scores is None:
        assert "InterPodAffinity" in ranking.skipped
    else:
        assert tuple(n.scores["InterPodAffinity"] for n in ranking.nodes) == scores


# ---------------------------------------------------------------------------------------------
# NodeResourcesFit: ignoredResources, ignoredResourceGroups

FIT_CASES = [
    # (NodeResourcesFitArgs, the resource the pod requests and no node has, whether the node fits)
    ({}, "example.com/gpu", False),
    ({"ignoredResources": ["example.com/gpu"]}, "example.com/gpu", True),
    ({"ignoredResources": ["example.com/fpga"]}, "example.com/gpu", False),
    ({"ignoredResourceGroups": ["example.com"]}, "example.com/gpu", True),
    ({"ignoredResourceGroups": ["example"]}, "example.com/gpu", False),
    # not extended resources: never ignored
    ({"ignoredResources": ["hugepages-2Mi"]}, "hugepages-2Mi", False),
    ({"ignoredResourceGroups": ["kubernetes.io"]}, "kubernetes.io/batch-cpu", False),
]


@pytest.mark.parametrize("args, resource, fits", FIT_CASES)
def test_node_resources_fit_does_not_check_the_extended_resources_its_args_ignore(args, resource, fits):
    read = profile(args_of("NodeResourcesFit", args))
    requests = {"cpu": "100m", resource: "1"}
    me = pod_info(
        pod(containers=[{"name": "c", "image": "x", "resources": {"requests": requests, "limits": {resource: "1"}}}])
    )
    ranking = rank(me, [node_info(node("node-a"))], None, read)
    assert ranking.nodes[0].reasons == (() if fits else (f"Insufficient {resource}",))


# ---------------------------------------------------------------------------------------------
# Disabled Filter and PreFilter plugins


def tainted(name: str) -> Any:
    obj = node(name)
    obj["spec"] = {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}
    return obj


PORT = {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}
ONLY_A = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]
        }
    }
}
FILTER_CASES = [
    # (plugins, the node, the pod's spec, pods on the node, the node's reasons)
    ({}, tainted("t"), {}, [], ("node(s) had untolerated taint {dedicated: x}",)),
    ({"filter": {"disabled": [{"name": "TaintToleration"}]}}, tainted("t"), {}, [], ()),
    ({"multiPoint": {"disabled": [{"name": "TaintToleration"}]}}, tainted("t"), {}, [], ()),
    ({"filter": {"disabled": [{"name": "*"}]}}, tainted("t"), {}, [], ()),
    (
        {"filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "TaintToleration"}]}},
        tainted("t"),
        {},
        [],
        ("node(s) had untolerated taint {dedicated: x}",),
    ),
    ({}, node("node-b"), PORT, [pod("other", nodeName="node-b", **PORT)], (REASON_NODE_PORTS,)),
    (
        {"filter": {"disabled": [{"name": "NodePorts"}]}},
        node("node-b"),
        PORT,
        [pod("other", nodeName="node-b", **PORT)],
        (),
    ),
    # NodeAffinity's PreFilter still narrows the nodes when only its Filter is disabled
    (
        {"filter": {"disabled": [{"name": "NodeAffinity"}]}},
        node("node-b"),
        {"affinity": ONLY_A},
        [],
        (REASON_NOT_IN_PREFILTER,),
    ),
    ({"multiPoint": {"disabled": [{"name": "NodeAffinity"}]}}, node("node-b"), {"affinity": ONLY_A}, [], ()),
    (
        {"preFilter": {"disabled": [{"name": "NodeAffinity"}]}},
        node("node-b"),
        {"affinity": ONLY_A},
        [],
        ("node(s) didn't match Pod's node affinity/selector",),
    ),
]


@pytest.mark.parametrize("plugins, on, spec, pods, reasons", FILTER_CASES)
def test_a_profile_runs_the_filter_plugins_it_does_not_disable(plugins, on, spec, pods, reasons):
    read = profile(config({"plugins": plugins}))
    me = pod_info(pod("p", **spec))
    ranking = rank(me, [node_info(on)], usage_by_node(pod_info(p) for p in pods), read)
    assert ranking.nodes[0].reasons == reasons


# ---------------------------------------------------------------------------------------------
# percentageOfNodesToScore: the profile's if set, else the configuration's

PERCENTAGE_CASES = [
    # (the configuration's, the profile's, the profile's percentage; 0 is the adaptive default)
    (None, None, 0),
    (50, None, 50),
    (None, 30, 30),
    (50, 10, 10),
    (50, 0, 0),  # a profile's 0 overrides the configuration's: adaptive
]


@pytest.mark.parametrize("top, own, expected", PERCENTAGE_CASES)
def test_percentage_of_nodes_to_score_is_the_profiles_else_the_configurations(top, own, expected):
    doc = config({} if own is None else {"percentageOfNodesToScore": own})
    if top is not None:
        doc["percentageOfNodesToScore"] = top
    assert profile_for(doc, SCHEDULER).percentage_of_nodes_to_score == expected
    assert profiles(doc)[SCHEDULER].percentage_of_nodes_to_score == expected


# ---------------------------------------------------------------------------------------------
# What is not evaluated is named

NAMED_CASES = [
    # (configuration, what Profile.settings_not_evaluated names)
    (
        args_of("VolumeBinding", {"bindTimeoutSeconds": 30}),
        ("profiles[0].pluginConfig[0].args (VolumeBinding)",),
    ),
    (
        args_of("NetworkOverhead", {"weightsName": "UserDefined"}),
        ("profiles[0].pluginConfig[0].args (NetworkOverhead)",),
    ),
    (
        config({"plugins": {"preScore": {"disabled": [{"name": "TaintToleration"}]}}}),
        ("profiles[0].plugins.preScore (disabled: TaintToleration): taken as the default profile's",),
    ),
    (
        config({"plugins": {"preFilter": {"disabled": [{"name": "NodePorts"}]}}}),
        (
            "profiles[0].plugins.preFilter: NodePorts's Filter runs without its PreFilter (kube-scheduler fails "
            "every node there)",
        ),
    ),
    (
        config({}, extenders=[{"urlPrefix": "http://127.0.0.1:1/", "filterVerb": "filter"}]),
        ("extenders (1: their filter, prioritize and bind calls; managedResources)",),
    ),
    (config({}), ()),
]


@pytest.mark.parametrize("doc, named", NAMED_CASES)
def test_what_the_configuration_says_and_is_not_evaluated_is_named(doc, named):
    assert profile_for(doc, SCHEDULER).settings_not_evaluated == named


def test_a_filter_plugin_the_table_does_not_know_is_listed_as_not_evaluated():
    read = profile_for(config({"plugins": {"filter": {"enabled": [{"name": "NetworkTopology"}]}}}), SCHEDULER)
    assert "NetworkTopology" in read.not_evaluated


def test_a_volume_plugin_the_profile_disables_everywhere_is_no_longer_listed():
    doc = config({"plugins": {"multiPoint": {"disabled": [{"name": "VolumeBinding"}]}}})
    assert "VolumeBinding" not in profile_for(doc, SCHEDULER).not_evaluated
    assert "VolumeBinding" in profile_for(config({}), SCHEDULER).not_evaluated


NAMED_NOTE = "list-scheduler's configuration, not evaluated: profiles[0].pluginConfig[0].args (VolumeBinding)"


def test_explain_names_what_is_not_evaluated_in_its_note_and_its_json_field():
    read = profile(args_of("VolumeBinding", {"bindTimeoutSeconds": 30}))
    report = explain(default_policy(), pod(), [node_info(node("node-a"))], profile=read)
    assert report.settings_not_evaluated == ("profiles[0].pluginConfig[0].args (VolumeBinding)",)
    assert any(NAMED_NOTE in note for note in report.notes), report.notes


def test_status_names_what_is_not_evaluated_among_what_it_does_not_know():
    read = profile(args_of("VolumeBinding", {"bindTimeoutSeconds": 30}))
    view = cluster_view(profiles={SCHEDULER: read, "default-scheduler": DEFAULT_PROFILE})
    assert status.analyse(view).unknown == [NAMED_NOTE]


def test_rebalance_names_what_is_not_evaluated_among_its_notes():
    from tests.unit.test_rebalance import make_plan

    read = profile(args_of("VolumeBinding", {"bindTimeoutSeconds": 30}))
    plan = make_plan([], [], profiles={"default-scheduler": DEFAULT_PROFILE, SCHEDULER: read})
    assert NAMED_NOTE in plan.notes
    assert profile_notes([DEFAULT_PROFILE]) == []


# ---------------------------------------------------------------------------------------------
# Values kube-scheduler refuses

PTS, IPA, FIT = "PodTopologySpread", "InterPodAffinity", "NodeResourcesFit"
ARGS = "profiles[0].pluginConfig[0].args"
REFUSED = [
    # (configuration, the message's start)
    (args_of(PTS, {"defaultingType": "Lists"}), f'{ARGS}.defaultingType must be System or List, got "Lists"'),
    (
        args_of(PTS, {"defaultConstraints": [constraint(HOSTNAME, 1, "ScheduleAnyway")]}),
        f'{ARGS}.defaultingType must be List when defaultConstraints are given, got "System"',
    ),
    (
        args_of(PTS, {"defaultingType": "List", "defaultConstraints": [constraint(HOSTNAME, 0, "ScheduleAnyway")]}),
        f"{ARGS}.defaultConstraints[0].maxSkew must be above 0, got 0",
    ),
    (
        args_of(PTS, {"defaultingType": "List", "defaultConstraints": [constraint("", 1, "ScheduleAnyway")]}),
        f"{ARGS}.defaultConstraints[0].topologyKey must be a label key",
    ),
    (
        args_of(PTS, {"defaultingType": "List", "defaultConstraints": [constraint(HOSTNAME, 1, "Never")]}),
        f'{ARGS}.defaultConstraints[0].whenUnsatisfiable must be DoNotSchedule or ScheduleAnyway, got "Never"',
    ),
    (
        args_of(
            PTS,
            {
                "defaultingType": "List",
                "defaultConstraints": [{**constraint(HOSTNAME, 1, "ScheduleAnyway"), "labelSelector": {}}],
            },
        ),
        f"{ARGS}.defaultConstraints[0].labelSelector must be absent",
    ),
    (
        args_of(
            PTS,
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    constraint(HOSTNAME, 1, "ScheduleAnyway"),
                    constraint(HOSTNAME, 2, "ScheduleAnyway"),
                ],
            },
        ),
        f'{ARGS}.defaultConstraints[1].topologyKey must be not repeated with ScheduleAnyway, got "{HOSTNAME}"',
    ),
    (args_of(PTS, {"defaultConstraint": []}), f"{ARGS}.defaultConstraint must be absent: PodTopologySpreadArgs"),
    (args_of(IPA, {"hardPodAffinityWeight": 101}), f"{ARGS}.hardPodAffinityWeight must be in the range 0-100, got 101"),
    (args_of(IPA, {"hardPodAffinityWeight": -1}), f"{ARGS}.hardPodAffinityWeight must be in the range 0-100, got -1"),
    (
        args_of(IPA, {"ignorePreferredTermsOfExistingPods": "yes"}),
        f"{ARGS}.ignorePreferredTermsOfExistingPods must be a boolean, got a string",
    ),
    (args_of(FIT, {"ignoredResources": ["bad name!"]}), f"{ARGS}.ignoredResources[0] must be a qualified name"),
    (
        args_of(FIT, {"ignoredResourceGroups": ["example.com/gpu"]}),
        f"{ARGS}.ignoredResourceGroups[0] must be a resource group, without '/', got \"example.com/gpu\"",
    ),
    (
        args_of(FIT, {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 101}]}}),
        f"{ARGS}.scoringStrategy.resources[0].weight must be in the range 1-100, got 101",
    ),
    (
        args_of(FIT, {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 1}]}}),
        f"{ARGS}.scoringStrategy.type is ''; use one of LeastAllocated, MostAllocated, RequestedToCapacityRatio",
    ),
    (
        args_of(
            FIT,
            {
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}]},
                }
            },
        ),
        f"{ARGS}.scoringStrategy.requestedToCapacityRatio must be absent for type MostAllocated",
    ),
    (
        args_of(
            FIT,
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 11}]},
                }
            },
        ),
        f"{ARGS}.scoringStrategy.requestedToCapacityRatio.shape[0].score must be in the range 0-10, got 11",
    ),
    (
        args_of("NodeResourcesBalancedAllocation", {"resources": [{"name": "cpu", "weight": 2}]}),
        f"{ARGS}.resources[0].weight must be 1, got 2",
    ),
    (
        config({"pluginConfig": [{"name": IPA, "args": {}}, {"name": IPA, "args": {}}]}),
        "profiles[0].pluginConfig[1].name must be unique (it is also profiles[0].pluginConfig[0].args), "
        'got "InterPodAffinity"',
    ),
    (
        config({"percentageOfNodesToScore": 101}),
        "profiles[0].percentageOfNodesToScore must be in the range 0-100, got 101",
    ),
    (config({}, percentageOfNodesToScore=-1), "percentageOfNodesToScore must be in the range 0-100, got -1"),
]


@pytest.mark.parametrize("doc, message", REFUSED)
def test_a_value_kube_scheduler_refuses_is_refused_naming_the_field_and_the_value(doc, message):
    with pytest.raises(SchedulerConfigError) as raised:
        profile_for(doc, SCHEDULER)
    assert str(raised.value).startswith(message), str(raised.value)
    assert "\n" not in str(raised.value)
    with pytest.raises(SchedulerConfigError):
        profiles(doc)


def test_the_commands_error_names_the_file_the_field_and_the_value(tmp_path):
    path = tmp_path / "scheduler.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
        "- schedulerName: list-scheduler\n  pluginConfig:\n  - name: PodTopologySpread\n"
        "    args: {defaultingType: Lists}\n"
    )
    with pytest.raises(UsageError) as raised:
        SchedulerProfiles.read([str(path)], UsageError)
    assert str(raised.value) == (
        f'scheduler configuration {path}: {ARGS}.defaultingType must be System or List, got "Lists"; fix the field'
    )
