"""The Flask application: decode the HTTP request, call `admission`, encode the answer.

Endpoints: `POST /mutate` (AdmissionReview in, AdmissionReview out), `GET /healthz` (the process
answers), `GET /readyz` (policy loaded and certificate files readable; names the policy version),
`GET /metrics` (Prometheus). Every error a client can cause is a 4xx with a JSON body
`{"error": "..."}`; the worker keeps serving. Each review takes one policy snapshot and uses it to
the end (`webhook.reload`), and leaves one log line and its metrics (`webhook.metrics`).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from webhook import admission, metrics
from webhook.policy import Decision, Policy
from webhook.reload import PolicyWatcher, static_snapshot

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
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
        snapshot = watcher.current()  # one whole policy for this review, old or new
        try:
            result = admission.handle(snapshot.policy, request.get_data(cache=False))
        except admission.BadReview as err:
            return _invalid(400, str(err), started)
        body = admission.encode(result.response)
        seconds = time.perf_counter() - started
        metrics.observe_review(result.decision, result.operation, result.dry_run, result.injected, seconds)
        if log.isEnabledFor(logging.INFO):
            log.info("review", extra={
                "uid": result.uid, "namespace": result.namespace, "object_name": result.name,
                "operation": result.operation, "dry_run": result.dry_run, "decision": result.decision.value,
                "rules": list(result.injected), "duration_ms": round(seconds * 1000, 3),
                "policy_version": snapshot.version,
            })
        if result.patch and log.isEnabledFor(logging.DEBUG):  # objects only at debug
            log.debug("patch", extra={"uid": result.uid, "patch": result.patch})
        return Response(body, mimetype="application/json")

    @app.get("/healthz")
    def healthz() -> Response:
        return _json(200, b'{"status":"ok"}')

    @app.get("/readyz")
    def readyz() -> Response:
        unreadable = [str(p) for p in (config.certfile, config.keyfile) if p and not os.access(p, os.R_OK)]
        if unreadable:
            return _error(503, f"certificate files not readable: {', '.join(unreadable)}")
        snapshot = watcher.current()
        return _json(200, admission.encode(
            {"status": "ready", "rules": [r.name for r in snapshot.policy.rules], "policy": snapshot.describe()}
        ))

    @app.get("/metrics")
    def metrics_() -> Response:
        body, content_type = metrics.render(request.headers.get("Accept"))
        return Response(body, content_type=content_type)

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Response:
        if request.path == "/mutate":  # 405, 413 and the like: no usable review
            return _invalid(err.code or 500, err.description or err.name, None)
        return _error(err.code or 500, err.description or err.name)

    @app.errorhandler(Exception)
    def unexpected(err: Exception) -> Response:
        log.exception("unhandled error serving %s %s", request.method, request.path)
        if request.path == "/mutate":  # a bug of ours; the API server admits the pod (Ignore)
            metrics.observe_review(Decision.ERROR, "", False, (), 0.0)
        return _error(500, "internal error; see the webhook's logs")

    return app


def _json(status: int, body: bytes) -> Response:
    return Response(body, status=status, mimetype="application/json")


def _invalid(status: int, message: str, started: float | None) -> Response:
    """A request to /mutate that carries no usable AdmissionReview: counted, logged, a 4xx."""
    metrics.observe_invalid(time.perf_counter() - started if started else 0.0)
    log.info("rejected a malformed review", extra={"status": status, "error": _short(message)})
    return _error(status, message)


def _short(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def _error(status: int, message: str) -> Response:
    message = _short(message)
    return _json(status, admission.encode({"error": message}))
