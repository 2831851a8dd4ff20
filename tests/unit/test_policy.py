"""Mutation semantics of the policy, without sockets: plain pods in, plain pods out."""

import copy

import pytest

from harness.pods import pod
from tests.fixtures import NETQOS_TERMS, with_netqos
from webhook.affinity import PREFERRED
from webhook.policy import Decision, evaluate
from webhook.policy_file import compile_policy, default_policy

LS = {"qos": "latency-sensitive"}
OTHER_PREFERRED = {
    "weight": 30,
    "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
}
REQUIRED_ARCH = {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]
}
POD_ANTI = {
    "requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
    ]
}


@pytest.mark.parametrize(
    "case, labels, annotations, decision",
    [
        ("latency-sensitive pod is mutated", LS, None, Decision.MUTATED),
        ("latency-sensitive among other labels", {"app": "a", **LS}, {"x": "y"}, Decision.MUTATED),
        ("no labels at all", None, None, Decision.NOT_SELECTED),
        ("another qos value", {"qos": "batch"}, None, Decision.NOT_SELECTED),
        ("label key differs in case", {"QoS": "latency-sensitive"}, None, Decision.NOT_SELECTED),
        ("opt-out annotation", LS, {"netqos.io/inject": "false"}, Decision.SKIPPED_OPT_OUT),
        ("opt-in annotation is no opt-out", LS, {"netqos.io/inject": "true"}, Decision.MUTATED),
    ],
)
def test_only_selected_pods_that_did_not_opt_out_are_mutated(case, labels, annotations, decision):
    before = pod(labels, annotations)
    snapshot = copy.deepcopy(before)
    outcome = evaluate(default_policy(), before)
    assert outcome.decision is decision, case
    assert before == snapshot, "the input pod must never be modified in place"
    if decision is Decision.MUTATED:
        assert outcome.pod == with_netqos(before)
        assert outcome.injected == ("netqos",)
    else:
        assert outcome.pod is before and outcome.injected == ()


@pytest.mark.parametrize(
    "case, affinity",
    [
        ("no affinity", None),
        ("empty affinity", {}),
        ("empty nodeAffinity", {"nodeAffinity": {}}),
        ("empty preferred list", {"nodeAffinity": {PREFERRED: []}}),
        ("own preferred term on another key", {"nodeAffinity": {PREFERRED: [OTHER_PREFERRED]}}),
        (
            "required term on another key",
            {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": REQUIRED_ARCH}},
        ),
        ("pod anti-affinity only", {"podAntiAffinity": POD_ANTI}),
        (
            "everything at once",
            {
                "podAntiAffinity": POD_ANTI,
                "podAffinity": POD_ANTI,
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": REQUIRED_ARCH,
                    PREFERRED: [OTHER_PREFERRED],
                },
            },
        ),
    ],
)
def test_terms_are_appended_after_the_pods_own_and_everything_else_is_kept(case, affinity):
    before = pod(LS, affinity=affinity)
    after = evaluate(default_policy(), before).pod
    assert after == with_netqos(before), case
    own = ((affinity or {}).get("nodeAffinity") or {}).get(PREFERRED, [])
    assert after["spec"]["affinity"]["nodeAffinity"][PREFERRED][: len(own)] == own


