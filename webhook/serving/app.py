"""The Flask application: decode the HTTP request, call `admission`, encode the answer.

Endpoints: `POST /mutate` (AdmissionReview in, AdmissionReview out), `GET /healthz` (the process
answers), `GET /readyz` (policy loaded and certificate files readable; names the policy version),
`GET /metrics` (Prometheus). Every error a client can cause is a 4xx with a JSON body
`{"error": "..."}`; the worker keeps serving. Each review takes one policy snapshot and uses it to
the end (`webhook.serving.reload`), and leaves one log line and its metrics (`webhook.serving.metrics`).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from webhook import admission
from webhook.names import DEFAULT_MAX_BODY_BYTES
from webhook.policy import Decision, Policy
from webhook.serving import metrics
from webhook.serving.reload import PolicyWatcher, static_snapshot

MAX_ERROR_CHARS = 500  # an error echoes parts of the request: keep logs and answers bounded

log = logging.getLogger("webhook.review")


@dataclass(frozen=True)
class AppConfig:
    policy: Policy
    certfile: Path | None = None  # checked by /readyz; None when TLS is terminated elsewhere
    keyfile: Path | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    watcher: PolicyWatcher | None = None  # serve: reloads the policy file; else `policy` is fixed


def create_app(config: AppConfig) -> Flask:
    app = Flask("netqos-webhook")
    app.config["MAX_CONTENT_LENGTH"] = config.max_body_bytes  # larger bodies: 413
    watcher = config.watcher or PolicyWatcher(static_snapshot(config.policy), None)
    watcher.current()  # publishes the policy metrics of this process (the worker) at start

    @app.post("/mutate")
    def mutate() -> Response:
        started = time.perf_counter()
        if request.mimetype != "application/json":
            return _invalid(415, f"Content-Type must be application/json, got {request.mimetype or 'none'!r}", started)
        return _json(*_answer(watcher, request.get_data(cache=False), started))

    @app.get("/healthz")
    def healthz() -> Response:
        return _json(200, b'{"status":"ok"}')

    @app.get("/readyz")
    def readyz() -> Response:
        unreadable = [str(p) for p in (config.certfile, config.keyfile) if p and not os.access(p, os.R_OK)]
        if unreadable:
            return _error(503, f"certificate files not readable: {', '.join(unreadable)}")
        snapshot = watcher.current()
        return _json(
            200,
            admission.encode(
                {"status": "ready", "rules": [r.name for r in snapshot.policy.rules], "policy": snapshot.describe()}
            ),
        )

    @app.get("/metrics")
    def metrics_() -> Response:
        body, content_type = metrics.render(request.headers.get("Accept"))
        return Response(body, content_type=content_type)

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Response:
        if request.path == "/mutate":  # 405, 413 and the like: no usable review
            return _json(*_invalid_answer(err.code or 500, err.description or err.name, None))
        return _error(err.code or 500, err.description or err.name)

    @app.errorhandler(Exception)
    def unexpected(err: Exception) -> Response:
        log.exception("unhandled error serving %s %s", request.method, request.path)
        if request.path == "/mutate":  # a bug of ours; the API server admits the pod (Ignore)
            metrics.observe_review(Decision.ERROR, "", False, (), 0.0)
        return _error(500, "internal error; see the webhook's logs")

    app.wsgi_app = _FastMutate(app.wsgi_app, config, watcher)  # type: ignore[method-assign]
    return app


def _answer(watcher: PolicyWatcher, body: bytes, started: float) -> tuple[int, bytes]:
    """The status and JSON body answering a review: the one implementation of POST /mutate.
    One policy snapshot for the whole review; one log line and the metrics for it."""
    snapshot = watcher.current()  # one whole policy for this review, old or new
    try:
        result = admission.handle(snapshot.policy, body)
    except admission.BadReview as err:
        return _invalid_answer(400, str(err), started)
    payload = admission.encode(result.response)
    seconds = time.perf_counter() - started
    metrics.observe_review(result.decision, result.operation, result.dry_run, result.injected, seconds)
    if log.isEnabledFor(logging.INFO):
        log.info(
            "review",
            extra={
                "uid": result.uid,
                "namespace": result.namespace,
                "object_name": result.name,
                "operation": result.operation,
                "dry_run": result.dry_run,
                "decision": result.decision.value,
                "rules": list(result.injected),
                "duration_ms": round(seconds * 1000, 3),
                "policy_version": snapshot.version,
            },
        )
    if result.patch and log.isEnabledFor(logging.DEBUG):  # objects only at debug
        log.debug("patch", extra={"uid": result.uid, "patch": result.patch})
    return 200, payload


def _invalid_answer(status: int, message: str, started: float | None) -> tuple[int, bytes]:
    """A request to /mutate that carries no usable AdmissionReview: counted, logged, a 4xx."""
    metrics.observe_invalid(time.perf_counter() - started if started else 0.0)
    log.info("rejected a malformed review", extra={"status": status, "error": _short(message)})
    return status, admission.encode({"error": _short(message)})


def _invalid(status: int, message: str, started: float | None) -> Response:
    return _json(*_invalid_answer(status, message, started))


def _short(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


_STATUS_LINES = {200: "200 OK", 400: "400 BAD REQUEST", 500: "500 INTERNAL SERVER ERROR"}  # as werkzeug writes them


class _FastMutate:
    """WSGI middleware: the reviews the API server sends (POST /mutate, JSON, a Content-Length
    within the limit) are answered by `_answer` directly, without Flask's routing and request and
    response objects, which cost 40% of the app's instructions per review (docs/performance.md).
    Every other request, well-formed or not, goes to Flask, whose handling is the reference."""

    def __init__(self, wsgi_app: Any, config: AppConfig, watcher: PolicyWatcher) -> None:
        self.wsgi_app = wsgi_app
        self.config = config
        self.watcher = watcher

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO") == "/mutate" and environ.get("REQUEST_METHOD") == "POST":
            length = environ.get("CONTENT_LENGTH") or ""
            mimetype = (environ.get("CONTENT_TYPE") or "").split(";", 1)[0].strip().lower()
            if mimetype == "application/json" and length.isdigit() and int(length) <= self.config.max_body_bytes:
                started = time.perf_counter()
                try:
                    status, payload = _answer(self.watcher, environ["wsgi.input"].read(int(length)), started)
                except Exception:  # as Flask's handler below: log it, count it, answer 500, keep serving
                    log.exception("unhandled error serving POST /mutate")
                    metrics.observe_review(Decision.ERROR, "", False, (), 0.0)
                    status, payload = 500, admission.encode({"error": "internal error; see the webhook's logs"})
                start_response(
                    _STATUS_LINES[status], [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
                )
                return [payload]
        return self.wsgi_app(environ, start_response)


def _json(status: int, body: bytes) -> Response:
    return Response(body, status=status, mimetype="application/json")


def _error(status: int, message: str) -> Response:
    return _json(status, admission.encode({"error": _short(message)}))
