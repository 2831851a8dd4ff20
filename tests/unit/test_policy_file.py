"""Policy files: the shipped default equals the built-in one, and every mistake stops start-up
with a message naming the file, the rule, the field and the value."""

import pytest
import yaml

from tests.fixtures import CLASSIC_TERMS, NETQOS_TERMS, REPO
from webhook.policy_file import DEFAULT_DOCUMENT, PolicyError, compile_policy, default_policy, load_policy

SHIPPED = REPO / "deploy" / "base" / "policy.yaml"
CLASSIC = REPO / "deploy" / "examples" / "policies" / "classic.yaml"


def test_shipped_policy_file_is_the_built_in_default_document():
    assert yaml.safe_load(SHIPPED.read_text()) == DEFAULT_DOCUMENT
    assert load_policy(SHIPPED) == default_policy()


def test_the_default_rule_compiles_the_plugins_table_into_its_terms_and_the_classic_ones_beside_a_pods_own():
    [rule_] = default_policy().rules
    assert [t.to_api() for t in rule_.preferences] == NETQOS_TERMS
    assert [t.to_api() for t in rule_.beside_own or ()] == CLASSIC_TERMS
    [classic] = load_policy(CLASSIC).rules
    assert [t.to_api() for t in classic.preferences] == CLASSIC_TERMS and classic.table is None


