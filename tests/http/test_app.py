"""The WSGI application, in process: endpoints, status codes, JSON errors; /mutate's checks in order."""

import io
import json
import logging
from contextlib import contextmanager
from http import HTTPStatus

import pytest

from tests.fixtures import fixture
from webhook import admission
from webhook.policy_file import default_policy
from webhook.serving.app import AppConfig, BodyBudget, BodyTimeout, create_app


@pytest.fixture
def client():
    return create_app(AppConfig(policy=default_policy(), max_body_bytes=64 * 1024)).test_client()


def test_mutate_answers_a_review_with_json(client):
    resp = client.post("/mutate", json=fixture("review-create-defaulted-pod.json"))
    assert resp.status_code == 200 and resp.mimetype == "application/json"
    assert resp.get_json()["response"]["patchType"] == "JSONPatch"


def test_a_missing_content_type_is_named_as_missing(client):
    resp = client.post("/mutate", data=b"{}")
    assert resp.status_code == 415
    assert (
        resp.get_json()["error"] == "the Content-Type header is missing; send the AdmissionReview as application/json"
    )


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


REFUSALS = [
    # method, path, status, Allow (None: no such header), a fragment of the error
    ("GET", "/mutate", 405, "POST", "method GET is not allowed on /mutate"),
    ("POST", "/healthz", 405, "GET, HEAD", "method POST is not allowed on /healthz; use GET, HEAD"),
    ("PUT", "/readyz", 405, "GET, HEAD", "method PUT is not allowed on /readyz"),
    ("DELETE", "/metrics", 405, "GET, HEAD", "method DELETE is not allowed on /metrics"),
    ("OPTIONS", "/healthz", 405, "GET, HEAD", "method OPTIONS is not allowed on /healthz"),
    ("GET", "/validate", 404, None, "no endpoint /validate; the webhook serves POST /mutate"),
    ("POST", "/admit", 404, None, "no endpoint /admit"),
]


@pytest.mark.parametrize("method, path, status, allow, fragment", REFUSALS, ids=[f"{r[0]} {r[1]}" for r in REFUSALS])
def test_every_refusal_has_the_shape_of_mutates_own(client, method, path, status, allow, fragment):
    """One JSON object {"error": ...}, the standard status line, Allow on every 405, wherever the path."""
    resp = client.open(path, method=method, data=b"{}", content_type="application/json")
    assert resp.status == f"{status} {HTTPStatus(status).phrase}"
    assert resp.mimetype == "application/json" and list(resp.get_json()) == ["error"]
    assert fragment in resp.get_json()["error"]
    assert resp.headers.get("Allow") == allow


def test_healthz_is_always_ok(client):
    assert client.get("/healthz").status_code == 200


def test_readyz_reports_the_loaded_rules(client):
    resp = client.get("/readyz")
    assert resp.status_code == 200 and resp.get_json()["rules"] == ["netqos"]


def test_readyz_is_unavailable_while_the_certificate_cannot_be_read(tmp_path):
    app = create_app(AppConfig(policy=default_policy(), certfile=tmp_path / "gone.crt", keyfile=tmp_path / "gone.key"))
    resp = app.test_client().get("/readyz")
    assert resp.status_code == 503 and "gone.crt" in resp.get_json()["error"]


LIMIT = 64 * 1024
REVIEW = json.dumps(fixture("review-create-defaulted-pod.json")).encode()


class Trickle(io.BytesIO):
    """A request body stream that hands out at most `step` bytes per read, as a socket does."""

    def __init__(self, data: bytes, step: int = 1000, fail: Exception | None = None) -> None:
        super().__init__(data)
        self.step, self.fail = step, fail

    def read(self, size=-1):
        if self.fail is not None and self.tell() >= len(self.getvalue()) // 2:
            raise self.fail
        return super().read(min(self.step, size if size >= 0 else self.step))


