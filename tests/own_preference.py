"""Pods with preferred node affinity of their own, and the scale P (`own_max`) the admission
policy's CEL gives the default table beside them: the sum of their positive weights, over the
terms the scheduler scores that are neither ours nor a table's requirements
(docs/scheduling.md, "The pod's own node affinity"). Shared by the two CEL engines' tests."""

from __future__ import annotations

from typing import Any

from tests import podcorpus

ZONE_A = ("zone", "In", ["a"])
ZONE_B = ("zone", "In", ["b"])
SSD = ("disk", "In", ["ssd"])

# (case, the pod's own preferred terms, P)
CASES: list[tuple[str, list[dict[str, Any]], int]] = [
    ("one term of weight 50", [podcorpus.term(50, ZONE_A)], 50),
    ("two terms that match together add up", [podcorpus.term(100, ZONE_A), podcorpus.term(100, SSD)], 200),
    # The webhook's tight bound is 100 here (no node is in both zones); the CEL's sum is 200.
    ("two terms that exclude each other still add up", [podcorpus.term(100, ZONE_A), podcorpus.term(100, ZONE_B)], 200),
    ("small weights round the light step to nothing", [podcorpus.term(3, ZONE_A)], 3),
    (
        "a weight 0 term and an empty term count for nothing",
        [
            podcorpus.term(40, ZONE_A),
            podcorpus.term(0, SSD),
            {"weight": 30, "preference": {}},
        ],
        40,
    ),
    ("a negative weight counts for nothing", [podcorpus.term(40, ZONE_A), podcorpus.term(-20, SSD)], 40),
    (
        "past the split capacity the scale stops growing",
        [podcorpus.term(100, (f"k{i}", "Exists", [])) for i in range(30)],
        3000,
    ),
]


def pod_with(own: list[dict[str, Any]]) -> dict[str, Any]:
    return podcorpus.pod("own", podcorpus.LABELS, affinity={"nodeAffinity": {podcorpus.PREFERRED: own}})