def rule(**overrides):
    base = {
        "name": "fast",
        "podSelector": {"matchLabels": {"qos": "latency-sensitive"}},
        "preferences": [{"weight": 90, "matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]}],
    }
    base.update(overrides)
    return base


def term(weight=90, **expr):
    return {"weight": weight, "matchExpressions": [{"key": "net", "operator": "In", "values": ["high"], **expr}]}


# (case, the policy document, fragments its error must hold: the file, the rule, the field, the value).
# tests/process/test_helm_policy_errors.py renders each through the Helm chart too.
POLICY_ERRORS = [
    ("empty file", None, ["is empty"]),
    ("not a mapping", ["rules"], ["must be a mapping"]),
    ("no rules", {"kind": "NetQoSPolicy"}, ["rules: is required"]),
    ("empty rules", {"rules": []}, ["rules: must be a non-empty list"]),
    ("wrong apiVersion", {"apiVersion": "v1", "rules": [rule()]}, ["apiVersion", '(got "v1")']),
    ("misspelt top-level field", {"rule": [rule()]}, ["unknown field", "did you mean 'rules'"]),
    (
        "misspelt rule field",
        {"rules": [{**rule(), "podselector": {}}]},
        ['rules[0] "fast"', "podselector", "did you mean 'podSelector'"],
    ),
    ("missing name", {"rules": [{"podSelector": {}, "preferences": [term()]}]}, ["rules[0]", "name: is required"]),
    ("name not a DNS label", {"rules": [rule(name="Fast_Net")]}, ["rules[0]", "name", '(got "Fast_Net")']),
    ("duplicate names", {"rules": [rule(), rule()]}, ['rules[1] "fast"', "unique"]),
    (
        "weight above 100",
        {"rules": [rule(preferences=[term(150)])]},
        ['rules[0] "fast"', "preferences[0].weight", "150", "1 to 100"],
    ),
    ("weight zero", {"rules": [rule(preferences=[term(0)])]}, ["preferences[0].weight", "0"]),
    ("weight as a string", {"rules": [rule(preferences=[term("90")])]}, ["preferences[0].weight", '(got "90")']),
    ("weight as a boolean", {"rules": [rule(preferences=[term(True)])]}, ["preferences[0].weight", "(got true)"]),
    ("no preferences", {"rules": [rule(preferences=[])]}, ["preferences: must be a non-empty list"]),
    (
        "preference without expressions",
        {"rules": [rule(preferences=[{"weight": 5, "matchExpressions": []}])]},
        ["preferences[0].matchExpressions", "non-empty"],
    ),
    (
        "unknown node operator",
        {"rules": [rule(preferences=[term(operator="Like")])]},
        ["preferences[0].matchExpressions[0].operator", '(got "Like")', "Gt"],
    ),
    (
        "In without values",
        {"rules": [rule(preferences=[term(values=[])])]},
        ["matchExpressions[0].values", "must not be empty for operator In"],
    ),
    (
        "Exists with values",
        {"rules": [rule(preferences=[term(operator="Exists")])]},
        ["matchExpressions[0].values", "must be empty for operator Exists"],
    ),
    (
        "Gt with a word",
        {"rules": [rule(preferences=[term(operator="Gt", values=["fast"])])]},
        ["matchExpressions[0].values", "exactly one integer"],
    ),
    (
        "Gt with a non-ASCII digit (Go's strconv.ParseInt refuses it)",
        {"rules": [rule(preferences=[term(operator="Gt", values=["\u0663"])])]},
        ["matchExpressions[0].values", "exactly one integer", "strconv.ParseInt"],
    ),
    (
        "Gt beyond 64 bits",
        {"rules": [rule(preferences=[term(operator="Gt", values=["99999999999999999999999"])])]},
        ["matchExpressions[0].values", "exactly one integer", "99999999999999999999999"],
    ),
    (
        "Lt with a trailing newline",
        {"rules": [rule(preferences=[term(operator="Lt", values=["5\n"])])]},
        ["matchExpressions[0].values", "exactly one integer"],
    ),
    (
        "Gt with two values",
        {"rules": [rule(preferences=[term(operator="Gt", values=["1", "2"])])]},
        ["matchExpressions[0].values", "exactly one integer"],
    ),
    (
        "Gt with a number, not a string",
        {"rules": [rule(preferences=[term(operator="Gt", values=[5])])]},
        ["matchExpressions[0].values[0]", "must be a string"],
    ),
    (
        "value looks like a number in YAML",
        {"rules": [rule(preferences=[term(values=[10])])]},
        ["values[0]", "10", "quoted"],
    ),
    (
        "bad label key",
        {"rules": [rule(preferences=[term(key="net work")])]},
        ["matchExpressions[0].key", '(got "net work")'],
    ),
    (
        "Gt is not a label selector operator",
        {"rules": [rule(podSelector={"matchExpressions": [{"key": "qos", "operator": "Gt", "values": ["1"]}]})]},
        ["podSelector.matchExpressions[0].operator", '(got "Gt")'],
    ),
    (
        "podSelector value with a trailing newline (a YAML block scalar)",
        {"rules": [rule(podSelector={"matchLabels": {"qos": "latency-sensitive\n"}})]},
        ["podSelector.matchLabels['qos']", "must be a label value", '(got "latency-sensitive\\n")'],
    ),
    (
        "podSelector key with a trailing newline",
        {"rules": [rule(podSelector={"matchLabels": {"qos\n": "latency-sensitive"}})]},
        ["podSelector.matchLabels", "must be a label key", '(got "qos\\n")'],
    ),
    (
        "podSelector expression value with a trailing newline",
        {"rules": [rule(podSelector={"matchExpressions": [{"key": "qos", "operator": "In", "values": ["a\n"]}]})]},
        ["podSelector.matchExpressions[0].values[0]", '(got "a\\n")'],
    ),
    (
        "rule name with a trailing newline",
        {"rules": [rule(name="fast\n")]},
        ["rules[0]", "name", '(got "fast\\n")'],
    ),
    (
        "match key with a trailing newline",
        {"rules": [rule(preferences=[term(key="net\n")])]},
        ["matchExpressions[0].key", '(got "net\\n")'],
    ),
    (
        "match value with a trailing newline",
        {"rules": [rule(preferences=[term(values=["high\n"])])]},
        ["matchExpressions[0].values[0]", '(got "high\\n")'],
    ),
    (
        "label key with an empty prefix",
        {"rules": [rule(preferences=[term(key="/net")])]},
        ["matchExpressions[0].key", "prefix part must be non-empty", '(got "/net")'],
    ),
    (
        "podSelector key with an empty prefix",
        {"rules": [rule(podSelector={"matchLabels": {"/qos": "latency-sensitive"}})]},
        ["podSelector.matchLabels", "prefix part must be non-empty"],
    ),
    (
        "label value of 64 bytes",
        {"rules": [rule(preferences=[term(values=["a" * 64])])]},
        ["matchExpressions[0].values[0]", "must be no more than 63 bytes"],
    ),
    (
        "label value of non-ASCII digits",
        {"rules": [rule(preferences=[term(values=["\u0663"])])]},
        ["matchExpressions[0].values[0]", "must be a label value"],
    ),
    (
        "Exists with a key ending in a dot",
        {"rules": [rule(preferences=[term(key="net.", operator="Exists", values=None)])]},
        ["matchExpressions[0].key", "must be a label key"],
    ),
    (
        "matchLabels value not a string",
        {"rules": [rule(podSelector={"matchLabels": {"qos": True}})]},
        ["podSelector.matchLabels['qos']", "(got true)"],
    ),
]


@pytest.mark.parametrize("case, document, fragments", POLICY_ERRORS, ids=[c[0] for c in POLICY_ERRORS])
def test_an_invalid_policy_names_the_file_rule_field_and_value(case, document, fragments):
    with pytest.raises(PolicyError) as err:
        compile_policy(document, "cm/policy.yaml")
    message = str(err.value)
    assert message.startswith("policy file cm/policy.yaml: "), case
    for fragment in fragments:
        assert fragment in message, f"{case}: {fragment!r} not in {message!r}"


@pytest.mark.parametrize(
    "case, content, fragment",
    [
        ("missing file", None, "cannot read it"),
        ("not YAML", "rules: [\n", "not valid YAML"),
        ("not UTF-8", b"\xff\xfe\x00r", "not UTF-8"),
    ],
)
def test_an_unreadable_policy_file_is_reported_with_its_path(case, content, fragment, tmp_path):
    path = tmp_path / "policy.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(PolicyError) as err:
        load_policy(path)
    assert str(path) in str(err.value) and fragment in str(err.value), case


def test_a_valid_policy_with_every_operator_compiles():
    doc = {
        "rules": [
            rule(
                podSelector={
                    "matchLabels": {"qos": "latency-sensitive"},
                    "matchExpressions": [
                        {"key": "tier", "operator": "NotIn", "values": ["batch"]},
                        {"key": "app", "operator": "Exists"},
                        {"key": "legacy", "operator": "DoesNotExist"},
                        {"key": "env", "operator": "In", "values": ["prod"]},
                    ],
                },
                preferences=[
                    term(),
                    term(10, operator="NotIn", values=["low"]),
                    term(5, key="rdma", operator="Exists", values=None),
                    term(5, key="slow", operator="DoesNotExist", values=None),
                    term(3, key="gbps", operator="Gt", values=["9"]),
                    term(3, key="hops", operator="Lt", values=["10"]),
                ],
            )
        ]
    }
    policy = compile_policy(doc, "x.yaml")
    assert [t.weight for t in policy.rules[0].preferences] == [90, 10, 5, 5, 3, 3]


@pytest.mark.parametrize("operator, value", [("Gt", "0"), ("Lt", "9223372036854775807"), ("Gt", "007")])
def test_gt_and_lt_accept_every_integer_the_schedulers_requirement_accepts(operator, value):
    policy = compile_policy({"rules": [rule(preferences=[term(operator=operator, values=[value])])]}, "x.yaml")
    assert policy.rules[0].preferences[0].term.expressions[0].values == (value,)


@pytest.mark.parametrize("operator, value", [("Gt", "+5"), ("Lt", "-1"), ("Lt", "-9223372036854775808")])
def test_a_signed_gt_or_lt_value_is_refused_because_it_is_not_a_label_value(operator, value):
    # strconv.ParseInt reads these, but labels.NewRequirement also validates every value as a
    # label value, and a label value starts with a letter or digit: the scheduler would refuse
    # the term (and fail PreScore for every pod carrying it).
    with pytest.raises(PolicyError) as err:
        compile_policy({"rules": [rule(preferences=[term(operator=operator, values=[value])])]}, "x.yaml")
    assert "without a sign" in str(err.value) and f'(got ["{value}"])' in str(err.value)


def test_a_loaded_gt_term_matches_the_nodes_go_would_match():
    policy = compile_policy({"rules": [rule(preferences=[term(key="gen", operator="Gt", values=["5"])])]}, "x.yaml")
    preference = policy.rules[0].preferences[0]
    assert [preference.matches({"gen": g}) for g in ("6", "5", "+6", "\u0666")] == [True, False, True, False]


def scored(**overrides):
    table = {
        "key": "net",
        "scores": [{"value": "high", "score": 100}, {"value": "low", "score": 0}],
        "unlistedScore": 10,
    }
    table.update(overrides)
    return {"name": "fast", "podSelector": {"matchLabels": {"qos": "latency-sensitive"}}, "nodeScore": table}


def test_scheduler_weights_in_the_policy_change_the_compiled_terms():
    policy = compile_policy({"schedulerWeights": {"nodeAffinity": 5}, "rules": [scored()]}, "x.yaml")
    assert (policy.weights.node_affinity, policy.weights.netqos) == (5, 1)
    assert [t.weight for t in policy.rules[0].preferences] == [18, 2, 80, 80]
    same = compile_policy({"schedulerWeights": {"nodeAffinity": 1, "netqos": 1}, "rules": [scored()]}, "x.yaml")
    assert [t.to_api() for t in same.rules[0].preferences] == CLASSIC_TERMS
    assert same.rules[0].beside_own is None


SCORE_TABLE_ERRORS = [
    ("score above 100", {"rules": [scored(unlistedScore=101)]}, ["nodeScore.unlistedScore", "101", "0 to 100"]),
    (
        "negative score",
        {"rules": [scored(scores=[{"value": "high", "score": -1}])]},
        ["nodeScore.scores[0].score", "-1", "0 to 100"],
    ),
    ("score as a string", {"rules": [scored(unlistedScore="10")]}, ["nodeScore.unlistedScore", '"10"']),
    ("invalid label key", {"rules": [scored(key="net work")]}, ['rules[0] "fast"', "nodeScore.key", '"net work"']),
    (
        "invalid label value",
        {"rules": [scored(scores=[{"value": "fast net", "score": 5}])]},
        ["nodeScore.scores[0].value"],
    ),
    (
        "duplicate values",
        {"rules": [scored(scores=[{"value": "high", "score": 100}, {"value": "high", "score": 0}])]},
        ["nodeScore.scores[1].value", '"high"', "listed already at nodeScore.scores[0]"],
    ),
    ("no scores", {"rules": [scored(scores=[])]}, ["nodeScore.scores", "non-empty"]),
    ("misspelt table field", {"rules": [scored(unlisted=10)]}, ["nodeScore.unlisted", "did you mean 'unlistedScore'"]),
    (
        "both nodeScore and preferences",
        {"rules": [{**scored(), "preferences": [term()]}]},
        ["nodeScore", "exactly one"],
    ),
    (
        "neither nodeScore nor preferences",
        {"rules": [{"name": "fast", "podSelector": {}}]},
        ["nodeScore", "exactly one"],
    ),
    (
        "an inexact score at the weights",
        {"rules": [scored(unlistedScore=15)]},
        ["nodeScore.unlistedScore", "15", "steps of its weight 2", "14 or 16"],
    ),
    (
        "weights NodeAffinity cannot carry",
        {"schedulerWeights": {"nodeAffinity": 1, "netqos": 2}, "rules": [scored()]},
        ['rules[0] "fast"', "schedulerWeights.nodeAffinity: ", "at least 2"],
    ),
    (
        "weight zero",
        {"schedulerWeights": {"nodeAffinity": 0}, "rules": [scored()]},
        ["schedulerWeights.nodeAffinity", "0"],
    ),
    ("weight unknown", {"schedulerWeights": {"NodeAffinity": 2}, "rules": [scored()]}, ["did you mean 'nodeAffinity'"]),
    ("weights not a mapping", {"schedulerWeights": 2, "rules": [scored()]}, ["schedulerWeights", "mapping"]),
]


@pytest.mark.parametrize("case, document, fragments", SCORE_TABLE_ERRORS, ids=[c[0] for c in SCORE_TABLE_ERRORS])
def test_an_invalid_score_table_or_weight_is_one_error_naming_the_field(case, document, fragments):
    with pytest.raises(PolicyError) as err:
        compile_policy(document, "cm/policy.yaml")
    message = str(err.value)
    assert message.startswith("policy file cm/policy.yaml: ") and "\n" not in message, case
    for fragment in fragments:
        assert fragment in message, f"{case}: {fragment!r} not in {message!r}"


def test_no_file_means_the_built_in_default():
    assert load_policy(None) == default_policy()
