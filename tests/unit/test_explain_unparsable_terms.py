"""explain predicts what kube-scheduler does with node-affinity terms it cannot parse.

The scheduler builds each requirement with labels.NewRequirement, which validates the key (a
qualified name) and every value (a label value). The API server accepts invalid values in
preferred terms (ValidatePreferredSchedulingTerms: "we always allow invalid label-value for
preferred affinity"), so such pods exist. Then:
- a preferred term that does not parse makes NodeAffinity's PreScore fail for the whole cycle:
  with two or more feasible nodes the pod stays Pending; with one, scoring is skipped and it binds;
- a required term that does not parse matches no node (NewLazyErrorNodeSelector).
"""

from __future__ import annotations

import pytest

from harness.pods import PAUSE
from harness.pods import pod as pod_of
from webhook.affinity import PREFERRED, REQUIRED
from webhook.explain import explain
from webhook.policy_file import default_policy
from webhook.scheduler.model import Node

NODES = (Node("fast", {"net": "high", "zone": "a"}), Node("slow", {"net": "low", "zone": "b"}))


def pod(**terms: list) -> dict:
    """A latency-sensitive pod with these node affinity terms (preferred=, required=)."""
    return pod_of({"qos": "latency-sensitive"}, namespace="default", containers=[PAUSE], **terms)


def preferred(key: str, operator: str, values: list[str] | None = None) -> dict:
    requirement: dict = {"key": key, "operator": operator}
    if values is not None:
        requirement["values"] = values
    return {"weight": 5, "preference": {"matchExpressions": [requirement]}}


UNPARSABLE = [
    ("a value that is not a label value", preferred("zone", "NotIn", ["not a label value!"]), "values[0]"),
    ("a value with a trailing newline", preferred("zone", "In", ["a\n"]), "values[0]"),
    ("a key with an empty prefix", preferred("/zone", "Exists"), "key"),
    ("a key that is not a qualified name", preferred("zone!", "Exists"), "key"),
    ("a Gt value with a sign", preferred("gen", "Gt", ["-1"]), "exactly one integer"),
]


@pytest.mark.parametrize("case, term, fault", UNPARSABLE, ids=[c[0] for c in UNPARSABLE])
def test_an_unparsable_preferred_term_leaves_the_pod_pending_and_names_the_term(case, term, fault):
    report = explain(default_policy(), pod(preferred=[preferred("zone", "In", ["a"]), term]), NODES)
    path = f"spec.affinity.nodeAffinity.{PREFERRED}[1].preference.matchExpressions[0]"
    assert report.ranking.score_failure is not None and report.ranking.score_failure.startswith(path), case
    assert fault in report.ranking.score_failure, case
    assert report.ranking.predicted == (), case
    assert report.netqos.predicted == (), case  # the NetQoS scheduler runs NodeAffinity's PreScore too
    note = next(n for n in report.notes if "PreScore" in n)
    assert path in note and "Pending" in note, case


def test_with_one_feasible_node_scoring_is_skipped_and_the_pod_binds_despite_the_term():
    bad = preferred("zone", "NotIn", ["not a label value!"])
    report = explain(default_policy(), pod(preferred=[bad]), NODES[:1])
    assert report.ranking.predicted == ("fast",)
    assert any("as soon as a second node is feasible" in n for n in report.notes)


def test_a_valid_preferred_term_is_scored_as_before():
    report = explain(default_policy(), pod(preferred=[preferred("zone", "In", ["b"])]), NODES)
    assert report.ranking.score_failure is None
    # the pod's own 5 on zone b beside ours scaled to it (2 on net=high): slow, as the NetQoS
    # scheduler weighs the pod's term (normalised to 100, at weight 2) against its 100 for fast
    assert report.ranking.predicted == ("slow",)


def test_an_unparsable_required_term_matches_no_node_and_is_named():
    bad = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a b"]}]}
    report = explain(default_policy(), pod(required=[bad]), NODES)
    assert report.ranking.feasible == ()
    path = f"spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0]"
    assert any(path in n and "matches no node" in n for n in report.notes)


def test_another_required_term_still_matches_beside_an_unparsable_one():
    bad = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a b"]}]}
    good = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
    report = explain(default_policy(), pod(required=[bad, good]), NODES)
    assert [n.name for n in report.ranking.feasible] == ["slow"]
