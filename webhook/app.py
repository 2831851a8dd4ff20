"""The Flask application: decode the HTTP request, call `admission`, encode the answer.

Endpoints: `POST /mutate` (AdmissionReview in, AdmissionReview out), `GET /healthz` (the process
answers), `GET /readyz` (policy loaded and certificate files readable). Every error a client can
cause is a 4xx with a JSON body `{"error": "..."}`; the worker keeps serving.
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
from webhook.policy import Policy

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024

log = logging.getLogger("webhook.review")


@dataclass(frozen=True)
class AppConfig:
    policy: Policy
    certfile: Path | None = None  # checked by /readyz; None when TLS is terminated elsewhere
    keyfile: Path | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES


def create_app(config: AppConfig) -> Flask:
    app = Flask("netqos-webhook")
    app.config["MAX_CONTENT_LENGTH"] = config.max_body_bytes  # larger bodies: 413

    @app.post("/mutate")
    def mutate() -> Response:
        if request.mimetype != "application/json":
            return _error(415, f"Content-Type must be application/json, got {request.mimetype or 'none'!r}")
        return _json(*_answer(config, request.get_data(cache=False)))

    @app.get("/healthz")
    def healthz() -> Response:
        return _json(200, b'{"status":"ok"}')

    @app.get("/readyz")
    def readyz() -> Response:
        unreadable = [str(p) for p in (config.certfile, config.keyfile) if p and not os.access(p, os.R_OK)]
        if unreadable:
            return _error(503, f"certificate files not readable: {', '.join(unreadable)}")
        return _json(200, admission.encode({"status": "ready", "rules": [r.name for r in config.policy.rules]}))

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Response:
        return _error(err.code or 500, err.description or err.name)

    @app.errorhandler(Exception)
    def unexpected(err: Exception) -> Response:
        log.exception("unhandled error serving %s %s", request.method, request.path)
        return _error(500, "internal error; see the webhook's logs")

    app.wsgi_app = _FastMutate(app.wsgi_app, config)  # type: ignore[method-assign]
    return app


def _answer(config: AppConfig, body: bytes) -> tuple[int, bytes]:
    """The status and JSON body answering a review: the one implementation of POST /mutate."""
    started = time.perf_counter()
    try:
        result = admission.handle(config.policy, body)
    except admission.BadReview as err:
        log.info("rejected a malformed review: %s", err)
        return 400, admission.encode({"error": str(err)})
    if log.isEnabledFor(logging.INFO):
        log.info(
            "review uid=%s namespace=%s name=%s operation=%s dry_run=%s decision=%s rules=%s duration_ms=%.3f",
            result.uid, result.namespace, result.name, result.operation, result.dry_run,
            result.decision.value, ",".join(result.injected), (time.perf_counter() - started) * 1000,
        )
    return 200, admission.encode(result.response)


_STATUS_LINES = {200: "200 OK", 400: "400 BAD REQUEST", 500: "500 INTERNAL SERVER ERROR"}  # as werkzeug writes them


class _FastMutate:
    """WSGI middleware: the reviews the API server sends (POST /mutate, JSON, a Content-Length
    within the limit) are answered by `_answer` directly, without Flask's routing and request and
    response objects, which cost 40% of the app's instructions per review (docs/performance.md).
    Every other request, well-formed or not, goes to Flask, whose handling is the reference."""

    def __init__(self, wsgi_app: Any, config: AppConfig) -> None:
        self.wsgi_app = wsgi_app
        self.config = config

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO") == "/mutate" and environ.get("REQUEST_METHOD") == "POST":
            length = environ.get("CONTENT_LENGTH") or ""
            mimetype = (environ.get("CONTENT_TYPE") or "").split(";", 1)[0].strip().lower()
            if mimetype == "application/json" and length.isdigit() and int(length) <= self.config.max_body_bytes:
                try:
                    status, payload = _answer(self.config, environ["wsgi.input"].read(int(length)))
                except Exception:  # as Flask's handler below: log it, answer 500, keep serving
                    log.exception("unhandled error serving POST /mutate")
                    status, payload = 500, admission.encode({"error": "internal error; see the webhook's logs"})
                start_response(_STATUS_LINES[status],
                               [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
                return [payload]
        return self.wsgi_app(environ, start_response)


def _json(status: int, body: bytes) -> Response:
    return Response(body, status=status, mimetype="application/json")


def _error(status: int, message: str) -> Response:
    return _json(status, admission.encode({"error": message}))
