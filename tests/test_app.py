"""The Flask layer, through its test client: endpoints, status codes, JSON errors."""

import json

import pytest
from support import fixture

from webhook.policy_file import default_policy
from webhook.serving.app import AppConfig, create_app


@pytest.fixture
def client():
    return create_app(AppConfig(policy=default_policy(), max_body_bytes=64 * 1024)).test_client()


def test_mutate_answers_a_review_with_json(client):
    resp = client.post("/mutate", json=fixture("review-create-defaulted-pod.json"))
    assert resp.status_code == 200 and resp.mimetype == "application/json"
    assert resp.get_json()["response"]["patchType"] == "JSONPatch"


@pytest.mark.parametrize(
    "case, kwargs, status",
    [
        ("not JSON", {"data": b"nope", "content_type": "application/json"}, 400),
        ("missing uid", {"json": {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}}, 400),
        (
            "content type with charset is fine",
            {
                "data": json.dumps(fixture("review-create-unlabelled.json")),
                "content_type": "application/json; charset=utf-8",
            },
            200,
        ),
        ("no content type", {"data": b"{}"}, 415),
        ("form data", {"data": {"a": "b"}}, 415),
        ("over the configured limit", {"data": b" " * (64 * 1024 + 1), "content_type": "application/json"}, 413),
    ],
)
def test_client_errors_are_json_4xx(client, case, kwargs, status):
    resp = client.post("/mutate", **kwargs)
    assert resp.status_code == status, case
    if status != 200:
        assert resp.mimetype == "application/json" and resp.get_json()["error"], case


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_mutate_only_takes_post(client, method):
    resp = getattr(client, method)("/mutate")
    assert resp.status_code == 405 and resp.get_json()["error"]


def test_healthz_is_always_ok(client):
    assert client.get("/healthz").status_code == 200


def test_readyz_reports_the_loaded_rules(client):
    resp = client.get("/readyz")
    assert resp.status_code == 200 and resp.get_json()["rules"] == ["netqos"]


def test_readyz_is_unavailable_while_the_certificate_cannot_be_read(tmp_path):
    app = create_app(AppConfig(policy=default_policy(), certfile=tmp_path / "gone.crt", keyfile=tmp_path / "gone.key"))
    resp = app.test_client().get("/readyz")
    assert resp.status_code == 503 and "gone.crt" in resp.get_json()["error"]
