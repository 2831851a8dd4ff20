"""The policy's pass over a pod is one walk over its preferred terms with small constants: no model
of a term is built, and a term's identity is computed only where the policy holds a term of the
same weight and keys. A 3 MiB review (30,000 terms) costs milliseconds, not a second
(docs/performance.md, "The worst-case review")."""

from __future__ import annotations

import pytest

from tests.fixtures import NETQOS_TERMS
from webhook import affinity, policy
from webhook.affinity import PREFERRED, preferred_sketches_from_api, preferred_term_from_api, sketch_identity
from webhook.apidata import ShapeError
from webhook.policy import Decision, evaluate
from webhook.policy_file import default_policy

TERMS = [
    {"weight": 5, "preference": {"matchExpressions": [{"key": "a", "operator": "In", "values": ["x", "y", "x"]}]}},
    {"weight": 5, "preference": {"matchExpressions": [{"key": "a", "operator": "In", "values": ["y", "x"]}]}},
    {"weight": 1, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}},
    {"weight": 2, "preference": None},
    {"weight": 3},
    {"weight": 4, "preference": {"matchExpressions": [{"key": "b", "operator": "Exists", "values": None}]}},
    {
        "weight": 9,
        "preference": {
            "matchExpressions": [
                {"key": "c", "operator": "Gt", "values": ["1"]},
                {"key": "d", "operator": "DoesNotExist"},
            ],
            "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["m"]}],
        },
    },
    *NETQOS_TERMS,
]


@pytest.mark.parametrize("raw", TERMS)
def test_a_sketched_terms_identity_is_the_models(raw):
    (sketch,) = preferred_sketches_from_api([raw], "p")
    assert sketch_identity(sketch) == preferred_term_from_api(raw, "p[0]").identity
    assert sketch[1] == preferred_term_from_api(raw, "p[0]").keys()


@pytest.mark.parametrize(
    "raw",
    [
        "a string",
        {"weight": "5"},
        {"weight": True},
        {"weight": 5, "preference": []},
        {"weight": 5, "preference": {"matchExpressions": {}}},
        {"weight": 5, "preference": {"matchExpressions": [{"key": 1, "operator": "In"}]}},
        {"weight": 5, "preference": {"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}},
        {"weight": 5, "preference": {"matchFields": [{"key": "a", "operator": None}]}},
    ],
)
def test_a_misshapen_term_is_named_as_the_full_reader_names_it(raw):
    with pytest.raises(ShapeError) as expected:
        preferred_term_from_api(raw, "p[1]")
    with pytest.raises(ShapeError) as got:
        preferred_sketches_from_api([TERMS[0], raw], "p")
    assert str(got.value) == str(expected.value)


def test_thirty_thousand_foreign_terms_cost_no_model_and_no_identity(monkeypatch):
    calls = {"models": 0, "identities": 0}
    real_identity = affinity.sketch_identity

    def counted_identity(sketch):
        calls["identities"] += 1
        return real_identity(sketch)

    def no_model(*args, **kwargs):
        calls["models"] += 1
        return preferred_term_from_api(*args, **kwargs)

    monkeypatch.setattr(policy, "sketch_identity", counted_identity)
    monkeypatch.setattr(affinity, "preferred_term_from_api", no_model)
    foreign = [
        {
            "weight": 1 + i % 100,
            "preference": {"matchExpressions": [{"key": f"k{i}", "operator": "In", "values": ["v"]}]},
        }
        for i in range(30_000)
    ]
    pod = {
        "metadata": {"labels": {"qos": "latency-sensitive"}},
        "spec": {"affinity": {"nodeAffinity": {PREFERRED: [*foreign, *NETQOS_TERMS]}}},
    }
    outcome = evaluate(default_policy(), pod)
    assert outcome.decision is Decision.UNCHANGED  # our terms are there, after 30,000 of the author's
    assert calls == {"models": 0, "identities": len(NETQOS_TERMS)}
