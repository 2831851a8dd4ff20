"""KubeSchedulerConfiguration v1: the profile of the pod's schedulerName, its score plugins and
weights after kube-scheduler's merge rules, NodeResourcesFit's strategy, NodeAffinity's addedAffinity."""

from __future__ import annotations

import pytest

from webhook.scheduler.config import SchedulerConfigError, profile_for, profiles, unevaluated_scores
from webhook.scheduler.cycle import rank
from webhook.scheduler.model import Node, ScoringStrategy
from webhook.scheduler.plugins.nodeaffinity import REASON_ENFORCED_AFFINITY
from webhook.scheduler.read import pod_info
from webhook.scheduler.registry import DEFAULT_WEIGHTS


def config(*profiles: dict) -> dict:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": list(profiles),
    }


WEIGHTS = [
    # (plugins, the evaluated score weights)
    ({}, DEFAULT_WEIGHTS),
    (
        {"score": {"disabled": [{"name": "ImageLocality"}]}},
        {k: v for k, v in DEFAULT_WEIGHTS.items() if k != "ImageLocality"},
    ),
    ({"score": {"enabled": [{"name": "NodeAffinity", "weight": 5}]}}, {**DEFAULT_WEIGHTS, "NodeAffinity": 5}),
    ({"score": {"enabled": [{"name": "NodeAffinity"}]}}, {**DEFAULT_WEIGHTS, "NodeAffinity": 1}),  # no weight: 1
    (
        {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeResourcesFit", "weight": 2}]}},
        {"NodeResourcesFit": 2},
    ),
    (
        {"multiPoint": {"disabled": [{"name": "TaintToleration"}]}},
        {k: v for k, v in DEFAULT_WEIGHTS.items() if k != "TaintToleration"},
    ),
    ({"multiPoint": {"enabled": [{"name": "ImageLocality", "weight": 4}]}}, {**DEFAULT_WEIGHTS, "ImageLocality": 4}),
]


@pytest.mark.parametrize("plugins, weights", WEIGHTS)
def test_score_weights_follow_the_merge_rules(plugins, weights):
    assert dict(profile_for(config({"plugins": plugins}), "default-scheduler").weights) == weights


def test_the_profile_is_chosen_by_scheduler_name_and_unknown_plugins_are_listed_as_not_evaluated():
    doc = config(
        {"schedulerName": "default-scheduler"},
        {"schedulerName": "fast", "plugins": {"score": {"enabled": [{"name": "NetworkCost", "weight": 3}]}}},
    )
    profile = profile_for(doc, "fast")
    assert profile.scheduler_name == "fast" and "NetworkCost" in profile.not_evaluated
    assert "NetworkCost" not in profile.weights


def test_a_disabled_not_evaluated_plugin_is_no_longer_listed():
    doc = config({"plugins": {"score": {"disabled": [{"name": "PodTopologySpread"}]}}})
    assert "PodTopologySpread" not in profile_for(doc, "default-scheduler").not_evaluated


def test_scoring_strategy_and_shape_are_read():
    args = {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
            "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]},
        }
    }
    doc = config({"pluginConfig": [{"name": "NodeResourcesFit", "args": args}]})
    assert profile_for(doc, "default-scheduler").scoring_strategy == ScoringStrategy(
        "RequestedToCapacityRatio", (("cpu", 2), ("memory", 1)), ((0, 0), (100, 10))
    )


def test_added_affinity_filters_and_scores_every_pod_of_the_profile():
    args = {
        "addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {"matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]},
                }
            ],
        }
    }
    profile = profile_for(config({"pluginConfig": [{"name": "NodeAffinity", "args": args}]}), "default-scheduler")
    nodes = [Node("a", {"pool": "a"}), Node("h", {"pool": "a", "net": "high"}), Node("b", {"pool": "b"})]
    ranking = rank(pod_info({"metadata": {"name": "p"}, "spec": {}}), nodes, None, profile)
    assert [n.reasons for n in ranking.nodes] == [(), (), (REASON_ENFORCED_AFFINITY,)]
    assert [n.affinity_raw for n in ranking.nodes[:2]] == [0, 10] and ranking.predicted == ("h",)


@pytest.mark.parametrize(
    "doc, scheduler, message",
    [
        (
            {"kind": "Pod"},
            "default-scheduler",
            "give a KubeSchedulerConfiguration of apiVersion kubescheduler.config.k8s.io/v1",
        ),
        (config({"schedulerName": "x"}), "default-scheduler", "no profile has schedulerName 'default-scheduler'"),
        (
            config({"plugins": {"score": {"enabled": [{"name": 3}]}}}),
            "default-scheduler",
            "profiles[0].plugins.score.enabled[0].name must be a string",
        ),
        (
            config({"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Packed"}}}]}),
            "default-scheduler",
            "scoringStrategy.type is 'Packed'",
        ),
        (
            config(
                {
                    "pluginConfig": [
                        {
                            "name": "NodeResourcesFit",
                            "args": {
                                "scoringStrategy": {
                                    "type": "RequestedToCapacityRatio",
                                    "requestedToCapacityRatio": {
                                        "shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]
                                    },
                                }
                            },
                        }
                    ]
                }
            ),
            "default-scheduler",
            "utilization values must increase",
        ),
    ],
)
def test_an_unusable_configuration_names_the_field(doc, scheduler, message):
    with pytest.raises(SchedulerConfigError, match=message.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        profile_for(doc, scheduler)


PROFILES_CASES = [
    # (profiles, schedulerName -> (its evaluated weights beyond the default's, its unevaluated score plugins))
    ([], {"default-scheduler": ({}, ())}),  # no profiles: kube-scheduler runs one default profile
    (
        [{}, {"schedulerName": "netqos-scheduler", "plugins": {"multiPoint": {"enabled": [{"name": "NetQoS"}]}}}],
        {"default-scheduler": ({}, ()), "netqos-scheduler": ({"NetQoS": 1}, ())},
    ),
    (
        [{"schedulerName": "net", "plugins": {"score": {"enabled": [{"name": "NetQoS", "weight": 3}]}}}],
        {"net": ({"NetQoS": 3}, ())},
    ),
    (
        [{"schedulerName": "aware", "plugins": {"score": {"enabled": [{"name": "NetworkOverhead", "weight": 5}]}}}],
        {"aware": ({}, ("NetworkOverhead",))},
    ),
]


@pytest.mark.parametrize("raw, expected", PROFILES_CASES)
def test_every_profile_is_read_by_its_scheduler_name_and_the_netqos_plugin_is_evaluated(raw, expected):
    found = profiles(config(*raw) if raw else {k: v for k, v in config().items() if k != "profiles"})
    assert list(found) == list(expected)
    for name, (extra, unevaluated) in expected.items():
        assert dict(found[name].weights) == {**DEFAULT_WEIGHTS, **extra}
        assert unevaluated_scores(found[name]) == unevaluated


def test_two_profiles_of_one_scheduler_name_are_refused_naming_the_second():
    with pytest.raises(SchedulerConfigError, match=r"profiles\[1\].schedulerName 'a' is a duplicate"):
        profiles(config({"schedulerName": "a"}, {"schedulerName": "a"}))
