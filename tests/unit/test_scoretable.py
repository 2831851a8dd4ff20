"""Score tables compiled into preferred terms: kube-scheduler's NodeAffinity, normalised by the
best node and weighted, differs between nodes exactly as the table times the plugin's weight, or
the table is refused with the field to change."""

from __future__ import annotations

import itertools

import pytest

from webhook.affinity import preferred_score
from webhook.scheduler.framework import default_normalize
from webhook.scoretable import (
    SchedulerWeights,
    ScoreTable,
    TableError,
    classic_terms,
    compile_table,
    scaled_terms,
    split_weight,
)

DEFAULT = ScoreTable("net", (("high", 100), ("low", 0)), 10)


def classes(table: ScoreTable) -> list[dict[str, str]]:
    """One node's labels per class: each listed value, another value, no label."""
    return [{table.key: v} for v, _ in table.scores] + [{table.key: "some-other-value"}, {}]


def weighted_affinity(terms, nodes: list[dict[str, str]], weight: int) -> list[int]:
    """What kube-scheduler adds to each node's total: raw, normalised by the best, times the weight."""
    return [n * weight for n in default_normalize([preferred_score(terms, labels) for labels in nodes])]


def test_the_default_table_compiles_to_the_table_plus_a_constant_pair():
    terms = compile_table(DEFAULT, SchedulerWeights(2, 1))
    assert [t.to_api() for t in terms] == [
        {"weight": 90, "preference": {"matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]}},
        {"weight": 10, "preference": {"matchExpressions": [{"key": "net", "operator": "NotIn", "values": ["low"]}]}},
        {"weight": 100, "preference": {"matchExpressions": [{"key": "net", "operator": "Exists"}]}},
        {"weight": 100, "preference": {"matchExpressions": [{"key": "net", "operator": "DoesNotExist"}]}},
    ]
    nodes = classes(DEFAULT)  # high, low, other, none
    assert [preferred_score(terms, labels) for labels in nodes] == [200, 100, 110, 110]
    assert weighted_affinity(terms, nodes, 2) == [200, 100, 110, 110]


def test_equal_weights_need_no_constant_and_give_the_classic_terms():
    assert compile_table(DEFAULT, SchedulerWeights(1, 1)) == classic_terms(DEFAULT)
    assert compile_table(DEFAULT, SchedulerWeights(3, 3)) == classic_terms(DEFAULT)


TABLES = [
    DEFAULT,
    ScoreTable("net", (("high", 100), ("medium", 50), ("low", 0)), 20),
    ScoreTable("net", (("high", 100),), 0),
    ScoreTable("net", (("low", 0),), 100),  # the unlisted class on top: NotIn [low]
    ScoreTable("example.com/tier", (("gold", 80), ("silver", 40), ("bronze", 40)), 60),
    ScoreTable("net", (("high", 60), ("low", 20)), 40),
]
WEIGHTS = [SchedulerWeights(a, p) for a, p in itertools.product((1, 2, 3, 4, 5, 10), (1, 2, 3))]


@pytest.mark.parametrize("table", TABLES, ids=lambda t: str(t.to_api()))
@pytest.mark.parametrize("weights", WEIGHTS, ids=lambda w: f"a{w.node_affinity}-p{w.netqos}")
def test_every_compiled_table_reproduces_the_plugins_differences_whenever_a_top_node_is_feasible(table, weights):
    try:
        terms = compile_table(table, weights)
    except TableError as err:
        assert err.field in (
            "schedulerWeights",
            "schedulerWeights.nodeAffinity",
            "unlistedScore",
        ) or err.field.startswith("scores[")
        return
    assert all(1 <= t.weight <= 100 for t in terms)
    all_classes = classes(table)
    top = max(table.score(labels) for labels in all_classes)
    # every subset of classes that includes a top-scoring one, as the feasible nodes
    for size in range(1, len(all_classes) + 1):
        for feasible in itertools.combinations(all_classes, size):
            if max(table.score(labels) for labels in feasible) != top:
                continue
            stock = weighted_affinity(terms, list(feasible), weights.node_affinity)
            plugin = [table.score(labels) * weights.netqos for labels in feasible]
            assert len({s - p for s, p in zip(stock, plugin, strict=True)}) == 1, (feasible, stock, plugin)


def test_the_default_weights_express_the_default_table_and_most_weights_do():
    expressible = 0
    for weights in WEIGHTS:
        try:
            compile_table(DEFAULT, weights)
            expressible += 1
        except TableError:
            pass
    assert expressible >= len(WEIGHTS) // 2


@pytest.mark.parametrize(
    "case, table, weights, field, fragments",
    [
        ("all scores equal", ScoreTable("net", (("high", 10),), 10), SchedulerWeights(), "scores", ["prefers no node"]),
        (
            "affinity too weak for the plugin's spread",
            DEFAULT,
            SchedulerWeights(1, 2),
            "schedulerWeights.nodeAffinity",
            ["at most 100 points", "needs 200", "at least 2"],
        ),
        (
            "an odd step at weight 2",
            ScoreTable("net", (("high", 100), ("low", 0)), 15),
            SchedulerWeights(2, 1),
            "unlistedScore",
            ["steps of its weight 2", "14 or 16"],
        ),
    ],
)
def test_an_inexpressible_table_is_refused_naming_the_field_and_what_would_work(case, table, weights, field, fragments):
    with pytest.raises(TableError) as err:
        compile_table(table, weights)
    assert err.value.field == field, case
    for fragment in fragments:
        assert fragment in str(err.value), case


@pytest.mark.parametrize(
    "weights, expected",
    [
        (SchedulerWeights(2, 1), [90, 10, 100, 100]),  # scale 1
        (SchedulerWeights(5, 1), [18, 2, 80, 80]),  # constant 400 at scale 1; 80 at 1/5
        (SchedulerWeights(5, 3), [54, 6, 40, 40]),  # 100 x 5 / 3 is a fraction; scale 3/5
        (SchedulerWeights(10, 1), [9, 1, 90, 90]),  # constant 900 at scale 1; 90 at 1/10
    ],
)
def test_another_scale_keeps_the_constant_and_the_steps_whole_and_within_a_term(weights, expected):
    assert [t.weight for t in compile_table(DEFAULT, weights)] == expected


@pytest.mark.parametrize(
    "case, weights, own_max, expected",
    [
        ("default weights, own 200: the classic terms", SchedulerWeights(), 200, [(90, "In"), (10, "NotIn")]),
        ("default weights, own 100: half", SchedulerWeights(), 100, [(45, "In"), (5, "NotIn")]),
        ("own 9: 4.05 and 0.45, the second left out", SchedulerWeights(), 9, [(4, "In")]),
        ("own 1: the table still weighs 1", SchedulerWeights(), 1, [(1, "In")]),
        (
            "own 500: 225 as 100 + 99 + 26",
            SchedulerWeights(),
            500,
            [(100, "In"), (99, "In"), (26, "In"), (25, "NotIn")],
        ),
        ("equal weights, own 100: K = 1", SchedulerWeights(1, 1), 100, [(90, "In"), (10, "NotIn")]),
        ("NodeAffinity 5, own 100", SchedulerWeights(5, 1), 100, [(18, "In"), (2, "NotIn")]),
        (
            "own 100,000: capped at ten terms per step",
            SchedulerWeights(),
            100_000,
            [*((w, "In") for w in range(100, 90, -1)), (100, "NotIn"), (6, "NotIn")],
        ),
    ],
)
def test_beside_own_terms_each_step_weighs_own_max_times_the_plugins_proportion(case, weights, own_max, expected):
    table = ScoreTable("net", (("high", 100), ("low", 0)), 10)
    terms = scaled_terms(table, weights, own_max)
    assert [(t.weight, t.term.expressions[0].operator) for t in terms] == expected, case
    assert all(1 <= t.weight <= 100 for t in terms)
    assert len({t.identity for t in terms}) == len(terms), "each term its own identity"


@pytest.mark.parametrize("weight", [1, 99, 100, 101, 199, 200, 250, 297, 298, 955])
def test_a_weight_is_split_into_distinct_parts_of_at_most_100(weight):
    parts = split_weight(weight)
    assert sum(parts) == weight and len(set(parts)) == len(parts) and all(1 <= p <= 100 for p in parts)