@pytest.mark.parametrize(
    "case, affinity, key",
    [
        (
            "own preferred term on net",
            {
                "nodeAffinity": {
                    PREFERRED: [
                        {"weight": 5, "preference": {"matchExpressions": [{"key": "net", "operator": "Exists"}]}}
                    ]
                }
            },
            "net",
        ),
        (
            "own required term on net",
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "net", "operator": "In", "values": ["low"]}]}
                        ]
                    }
                }
            },
            "net",
        ),
        (
            "only one of our terms, with another weight",
            {
                "nodeAffinity": {
                    PREFERRED: [
                        {
                            "weight": 50,
                            "preference": {"matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]},
                        }
                    ]
                }
            },
            "net",
        ),
        (
            "our exact expressions, narrowed by matchFields",
            {
                "nodeAffinity": {
                    PREFERRED: [
                        {
                            **NETQOS_TERMS[0],
                            "preference": {
                                **NETQOS_TERMS[0]["preference"],
                                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
                            },
                        }
                    ]
                }
            },
            "net",
        ),
        (
            "net in a second requirement of a term",
            {
                "nodeAffinity": {
                    PREFERRED: [
                        {
                            "weight": 5,
                            "preference": {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "Exists"},
                                    {"key": "net", "operator": "DoesNotExist"},
                                ]
                            },
                        }
                    ]
                }
            },
            "net",
        ),
    ],
)
def test_explicit_node_affinity_on_a_rule_key_wins_with_a_warning(case, affinity, key):
    before = pod(LS, affinity=affinity)
    outcome = evaluate(default_policy(), before)
    assert outcome.decision is Decision.SKIPPED_EXPLICIT, case
    assert outcome.pod is before
    [warning] = outcome.warnings
    assert '"netqos"' in warning and repr(key) in warning
    assert len(warning) <= 120  # kubectl prints warnings on one line; the API server truncates long ones


@pytest.mark.parametrize(
    "case, preferred, added",
    [
        ("every term present: nothing to do", NETQOS_TERMS, []),
        ("every term present, reordered", NETQOS_TERMS[::-1], []),
        (
            "the earlier default's two terms, values and expressions reordered: counts as applied",
            [
                {
                    "weight": 10,
                    "preference": {"matchExpressions": [{"key": "net", "operator": "NotIn", "values": ["low", "low"]}]},
                },
                NETQOS_TERMS[0],
            ],
            [],
        ),
        ("one of our terms present: the others are added", [NETQOS_TERMS[0]], NETQOS_TERMS[1:]),
        ("the constant only: the table's terms are added", NETQOS_TERMS[2:], NETQOS_TERMS[:2]),
    ],
)
def test_terms_already_carried_are_not_added_again(case, preferred, added):
    before = pod(LS, affinity={"nodeAffinity": {PREFERRED: preferred}})
    outcome = evaluate(default_policy(), before)
    if not added:
        assert outcome.decision is Decision.UNCHANGED and outcome.pod is before, case
    else:
        assert outcome.pod["spec"]["affinity"]["nodeAffinity"][PREFERRED] == preferred + added


def test_evaluating_the_result_again_changes_nothing():
    once = evaluate(default_policy(), pod(LS, affinity={"nodeAffinity": {PREFERRED: [OTHER_PREFERRED]}})).pod
    again = evaluate(default_policy(), once)
    assert again.decision is Decision.UNCHANGED and again.pod is once


