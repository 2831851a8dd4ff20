"""The generated MutatingAdmissionPolicies run by the API server's own code (k8s.io/apiserver
v0.36.3: its CEL environment, compiler, matcher and JSON patcher; harness/mapeval), against the
webhook on every pod of the differential corpus and in every order of the policies.

v0.36.3 is inside the range (1.36.0-1.36.3) that panics on a patch value holding an Object
initialiser inside a list: a control policy shows the panic is real here, and the generated
policies never reach it.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import jsonpatch
import pytest

from harness import apiserver_cel
from tests import own_preference, podcorpus
from tests.policies import policies
from webhook.admission import create_review, review, wire_patch
from webhook.admission_policy import MUTATING_KIND, admission_policies, cel_scale
from webhook.policy import Policy
from webhook.policy_file import default_policy
from webhook.scoretable import scaled_terms

POLICIES = policies()
PODS = [pod for _, pod in podcorpus.every_pod()]
LABELS = [label for label, _ in podcorpus.every_pod()]


@pytest.fixture(scope="module", autouse=True)
def mapeval() -> None:
    try:
        apiserver_cel.binary()
    except apiserver_cel.Unavailable as err:
        pytest.skip(str(err))


def mutating(policy: Policy) -> list[dict[str, Any]]:
    return [o for o in admission_policies(policy) if o["kind"] == MUTATING_KIND]


def webhook(policy: Policy, pod: dict[str, Any]) -> dict[str, Any]:
    response = review(cel_scale(policy), create_review(copy.deepcopy(pod), "differential-test")).response
    return jsonpatch.apply_patch(copy.deepcopy(pod), wire_patch(response))


@pytest.mark.parametrize("policy_name", POLICIES)
def test_every_policy_compiles_in_the_api_servers_cel_environment(policy_name: str) -> None:
    result = apiserver_cel.run(mutating(POLICIES[policy_name]), [])
    assert result["compileErrors"] and all(errors == [] for errors in result["compileErrors"].values()), result


@pytest.mark.parametrize("policy_name", POLICIES)
def test_the_api_server_mutates_every_pod_as_the_webhook_does_in_every_order(policy_name: str) -> None:
    policy = POLICIES[policy_name]
    objects = {o["metadata"]["name"]: o for o in mutating(policy)}
    failures = []
    for order in itertools.permutations(policy.rules):
        names = [f"{r.name}.netqos.io" for r in order]
        # Every pod in the policy's own order; in the others, those several rules select.
        chosen = [
            (label, pod)
            for label, pod in zip(LABELS, PODS, strict=True)
            if order == policy.rules or podcorpus.selected_by(policy, pod) >= 2
        ]
        result = apiserver_cel.run([objects[n] for n in names], [pod for _, pod in chosen])
        for (label, _), pod in zip(chosen, result["pods"], strict=True):
            if pod["errors"]:
                failures.append(f"{label}: {pod['errors']}")
                continue
            # The webhook sees the pod as the API server encodes it, as the policies do.
            expected = webhook(Policy(order), pod["before"])
            if pod["after"] != expected:
                failures.append(
                    f"{label} {names}: api server {json.dumps(pod['after'])} != webhook {json.dumps(expected)}"
                )
    assert not failures, "\n".join(failures[:5])


def test_a_pod_with_thousands_of_preferred_terms_stays_within_the_cel_cost_budget() -> None:
    many = [podcorpus.term(1 + i % 100, (f"key-{i}", "In", [f"v{i}"])) for i in range(2000)]
    pod = podcorpus.pod("many", podcorpus.LABELS, affinity={"nodeAffinity": {podcorpus.PREFERRED: many}})
    (result,) = apiserver_cel.run(mutating(default_policy()), [pod])["pods"]
    assert result["errors"] == []
    policy = default_policy()
    table = policy.rules[0].table
    assert table is not None
    # The pod has terms of its own: the table goes in scaled to the sum of their weights.
    scaled = [t.to_api() for t in scaled_terms(table, policy.weights, sum(t["weight"] for t in many))]
    assert result["after"]["spec"]["affinity"]["nodeAffinity"][podcorpus.PREFERRED][2000:] == scaled
    assert result["after"] == webhook(default_policy(), result["before"])


def test_the_panic_the_generated_patch_avoids_is_real_in_this_api_server() -> None:
    """A control: a patch value that is a list holding an Object initialiser panics v0.36.3."""
    (policy,) = mutating(default_policy())
    control = copy.deepcopy(policy)
    path = "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution"
    term = "Object.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution{weight: 1}"
    control["spec"]["mutations"][0]["jsonPatch"]["expression"] = (
        f'[JSONPatch{{op: "add", path: "/spec/affinity", value: {{}}}}, '
        f'JSONPatch{{op: "add", path: "/spec/affinity/nodeAffinity", value: {{}}}}, '
        f'JSONPatch{{op: "add", path: "{path}", value: [{term}]}}]'
    )
    pod = podcorpus.pod("plain", podcorpus.LABELS)
    (result,) = apiserver_cel.run([control], [pod])["pods"]
    assert any("panic" in e and "structpb" in e for e in result["errors"]), result["errors"]
    (ours,) = apiserver_cel.run([policy], [pod])["pods"]
    assert (
        ours["errors"] == []
        and ours["after"]["spec"]["affinity"]["nodeAffinity"][podcorpus.PREFERRED] == podcorpus.OURS
    )


def test_beside_own_terms_the_api_server_injects_the_table_scaled_to_the_sum_of_their_weights() -> None:
    policy = default_policy()
    table = policy.rules[0].table
    assert table is not None
    pods = [own_preference.pod_with(own) for _, own, _ in own_preference.CASES]
    results = apiserver_cel.run(mutating(policy), pods)["pods"]
    for (case, own, scale), result in zip(own_preference.CASES, results, strict=True):
        expected = [t.to_api() for t in scaled_terms(table, policy.weights, scale)]
        assert result["errors"] == [], case
        assert result["after"]["spec"]["affinity"]["nodeAffinity"][podcorpus.PREFERRED] == own + expected, case