def call(app, body: bytes = REVIEW, length: str | None = None, chunked: bool = False, stream=None, **environ):
    """One WSGI call of POST /mutate; a chunked body arrives as gunicorn hands it over (no length,
    `wsgi.input_terminated`)."""
    env = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/mutate",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "8443",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "CONTENT_TYPE": "application/json",
        "wsgi.input": stream or Trickle(body),
        "wsgi.url_scheme": "https",
        "wsgi.errors": io.StringIO(),
        "wsgi.input_terminated": chunked,
        **environ,
    }
    if not chunked:
        env["CONTENT_LENGTH"] = str(len(body)) if length is None else length
    seen = {}

    def start_response(status, headers, exc_info=None):
        seen["status"], seen["headers"] = int(status.split()[0]), dict(headers)

    payload = b"".join(app.wsgi_app(env, start_response))
    assert seen["headers"]["Content-Type"] == "application/json"
    assert int(seen["headers"]["Content-Length"]) == len(payload)
    return seen["status"], seen["headers"], json.loads(payload)


def make(**config):
    return create_app(AppConfig(policy=default_policy(), max_body_bytes=LIMIT, **config))


@contextmanager
def expired():
    raise BodyTimeout()
    yield


@pytest.mark.parametrize(
    "case, app_config, call_args, status",
    [
        ("a review with a length", {}, {}, 200),
        ("a chunked review", {}, {"chunked": True}, 200),
        ("a review arriving in small pieces", {}, {"stream": Trickle(REVIEW, step=7)}, 200),
        ("a length that is no number", {}, {"length": "2x"}, 400),
        ("a body shorter than its length", {}, {"length": str(len(REVIEW) + 10)}, 400),
        ("a malformed chunk", {}, {"chunked": True, "stream": Trickle(REVIEW, fail=ValueError("bad chunk"))}, 400),
        ("a length over the limit", {}, {"body": b" " * (LIMIT + 1)}, 413),
        ("a chunked body over the limit", {}, {"body": b" " * (LIMIT + 1), "chunked": True}, 413),
        ("a chunked body at the limit", {}, {"body": b" " * LIMIT, "chunked": True}, 400),
        ("the body deadline passed", {"body_deadline": expired}, {}, 408),
        ("a large body over the worker's budget", {"body_budget_bytes": 16 * 1024}, {"body": b" " * 40_000}, 503),
        ("no content type", {}, {"CONTENT_TYPE": ""}, 415),
        ("GET", {}, {"REQUEST_METHOD": "GET"}, 405),
    ],
)
def test_mutate_checks_in_order_and_answers_every_client_error_with_json(case, app_config, call_args, status):
    got, headers, body = call(make(**app_config), **call_args)
    assert got == status, (case, body)
    if status == 200:
        assert body["response"]["allowed"] is True
    else:
        assert body["error"], case
    if status == 503:
        assert headers["Retry-After"] == "1"


def test_a_chunked_body_is_never_cut_at_the_limit():
    """Cut at the limit, a review padded with spaces would parse; it must be refused whole."""
    padded = REVIEW + b" " * (LIMIT - len(REVIEW) + 1)
    status, _, body = call(make(), body=padded, chunked=True)
    assert status == 413 and "limit is 65536 bytes" in body["error"]


def test_the_budget_is_given_back_after_each_answer():
    app = make(body_budget_bytes=16 * 1024)
    for _ in range(3):
        assert call(app, body=b" " * 40_000)[0] == 503
        assert call(app)[0] == 200
    handler = app.wsgi_app.mutate
    assert handler.budget.used == 0


@pytest.mark.parametrize(
    "held, small, nbytes, taken",
    [
        (0, False, 24, True),
        (20, False, 5, False),  # large bodies may not use the part reserved for small ones
        (20, True, 5, True),
        (28, True, 5, False),  # nor may small ones go over the whole budget
    ],
)
def test_the_budget_keeps_a_reserve_for_small_bodies(held, small, nbytes, taken):
    budget = BodyBudget(32, reserve=8)
    assert budget.take(held, small=True)
    assert budget.take(nbytes, small) is taken


def test_an_internal_error_is_logged_and_answered_500(monkeypatch, caplog):
    def broken(policy, body):
        raise RuntimeError("boom")

    monkeypatch.setattr(admission, "handle", broken)
    with caplog.at_level(logging.ERROR, logger="webhook.review"):
        status, _, body = call(make())
    assert status == 500 and body["error"].startswith("internal error")
    assert any(r.exc_info and "boom" in str(r.exc_info[1]) for r in caplog.records)
