"""Node-selector semantics shared by mutation and explain."""

import pytest

from webhook.affinity import (
    NodeSelectorTerm,
    PreferredTerm,
    Requirement,
    most_matched_weight,
    parse_int64,
    preferred_score,
)
from webhook.selector import LabelSelector


@pytest.mark.parametrize(
    "op, values, labels, match",
    [
        ("In", ("high",), {"net": "high"}, True),
        ("In", ("high",), {"net": "low"}, False),
        ("In", ("high",), {}, False),
        ("NotIn", ("low",), {"net": "low"}, False),
        ("NotIn", ("low",), {"net": "high"}, True),
        ("NotIn", ("low",), {}, True),  # a node without the key matches NotIn
        ("Exists", (), {"net": ""}, True),
        ("Exists", (), {}, False),
        ("DoesNotExist", (), {}, True),
        ("DoesNotExist", (), {"net": "x"}, False),
        ("Gt", ("5",), {"net": "6"}, True),
        ("Gt", ("5",), {"net": "5"}, False),
        ("Gt", ("5",), {"net": "high"}, False),  # not an integer: no match
        ("Gt", ("5",), {}, False),
        ("Lt", ("5",), {"net": "-3"}, True),
        ("Lt", ("5",), {"net": "5"}, False),
    ],
)
def test_node_selector_operators_follow_kubernetes(op, values, labels, match):
    assert Requirement("net", op, values).matches(labels) is match


@pytest.mark.parametrize(
    "net, score",
    [("high", 100), ("low", 0), (None, 10), ("medium", 10), ("", 10)],
)
def test_the_default_terms_score_the_netqos_table(net, score):
    terms = [
        PreferredTerm.of(90, Requirement("net", "In", ("high",))),
        PreferredTerm.of(10, Requirement("net", "NotIn", ("low",))),
    ]
    labels = {} if net is None else {"net": net}
    assert preferred_score(terms, labels) == score


def test_a_term_without_requirements_matches_nothing():
    assert PreferredTerm.of(50).matches({"any": "label"}) is False


@pytest.mark.parametrize(
    "a, b, equal",
    [
        ((90, [("net", "In", ("high",))]), (90, [("net", "In", ("high",))]), True),
        ((90, [("k", "In", ("a", "b"))]), (90, [("k", "In", ("b", "a", "a"))]), True),
        ((90, [("a", "Exists", ()), ("b", "Exists", ())]), (90, [("b", "Exists", ()), ("a", "Exists", ())]), True),
        ((90, [("net", "In", ("high",))]), (80, [("net", "In", ("high",))]), False),
        ((90, [("net", "In", ("high",))]), (90, [("net", "NotIn", ("high",))]), False),
    ],
)
def test_term_identity_ignores_order_but_not_meaning(a, b, equal):
    def make(weight, requirements):
        return PreferredTerm.of(weight, *(Requirement(*r) for r in requirements))

    assert (make(*a).identity == make(*b).identity) is equal


@pytest.mark.parametrize(
    "selector, labels, match",
    [
        (LabelSelector(), {}, True),  # the empty selector matches everything
        (LabelSelector((("qos", "latency-sensitive"),)), {"qos": "latency-sensitive", "x": "y"}, True),
        (LabelSelector((("qos", "latency-sensitive"),)), {"qos": "batch"}, False),
        (LabelSelector((), (Requirement("tier", "NotIn", ("batch",)),)), {}, True),
        (LabelSelector((), (Requirement("tier", "In", ("a", "b")),)), {"tier": "b"}, True),
        (LabelSelector((), (Requirement("gpu", "Exists"),)), {"gpu": ""}, True),
        (LabelSelector((), (Requirement("gpu", "DoesNotExist"),)), {"gpu": ""}, False),
        (LabelSelector((("a", "1"),), (Requirement("b", "Exists"),)), {"a": "1"}, False),  # ANDed
    ],
)
def test_label_selectors_follow_kubernetes(selector, labels, match):
    assert selector.matches(labels) is match


# Go's strconv.ParseInt(s, 10, 64) is the reference: an optional sign, ASCII digits, within int64.
PARSE_INT64 = [
    ("5", 5),
    ("+5", 5),
    ("-5", -5),
    ("007", 7),
    ("9223372036854775807", 2**63 - 1),
    ("-9223372036854775808", -(2**63)),
    ("9223372036854775808", None),  # out of range
    ("99999999999999999999999", None),
    ("\u0663", None),  # ARABIC-INDIC DIGIT THREE: Python's int() reads 3, Go does not
    (" 5", None),
    ("5\n", None),
    ("1_0", None),
    ("", None),
    ("+", None),
    ("0x10", None),
]