TWO_RULES = {
    "rules": [
        {
            "name": "netqos",
            "podSelector": {"matchLabels": LS},
            "preferences": [
                {"weight": 90, "matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]},
                {"weight": 10, "matchExpressions": [{"key": "net", "operator": "NotIn", "values": ["low"]}]},
            ],
        },
        {
            "name": "gpu-net",
            "podSelector": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
            "preferences": [
                {"weight": 90, "matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]},
                {"weight": 40, "matchExpressions": [{"key": "rdma", "operator": "Exists"}]},
            ],
        },
    ]
}


@pytest.mark.parametrize(
    "case, labels, annotations, injected, weights",
    [
        ("first rule only", LS, None, "netqos", [90, 10]),
        ("second rule only", {"gpu": "a100"}, None, "gpu-net", [90, 40]),
        ("both rules: shared term once", {**LS, "gpu": "a100"}, None, "netqos,gpu-net", [90, 10, 40]),
        (
            "second rule on a re-invocation keeps the first's name",
            {**LS, "gpu": "a100"},
            {"netqos.io/injected": "netqos"},
            "netqos,gpu-net",
            [90, 10, 40],
        ),
    ],
)
def test_a_pod_matching_several_rules_gets_all_their_terms_once(case, labels, annotations, injected, weights):
    policy = compile_policy(TWO_RULES, "two-rules.yaml")
    before = pod(labels, annotations)
    if annotations:  # the first rule's terms are already there, as after the first invocation
        first_rule_only = compile_policy({"rules": TWO_RULES["rules"][:1]}, "one-rule.yaml")
        before = evaluate(first_rule_only, pod(LS)).pod
        before["metadata"]["labels"] = labels
    after = evaluate(policy, before).pod
    assert after["metadata"]["annotations"]["netqos.io/injected"] == injected, case
    assert [t["weight"] for t in after["spec"]["affinity"]["nodeAffinity"][PREFERRED]] == weights


@pytest.mark.parametrize(
    "case, obj, path",
    [
        ("not an object", ["a"], "object"),
        ("metadata is a string", {"metadata": "x"}, "metadata"),
        ("labels are a list", {"metadata": {"labels": ["qos"]}}, "metadata.labels"),
        ("a label value is a number", {"metadata": {"labels": {"qos": 1}}}, "metadata.labels['qos']"),
        ("annotations are a string", {"metadata": {"labels": LS, "annotations": "x"}}, "metadata.annotations"),
        ("affinity is a string", {"metadata": {"labels": LS}, "spec": {"affinity": "fast"}}, "spec.affinity"),
        (
            "preferred is an object",
            {"metadata": {"labels": LS}, "spec": {"affinity": {"nodeAffinity": {PREFERRED: {}}}}},
            f"spec.affinity.nodeAffinity.{PREFERRED}",
        ),
        (
            "weight is a string",
            {
                "metadata": {"labels": LS},
                "spec": {"affinity": {"nodeAffinity": {PREFERRED: [{"weight": "9", "preference": {}}]}}},
            },
            f"spec.affinity.nodeAffinity.{PREFERRED}[0].weight",
        ),
    ],
)
def test_objects_not_shaped_like_pods_are_left_alone_with_a_warning(case, obj, path):
    outcome = evaluate(default_policy(), obj)
    assert outcome.decision is Decision.INVALID and outcome.pod is obj, case
    [warning] = outcome.warnings
    assert path in warning


@pytest.mark.parametrize(
    "case, annotations, key_in_result",
    [
        ("no annotations: the map is created", None, "netqos.io/injected"),
        ("existing annotations are kept", {"a/b~c": "1", "team": "x"}, "netqos.io/injected"),
        ("null annotations: the map is created", "null", "netqos.io/injected"),
    ],
)
def test_the_pod_is_annotated_with_the_rules_applied(case, annotations, key_in_result):
    before = pod(LS, None if annotations == "null" else annotations)
    if annotations == "null":
        before["metadata"]["annotations"] = None
    after = evaluate(default_policy(), before).pod
    expected = {**(annotations if isinstance(annotations, dict) else {}), key_in_result: "netqos"}
    assert after["metadata"]["annotations"] == expected, case


def _zone(weight, *zones, key="topology.kubernetes.io/zone", op="In"):
    expression = {"key": key, "operator": op, **({"values": list(zones)} if zones else {})}
    return {"weight": weight, "preference": {"matchExpressions": [expression]}}


def _net(weight, op, *values):
    return _zone(weight, *values, key="net", op=op)


@pytest.mark.parametrize(
    "case, own, added",
    [
        (
            "one zone at 30: 90 x 30 / 200 and 10 x 30 / 200, half up",
            [_zone(30, "a")],
            [_net(14, "In", "high"), _net(2, "NotIn", "low")],
        ),
        (
            "zones at 80 and 20: one node matches one zone, at most 80",
            [_zone(80, "a"), _zone(20, "b")],
            [_net(36, "In", "high"), _net(4, "NotIn", "low")],
        ),
        (
            "a zone and a zone it excludes: 100 and 60 on other keys add up",
            [_zone(100, "a"), _zone(60, key="disk", op="Exists"), _zone(50, "a", op="NotIn")],
            [_net(72, "In", "high"), _net(8, "NotIn", "low")],
        ),
        ("weight 3: the lower step rounds to 0 and is left out", [_zone(3, "a")], [_net(1, "In", "high")]),
        ("weight 1: the table still goes in", [_zone(1, "a")], [_net(1, "In", "high")]),
        (
            "five terms of 100 on five keys: 225 split into distinct weights",
            [_zone(100, key=f"k{i}", op="Exists") for i in range(5)],
            [_net(100, "In", "high"), _net(99, "In", "high"), _net(26, "In", "high"), _net(25, "NotIn", "low")],
        ),
        (
            "a term on the node's name counts like any other",
            [
                {
                    "weight": 40,
                    "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                }
            ],
            [_net(18, "In", "high"), _net(2, "NotIn", "low")],
        ),
        (
            "an empty term beside a zone: only the zone counts",
            [{"weight": 50, "preference": {}}, _zone(20, "a")],
            [_net(9, "In", "high"), _net(1, "NotIn", "low")],
        ),
    ],
)
def test_beside_own_terms_the_table_is_scaled_to_the_most_one_node_gets_from_them(case, own, added):
    before = pod(LS, affinity={"nodeAffinity": {PREFERRED: copy.deepcopy(own)}})
    outcome = evaluate(default_policy(), before)
    assert outcome.decision is Decision.MUTATED, case
    assert outcome.pod["spec"]["affinity"]["nodeAffinity"][PREFERRED] == own + added, case
    again = evaluate(default_policy(), outcome.pod)
    assert again.decision is Decision.UNCHANGED and again.pod is outcome.pod, case


@pytest.mark.parametrize(
    "case, own",
    [
        ("preference {}", [{"weight": 10, "preference": {}}]),
        ("no preference at all", [{"weight": 10}]),
        ("matchExpressions []", [{"weight": 10, "preference": {"matchExpressions": []}}]),
        ("several empty terms", [{"weight": 10, "preference": {}}, {"weight": 7, "preference": {"matchFields": []}}]),
        ("weight 0, which the scheduler skips", [_zone(0, "a")]),
    ],
)
def test_own_terms_the_scheduler_ignores_leave_the_exact_form(case, own):
    before = pod(LS, affinity={"nodeAffinity": {PREFERRED: copy.deepcopy(own)}})
    outcome = evaluate(default_policy(), before)
    assert outcome.pod["spec"]["affinity"]["nodeAffinity"][PREFERRED] == own + NETQOS_TERMS, case


@pytest.mark.parametrize(
    "case, carried",
    [
        ("the fixed-scale form of earlier releases", [_net(90, "In", "high"), _net(10, "NotIn", "low")]),
        ("the exact form", NETQOS_TERMS),
    ],
)
def test_beside_own_terms_a_form_the_webhook_gave_before_counts_as_injected(case, carried):
    before = pod(LS, affinity={"nodeAffinity": {PREFERRED: [_zone(30, "a"), *copy.deepcopy(carried)]}})
    outcome = evaluate(default_policy(), before)
    assert outcome.decision is Decision.UNCHANGED and outcome.pod is before, case


@pytest.mark.parametrize(
    "case, term",
    [
        ("our requirement at a weight this pod would not get", _net(50, "In", "high")),
        ("the lower step at another weight", _net(3, "NotIn", "low")),
    ],
)
def test_a_table_requirement_at_a_weight_of_the_authors_own_is_explicit(case, term):
    before = pod(LS, affinity={"nodeAffinity": {PREFERRED: [_zone(30, "a"), term]}})
    outcome = evaluate(default_policy(), before)
    assert outcome.decision is Decision.SKIPPED_EXPLICIT and outcome.pod is before, case
    assert "already uses node label 'net'" in outcome.warnings[0]
