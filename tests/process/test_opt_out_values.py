"""The opt-out annotation takes exact values, as Kubernetes compares them; anything else is said."""

from __future__ import annotations

import pytest

from harness.patches import assert_patch_agrees, decoded_patch, pod_review
from harness.pods import pod
from tests.fixtures import NETQOS_TERMS, with_netqos
from webhook.admission import review
from webhook.affinity import PREFERRED
from webhook.policy_file import default_policy

SELECTED = {"qos": "latency-sensitive"}


@pytest.mark.parametrize(
    "labels, inject, decision, warned",
    [
        (SELECTED, "false", "skipped_opt_out", False),
        (SELECTED, "true", "mutated", False),
        (SELECTED, None, "mutated", False),
        (SELECTED, "False", "mutated", True),
        (SELECTED, "no", "mutated", True),
        (SELECTED, "0", "mutated", True),
        (SELECTED, "", "mutated", True),
        ({}, "no", "not_selected", False),  # only pods a rule selects hear about it
    ],
)
def test_only_false_opts_out_and_other_values_are_warned_about(tmp_path, labels, inject, decision, warned):
    before = pod(labels, None if inject is None else {"netqos.io/inject": inject}, containers=[{"name": "c"}])
    result = review(default_policy(), pod_review(before))
    warnings = result.response["response"].get("warnings", [])
    assert result.decision.value == decision
    assert bool(warnings) == warned
    if warned:
        assert warnings == [
            f'netqos-webhook: annotation netqos.io/inject="{inject}" does not opt out: only "false" does '
            '(values are exact strings: "true" or "false")'
        ]
    if decision == "mutated":
        after = with_netqos(before)
        assert after["spec"]["affinity"]["nodeAffinity"][PREFERRED] == NETQOS_TERMS
        assert_patch_agrees(before, decoded_patch(result.response), after, tmp_path)


def test_an_unknown_value_does_not_turn_an_unchanged_pod_into_a_skipped_one():
    already = with_netqos(pod(SELECTED, {"netqos.io/inject": "yes"}, containers=[{"name": "c"}]))
    result = review(default_policy(), pod_review(already))
    assert result.decision.value == "unchanged" and len(result.response["response"]["warnings"]) == 1
