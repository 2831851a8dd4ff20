"""The admission policies' CEL, checked and run by a second engine (cel-expr-python), against the
webhook on every pod of the differential corpus (tests/podcorpus.py).

The policies run in every order the API server may pick (it keeps none); for each order the
result must equal the webhook's for the policy with its rules in that order. Each mutated pod must
validate strictly against the Kubernetes 1.36 Pod schema, and running the policies again
(reinvocationPolicy IfNeeded) must change nothing.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest

from tests import celengine, own_preference, podcorpus
from tests.fixtures import NETQOS_TERMS
from tests.policies import policies
from webhook.admission import create_review, review, wire_patch
from webhook.admission_policy import cel_scale
from webhook.policy import Policy, Rule
from webhook.policy_file import default_policy
from webhook.scoretable import scaled_terms

POLICIES = policies()
PODS = podcorpus.every_pod()


def webhook(policy: Policy, pod: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """The pod the webhook makes at the admission policy's scale (`cel_scale`) (its wire patch applied)
    and its warnings."""
    response = review(cel_scale(policy), create_review(copy.deepcopy(pod), "differential-test")).response
    ops = wire_patch(response)
    return jsonpatch.apply_patch(copy.deepcopy(pod), ops), set(response["response"].get("warnings", []))


def admission_policies(policy: Policy, pod: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """The pod after each rule's policy in order (objectSelector, matchCondition, mutation), one
    reinvocation round, and the warn-only policies' warnings on the result."""
    current = pod
    for rule in policy.rules:
        if rule.pod_selector.matches(current["metadata"].get("labels") or {}):
            current = celengine.mutate(policy, rule, current).pod
    if current is not pod:
        for rule in policy.rules:
            if rule.pod_selector.matches(current["metadata"].get("labels") or {}):
                again = celengine.mutate(policy, rule, current)
                assert again.patch == [], f"reinvoking {rule.name} patched again: {again.patch}"
    warnings: set[str] = set()
    for rule in policy.rules:
        if rule.pod_selector.matches(current["metadata"].get("labels") or {}):
            warnings |= set(celengine.warnings(policy, rule, current))
    return current, warnings


def pods_for(order: tuple[Rule, ...], policy: Policy) -> list[tuple[str, dict[str, Any]]]:
    """Every pod in the policy's own order; in the others, the pods that order can change: those
    several rules select."""
    if order == policy.rules:
        return PODS
    return [(label, pod) for label, pod in PODS if podcorpus.selected_by(policy, pod) >= 2]


@pytest.mark.parametrize("policy_name", POLICIES)
def test_the_mutation_type_checks_to_exactly_a_list_of_json_patches(policy_name: str) -> None:
    policy = POLICIES[policy_name]
    for rule in policy.rules:
        checked = celengine.type_check(policy, rule)
        assert checked.mutation == "LIST<JSONPatch>"
        assert checked.match_condition == "BOOL"
        assert checked.variables["present"] == "LIST<BOOL>"
        assert celengine.type_check_warnings(policy, rule) == [("BOOL", "STRING"), ("BOOL", "STRING")]


@pytest.mark.parametrize("policy_name", POLICIES)
def test_policies_in_every_order_equal_the_webhook_on_every_pod(policy_name: str) -> None:
    policy = POLICIES[policy_name]
    failures = []
    mutated = 0
    for order in itertools.permutations(policy.rules):
        ordered = Policy(order)
        for label, pod in pods_for(order, policy):
            expected, expected_warnings = webhook(ordered, pod)
            got, warnings = admission_policies(ordered, pod)
            if got != expected:
                failures.append(f"{label} (order {[r.name for r in order]}): policy {got} != webhook {expected}")
            # The webhook says each warning once; each selecting rule's warn-only policy may repeat
            # the opt-out one, so the sets are compared.
            if warnings != expected_warnings:
                failures.append(f"{label}: warnings {warnings} != webhook {expected_warnings}")
            mutated += got != pod
    assert not failures, "\n".join(failures[:10])
    assert mutated > len(PODS) // 5, "the corpus must exercise the mutation, not only the skips"


def test_every_mutated_pod_validates_strictly_against_the_1_36_pod_schema() -> None:
    policy = POLICIES["table and two rules"]
    seen = set()
    for label, pod in PODS:
        got, _ = admission_policies(policy, pod)
        # One pod per distinct result: the policies only write the affinity and the annotations.
        shape = json.dumps([got["spec"].get("affinity"), got["metadata"].get("annotations")], sort_keys=True)
        if got is not pod and shape not in seen:
            seen.add(shape)
            try:
                kubernetes_validate.validate(got, "1.36.0", strict=True)
            except kubernetes_validate.ValidationError as err:
                raise AssertionError(f"{label}: {err}") from None
    assert len(seen) > 20


@pytest.mark.parametrize(
    "case, own",
    [
        ("preference {}", [{"weight": 10, "preference": {}}]),
        (
            "matchExpressions [] and matchFields []",
            [{"weight": 4, "preference": {"matchExpressions": [], "matchFields": []}}],
        ),
        ("weight 0", [podcorpus.term(0, ("zone", "In", ["a"]))]),
    ],
)
def test_own_terms_the_scheduler_ignores_leave_the_exact_form_in_the_admission_policy_too(case, own) -> None:
    policy = default_policy()
    before = podcorpus.pod("ignored", podcorpus.LABELS, affinity={"nodeAffinity": {podcorpus.PREFERRED: own}})
    after = celengine.mutate(policy, policy.rules[0], before).pod
    assert after["spec"]["affinity"]["nodeAffinity"][podcorpus.PREFERRED] == own + NETQOS_TERMS, case


@pytest.mark.parametrize(("case", "own", "scale"), own_preference.CASES, ids=[c for c, _, _ in own_preference.CASES])
def test_beside_own_terms_the_cel_injects_the_table_scaled_to_the_sum_of_their_weights(case, own, scale) -> None:
    policy = default_policy()
    rule = policy.rules[0]
    assert rule.table is not None
    after = celengine.mutate(policy, rule, own_preference.pod_with(own)).pod
    expected = [t.to_api() for t in scaled_terms(rule.table, policy.weights, scale)]
    assert after["spec"]["affinity"]["nodeAffinity"][podcorpus.PREFERRED] == own + expected, case
    assert celengine.mutate(policy, rule, after).patch == [], "a reinvocation finds the scaled terms carried"
    assert celengine.warnings(policy, rule, after) == [], "the scaled terms are ours, not the author's"
