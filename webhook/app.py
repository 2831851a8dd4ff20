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
        started = time.perf_counter()
        try:
            result = admission.handle(config.policy, request.get_data(cache=False))
        except admission.BadReview as err:
            log.info("rejected a malformed review: %s", err)
            return _error(400, str(err))
        if log.isEnabledFor(logging.INFO):
            log.info(
                "review uid=%s namespace=%s name=%s operation=%s dry_run=%s decision=%s rules=%s duration_ms=%.3f",
                result.uid, result.namespace, result.name, result.operation, result.dry_run,
                result.decision.value, ",".join(result.injected), (time.perf_counter() - started) * 1000,
            )
        return Response(admission.encode(result.response), mimetype="application/json")

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

    return app


def _json(status: int, body: bytes) -> Response:
    return Response(body, status=status, mimetype="application/json")


def _error(status: int, message: str) -> Response:
    return _json(status, admission.encode({"error": message}))
