"""Policy files: the shipped default equals the built-in one, and every mistake stops start-up
with a message naming the file, the rule, the field and the value."""

import pytest

from tests.fixtures import REPO
from webhook.policy_file import PolicyError, compile_policy, default_policy, load_policy

SHIPPED = REPO / "deploy" / "base" / "policy.yaml"


def test_shipped_policy_file_is_identical_in_effect_to_the_built_in_default():
    assert load_policy(SHIPPED) == default_policy()


def test_no_file_means_the_built_in_default():
    assert load_policy(None) == default_policy()


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


@pytest.mark.parametrize(
    "case, document, fragments",
    [
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
    ],
)
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
