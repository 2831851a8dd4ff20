"""Which of a pod's preferred terms the webhook injected, by its `netqos.io/injected` annotation, and
whether it was mutated under an earlier policy (`policy.injected`, `without_injected`,
`injected_earlier`): the annotation names the rules applied, their terms follow the pod's own, and
a rule is applied only where the pod's own node affinity uses none of its keys."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from harness.kubeapi import pod
from tests.fixtures import CLASSIC_TERMS, NETQOS_TERMS
from webhook.names import INJECTED_ANNOTATION
from webhook.policy import Decision, Injected, evaluate, injected, injected_earlier, without_injected
from webhook.policy_file import default_policy

QOS = {"qos": "latency-sensitive"}
OWN_DISK = {"weight": 20, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}
OWN_NET = {"weight": 50, "preference": {"matchExpressions": [{"key": "net", "operator": "In", "values": ["fast"]}]}}
# what an earlier policy's rule netqos injected: net=high at another weight
EARLIER = [{"weight": 50, "preference": {"matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]}}]
EARLIER_ZONE = [
    {"weight": 50, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}
]


def annotated(preferred: list[Any], names: str | None = "netqos") -> dict[str, Any]:
    return pod(
        "shop",
        "web-1",
        QOS,
        "slow-1",
        preferred=copy.deepcopy(preferred) or None,
        annotations={INJECTED_ANNOTATION: names} if names is not None else None,
    )


@pytest.mark.parametrize(
    ("preferred", "names", "found"),
    [
        (NETQOS_TERMS, "netqos", Injected(("netqos",), 4)),
        (EARLIER, "netqos", Injected(("netqos",), 1)),  # an earlier policy's form: on the rule's key
        ([OWN_DISK, *EARLIER], "netqos", Injected(("netqos",), 1)),  # the pod's own term comes first and stays
        ([*EARLIER, OWN_DISK], "netqos", Injected(("netqos",), 0)),  # ours are appended: a term after them is not
        (NETQOS_TERMS, "netqos-v1", Injected(("netqos-v1",), 0, ("netqos-v1",))),  # a rule the policy lost
        (NETQOS_TERMS, None, Injected()),  # no annotation: nothing is ours by it
    ],
)
def test_the_trailing_terms_on_a_named_rules_keys_are_the_webhooks(preferred, names, found):
    assert injected(default_policy(), annotated(preferred, names)) == found


def test_without_injected_keeps_the_pods_own_terms_and_drops_what_empties():
    own = without_injected(annotated([OWN_DISK, *EARLIER]), Injected(("netqos",), 1))
    assert own["spec"]["affinity"] == {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [OWN_DISK]}}
    assert INJECTED_ANNOTATION not in own["metadata"].get("annotations", {})
    bare = without_injected(annotated(EARLIER), Injected(("netqos",), 1))
    assert "affinity" not in bare["spec"] and "annotations" not in bare["metadata"]


@pytest.mark.parametrize(
    ("preferred", "names", "decision", "earlier"),
    [
        # the earlier form of the rule reads as the author's net affinity: explicit, but ours by the annotation
        (EARLIER, "netqos", Decision.SKIPPED_EXPLICIT, True),
        ([OWN_DISK, *EARLIER], "netqos", Decision.SKIPPED_EXPLICIT, True),
        # the current terms, or the classic ones the policy still recognises: injected, not earlier
        (NETQOS_TERMS, "netqos", Decision.UNCHANGED, False),
        (CLASSIC_TERMS, "netqos", Decision.UNCHANGED, False),
        # the same terms without the annotation: the author's own choice
        (EARLIER, None, Decision.SKIPPED_EXPLICIT, False),
        # the author's own net affinity (the earlier rule netqos was on another key): explicit all the same
        ([OWN_NET, *EARLIER_ZONE], "netqos", Decision.SKIPPED_EXPLICIT, False),
        # created while the webhook was down: missing, not earlier
        ([], None, Decision.MUTATED, False),
    ],
)
def test_a_pod_the_webhook_mutated_under_an_earlier_policy_is_told_apart(preferred, names, decision, earlier):
    policy, subject = default_policy(), annotated(preferred, names)
    outcome = evaluate(policy, subject)
    assert (outcome.decision, injected_earlier(policy, subject, outcome)) == (decision, earlier)
