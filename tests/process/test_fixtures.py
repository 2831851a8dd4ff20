"""Every fixture review, as the API server sends it, gets the expected answer, and the patch it
carries is applied identically by Python's jsonpatch and by Go's (kubectl patch --local)."""

import pytest

from harness.patches import apply_python, assert_patch_agrees, decoded_patch
from tests.fixtures import expectations, fixture, with_netqos
from webhook.admission import AUDIT_ANNOTATION, review
from webhook.policy_file import default_policy

EXPECTED = expectations()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_review_gets_expected_answer_and_a_patch_go_applies_identically(name, tmp_path):
    doc, want = fixture(name), EXPECTED[name]
    result = review(default_policy(), doc)
    response = result.response

    assert result.decision.value == want["decision"]
    assert response["apiVersion"] == doc["apiVersion"]
    assert response["kind"] == "AdmissionReview"
    assert response["response"]["uid"] == doc["request"]["uid"]
    assert response["response"]["allowed"] is True
    if "warning" in want:
        [warning] = response["response"]["warnings"]
        assert want["warning"] in warning
    else:
        assert "warnings" not in response["response"]

    before = doc["request"]["object"]
    ops = decoded_patch(response)
    if want["decision"] == "mutated":
        assert response["response"]["patchType"] == "JSONPatch"
        assert response["response"]["auditAnnotations"] == {AUDIT_ANNOTATION: want["injected"]}
        assert_patch_agrees(before, ops, with_netqos(before, want["injected"]), tmp_path)
    else:
        assert "patch" not in response["response"] and "patchType" not in response["response"]


@pytest.mark.parametrize("name", sorted(n for n, w in EXPECTED.items() if w["decision"] == "mutated"))
def test_mutated_pod_sent_again_is_left_unchanged(name):
    doc = fixture(name)
    once = review(default_policy(), doc)
    doc["request"]["object"] = apply_python(doc["request"]["object"], decoded_patch(once.response))
    again = review(default_policy(), doc)
    assert again.decision.value == "unchanged"
    assert "patch" not in again.response["response"]
