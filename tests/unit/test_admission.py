"""The AdmissionReview contract, without sockets."""

import base64
import json

import pytest

from harness.patches import pod_review
from webhook.admission import BadReview, decode, handle, review
from webhook.policy_file import default_policy

LS_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": {"qos": "latency-sensitive"}},
    "spec": {"containers": []},
}
PLAIN_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}


@pytest.mark.parametrize("version", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
def test_the_response_echoes_version_and_uid_and_carries_a_base64_json_patch(version):
    doc = pod_review(LS_POD, uid="7c1b")
    doc["apiVersion"] = version
    body = review(default_policy(), doc).response
    assert body["apiVersion"] == version and body["kind"] == "AdmissionReview"
    answer = body["response"]
    assert answer["uid"] == "7c1b" and answer["allowed"] is True and answer["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(answer["patch"], validate=True))
    assert [op["op"] for op in ops] == ["add", "add"]


def test_nothing_to_change_means_no_patch_and_no_patch_type():
    answer = review(default_policy(), pod_review(PLAIN_POD)).response["response"]
    assert answer == {"uid": "uid-1", "allowed": True}


def test_audit_annotation_key_is_a_bare_name_the_api_server_can_prefix():
    # The API server stores it as "<webhook name>/<key>"; a key with a "/" would be invalid.
    answer = review(default_policy(), pod_review(LS_POD)).response["response"]
    assert answer["auditAnnotations"] == {"injected-rules": "netqos"}
    assert all("/" not in key for key in answer["auditAnnotations"])


@pytest.mark.parametrize(
    "case, request_fields",
    [
        ("UPDATE", {"operation": "UPDATE"}),
        ("DELETE", {"operation": "DELETE"}),
        ("CONNECT", {"operation": "CONNECT"}),
        ("a subresource", {"subResource": "status"}),
        ("another resource", {"resource": {"group": "", "version": "v1", "resource": "configmaps"}}),
        ("another group", {"resource": {"group": "example.com", "version": "v1", "resource": "pods"}}),
        ("another kind", {"kind": {"group": "", "version": "v1", "kind": "Binding"}}),
        ("no resource", {"resource": None}),
        ("resource as a string", {"resource": "pods"}),
    ],
)
def test_only_create_of_pods_without_subresource_is_mutated(case, request_fields):
    result = review(default_policy(), pod_review(LS_POD, **request_fields))
    assert result.decision.value == "not_selected", case
    assert result.response["response"] == {"uid": "uid-1", "allowed": True}


def test_a_dry_run_is_answered_exactly_like_a_real_request():
    real = review(default_policy(), pod_review(LS_POD, dryRun=False))
    dry = review(default_policy(), pod_review(LS_POD, dryRun=True))
    assert dry.response == real.response and dry.dry_run is True and real.dry_run is False


def test_a_pod_created_by_a_replicaset_is_named_by_its_generate_name():
    pod = {**LS_POD, "metadata": {"generateName": "web-5d9c-", "labels": LS_POD["metadata"]["labels"]}}
    result = review(default_policy(), pod_review(pod, name=""))
    assert result.name == "web-5d9c-" and result.decision.value == "mutated"


@pytest.mark.parametrize(
    "case, body, fragment",
    [
        ("not JSON", b"{", "not valid JSON"),
        ("invalid UTF-8", b'"\xff"', "not valid JSON"),
        ("too deep", b"[" * 50_000 + b"]" * 50_000, "nested too deeply"),
        ("huge integer literal", b"9" * 10_000, "not valid JSON"),
        ("a list", b"[]", "must be a JSON object"),
        ("wrong kind", b'{"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}', "not an AdmissionReview"),
        (
            "unknown version",
            b'{"apiVersion": "admission.k8s.io/v2", "kind": "AdmissionReview", "request": {"uid": "a"}}',
            "'admission.k8s.io/v2'",
        ),
        (
            "no request",
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
            "request must be an object",
        ),
        (
            "request is a string",
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": "x"}',
            "request must be an object",
        ),
        (
            "no uid",
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}',
            "uid must be a non-empty string",
        ),
        (
            "empty uid",
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": ""}}',
            "uid must be a non-empty string",
        ),
        (
            "numeric uid",
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 7}}',
            "uid must be a non-empty string",
        ),
    ],
)
def test_a_body_that_is_not_a_usable_review_is_a_bad_request(case, body, fragment):
    with pytest.raises(BadReview) as err:
        handle(default_policy(), body)
    assert fragment in str(err.value), case


@pytest.mark.parametrize(
    "case, obj",
    [
        ("no object", None),
        ("object is a list", [1, 2]),
        ("labels are a list", {"metadata": {"labels": ["qos"]}}),
        ("affinity is a string", {"metadata": {"labels": {"qos": "latency-sensitive"}}, "spec": {"affinity": "x"}}),
    ],
)
def test_a_well_formed_review_with_a_strange_object_is_allowed_unchanged(case, obj):
    result = review(default_policy(), pod_review(obj))
    answer = result.response["response"]
    assert answer["allowed"] is True and "patch" not in answer, case


def test_a_bug_in_the_policy_admits_the_pod_unchanged_with_a_warning(monkeypatch):
    import webhook.admission as admission

    def broken(policy, pod):
        raise KeyError("bug")

    monkeypatch.setattr(admission, "evaluate", broken)
    result = review(default_policy(), pod_review(LS_POD))
    answer = result.response["response"]
    assert result.decision.value == "error"
    assert answer["allowed"] is True and "patch" not in answer and "internal error" in answer["warnings"][0]


def test_decode_accepts_bytes_as_sent_over_http():
    assert decode(b'{"a": [1]}') == {"a": [1]}
