"""Which policy `status` judges by when the webhook's ConfigMap is unusable: the one the running
pods serve, when they agree and can be read (pure: webhook.status.served)."""

from __future__ import annotations

import hashlib

import pytest

from tests.fixtures import REPO
from webhook.policy_file import default_policy
from webhook.status import InForce, Served, choose

SERVED = (REPO / "deploy/examples/policies/classic.yaml").read_text().replace("- name: netqos", "- name: fastlane", 1)
DIGEST = hashlib.sha256(SERVED.encode()).hexdigest()
OTHER = "f" * 64
ERROR = "policy file ConfigMap netqos-system/netqos-webhook-policy key policy.yaml: rules: must be a non-empty list"
BROKEN = InForce(default_policy(), "the built-in default policy", f"the webhook's policy is invalid: {ERROR}")
NOT_KNOWN = "; the registration is not compared with any policy until it is known: fix the ConfigMap"


def pod(name: str, sha256: str = DIGEST, document: str = SERVED) -> Served:
    return Served(name, sha256, ("fastlane",), document, "/config/policy.yaml")


def test_a_usable_configmap_is_the_policy_in_force_and_no_pod_is_needed() -> None:
    fine = InForce(default_policy(), "ConfigMap netqos-system/p key policy.yaml", None)
    assert choose(fine, []) is fine


def test_the_policy_every_pod_serves_is_in_force_and_the_problem_names_it() -> None:
    chosen = choose(BROKEN, [pod("a"), pod("b")])
    assert chosen.known
    assert [r.name for r in chosen.policy.rules] == ["fastlane"]
    assert chosen.source == f"the policy the webhook's pods serve (version {DIGEST[:12]}, from /config/policy.yaml)"
    assert chosen.problem == f"the ConfigMap is invalid: {ERROR}; the running pods keep policy {DIGEST[:12]}"


@pytest.mark.parametrize(
    ("served", "reason", "said"),
    [
        (
            [pod("a"), pod("b", OTHER)],
            "",
            f"the running pods serve different policies: {DIGEST[:12]} (pods a); {OTHER[:12]} (pods b)",
        ),
        (
            [Served("a", error="forbidden by RBAC: needs get on pods/proxy")],
            "",
            "which policy the running pods keep could not be read (pod a: forbidden by RBAC: needs get on pods/proxy)",
        ),
        (
            [],
            "the webhook's Service has no ready pod",
            "which policy the running pods keep could not be read (the webhook's Service has no ready pod)",
        ),
        ([pod("a", document="rules: [\n")], "", "pod a serves a policy that does not compile: "),
    ],
    ids=["pods disagree", "proxy forbidden", "no ready pod", "a stand-in's answer"],
)
def test_without_one_readable_policy_none_is_known_to_be_in_force(served: list[Served], reason: str, said: str) -> None:
    chosen = choose(BROKEN, served, reason)
    assert not chosen.known
    assert chosen.problem is not None and chosen.problem.startswith(f"the ConfigMap is invalid: {ERROR}; {said}")
    assert chosen.problem.endswith(NOT_KNOWN)
    assert (
        chosen.source == "the built-in default policy (only to list pods: the policy the webhook serves is not known)"
    )


def test_a_pod_that_answers_beside_one_that_cannot_be_read_decides() -> None:
    chosen = choose(BROKEN, [Served("a", error="503"), pod("b")])
    assert chosen.known and [r.name for r in chosen.policy.rules] == ["fastlane"]


def test_served_reads_the_json_of_get_policy() -> None:
    answer = {"sha256": DIGEST, "rules": ["fastlane"], "document": SERVED, "source": "/config/policy.yaml"}
    assert Served.of("a", answer) == pod("a")