@pytest.mark.parametrize("text, value", PARSE_INT64)
def test_integers_parse_as_gos_strconv_parseint_does(text, value):
    assert parse_int64(text) == value


def test_a_term_with_match_fields_never_has_the_identity_of_one_without():
    from webhook.affinity import NodeSelectorTerm

    net = Requirement("net", "In", ("high",))
    plain = PreferredTerm.of(90, net)
    with_fields = PreferredTerm(90, NodeSelectorTerm((net,), (Requirement("metadata.name", "In", ("n1",)),)))
    assert plain.identity != with_fields.identity


def _t(weight, *expressions, fields=()):
    return PreferredTerm(
        weight, NodeSelectorTerm(tuple(Requirement(*e) for e in expressions), tuple(Requirement(*f) for f in fields))
    )


@pytest.mark.parametrize(
    "case, terms, expected",
    [
        ("nothing", [], 0),
        ("one term", [_t(30, ("zone", "In", ("a",)))], 30),
        ("two zones: one node has one zone", [_t(80, ("zone", "In", ("a",))), _t(20, ("zone", "In", ("b",)))], 80),
        ("two zones, one listing both", [_t(80, ("zone", "In", ("a",))), _t(20, ("zone", "In", ("a", "b")))], 100),
        ("In and its NotIn", [_t(50, ("zone", "In", ("a",))), _t(40, ("zone", "NotIn", ("a",)))], 50),
        ("Exists and DoesNotExist", [_t(5, ("gpu", "Exists")), _t(7, ("gpu", "DoesNotExist"))], 7),
        ("NotIn and DoesNotExist together", [_t(5, ("gpu", "NotIn", ("x",))), _t(7, ("gpu", "DoesNotExist"))], 12),
        ("Gt 4 and Lt 5: no integer between", [_t(5, ("cpu", "Gt", ("4",))), _t(7, ("cpu", "Lt", ("5",)))], 7),
        (
            "Gt 4 and Lt 6 but NotIn 5",
            [_t(5, ("cpu", "Gt", ("4",)), ("cpu", "Lt", ("6",))), _t(7, ("cpu", "NotIn", ("5",)))],
            7,
        ),
        (
            "Gt 4 and Lt 7 but NotIn 5",
            [_t(5, ("cpu", "Gt", ("4",)), ("cpu", "Lt", ("7",))), _t(7, ("cpu", "NotIn", ("5",)))],
            12,
        ),
        ("different keys add up", [_t(80, ("zone", "In", ("a",))), _t(60, ("disk", "In", ("ssd",)))], 140),
        (
            "linked through a two-key term",
            [
                _t(50, ("zone", "In", ("a",))),
                _t(30, ("zone", "In", ("b",)), ("disk", "In", ("ssd",))),
                _t(40, ("disk", "DoesNotExist")),
            ],
            90,
        ),
        (
            "node names",
            [_t(40, fields=[("metadata.name", "In", ("n1",))]), _t(30, fields=[("metadata.name", "In", ("n2",))])],
            40,
        ),
        (
            "weight 0 and an empty term count nothing",
            [_t(0, ("zone", "In", ("a",))), PreferredTerm(9, NodeSelectorTerm())],
            0,
        ),
        (
            "a requirement that does not parse constrains nothing (the scheduler scores no node then)",
            [_t(9, ("zone", "In", ()))],
            9,
        ),
        ("thirteen linked terms: summed, an upper bound", [_t(1, ("zone", "In", (str(i),))) for i in range(13)], 13),
    ],
)
def test_most_matched_weight_is_the_best_sum_one_node_can_match(case, terms, expected):
    assert most_matched_weight(terms) == expected, case


def test_past_a_thousand_terms_their_weights_are_summed_without_grouping():
    zones = [_t(1, ("zone", "In", (str(i),))) for i in range(1001)]
    assert most_matched_weight(zones) == 1001  # an upper bound: one node has one zone
    assert most_matched_weight(zones[:1000]) == 1000  # grouped: more than 12 linked terms, summed too
    assert most_matched_weight(zones[:3]) == 1  # searched
