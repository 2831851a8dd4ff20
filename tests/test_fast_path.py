"""POST /mutate's fast path (webhook.serving.app._FastMutate) answers exactly as the Flask route does,
and leaves to Flask every request it does not take."""

import io
import json
import logging

import pytest
from support import fixture

from webhook import admission
from webhook.policy_file import default_policy
from webhook.serving.app import AppConfig, create_app

LIMIT = 64 * 1024


@pytest.fixture
def app():
    return create_app(AppConfig(policy=default_policy(), max_body_bytes=LIMIT))


def _call(wsgi, body: bytes, content_type: str = "application/json", length: str | None = None, method="POST"):
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": "/mutate",
        "QUERY_STRING": "timeout=10s",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "8443",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "localhost",
        "CONTENT_TYPE": content_type,
        "CONTENT_LENGTH": str(len(body)) if length is None else length,
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "https",
        "wsgi.errors": io.StringIO(),
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.input_terminated": True,
    }
    seen = {}

    def start_response(status, headers, exc_info=None):
        seen["status"], seen["headers"] = status, dict(headers)

    payload = b"".join(wsgi(environ, start_response))
    return seen["status"], seen["headers"], payload


BODIES = {
    "mutated": json.dumps(fixture("review-create-defaulted-pod.json")).encode(),
    "unlabelled": json.dumps(fixture("review-create-unlabelled.json")).encode(),
    "not JSON": b"nope",
    "not a review": b"[1, 2]",
    "missing uid": json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}).encode(),
}


@pytest.mark.parametrize("name", BODIES)
def test_fast_path_answers_as_the_flask_route(app, name):
    body = BODIES[name]
    fast = _call(app.wsgi_app, body)
    flask = _call(app.wsgi_app.wsgi_app, body)  # the Flask app behind the middleware
    assert fast[0] == flask[0]
    assert fast[1]["Content-Type"] == flask[1]["Content-Type"] == "application/json"
    assert int(fast[1]["Content-Length"]) == len(fast[2])
    assert json.loads(fast[2]) == json.loads(flask[2])


def test_fast_path_is_taken_for_an_api_server_review(app, monkeypatch):
    calls = []
    inner = app.wsgi_app.wsgi_app
    monkeypatch.setattr(app.wsgi_app, "wsgi_app", lambda env, sr: calls.append(env) or inner(env, sr))
    status, _, payload = _call(app.wsgi_app, BODIES["mutated"], content_type="application/json; charset=utf-8")
    assert status == "200 OK" and json.loads(payload)["response"]["patchType"] == "JSONPatch"
    assert calls == []  # Flask never saw it


@pytest.mark.parametrize(
    "case, kwargs, status",
    [
        ("over the limit", {"body": b" " * (LIMIT + 1)}, "413"),
        ("no content type", {"body": b"{}", "content_type": ""}, "415"),
        ("not a number of bytes", {"body": b"{}", "length": "2x"}, "400"),
        ("GET", {"body": b"", "method": "GET"}, "405"),
    ],
)
def test_anything_unusual_goes_to_flask(app, case, kwargs, status):
    got, headers, payload = _call(app.wsgi_app, **kwargs)
    assert got.startswith(status), case
    assert headers["Content-Type"] == "application/json" and json.loads(payload)["error"]


def test_an_internal_error_is_logged_and_answered_500(app, monkeypatch, caplog):
    def broken(policy, body):
        raise RuntimeError("boom")

    monkeypatch.setattr(admission, "handle", broken)
    with caplog.at_level(logging.ERROR, logger="webhook.review"):
        status, _, payload = _call(app.wsgi_app, BODIES["mutated"])
    assert status == "500 INTERNAL SERVER ERROR"
    assert "internal error" in json.loads(payload)["error"]
    assert any("boom" in (r.exc_text or "") or r.exc_info for r in caplog.records)
