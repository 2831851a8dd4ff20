"""The WSGI application: `POST /mutate` in one handler; Flask for the GET endpoints.

`/mutate` (AdmissionReview in, AdmissionReview out) is answered by `MutateHandler`, one WSGI-level
function with its checks in order, as controller-runtime's `Webhook.ServeHTTP`: method (405),
content type (415), length (400 when unreadable, 413 over `max_body_bytes`), then the body is read
within the limit (a chunked body over it is 413, never cut short), within the body deadline (408)
and within the worker's body budget (503 with `Retry-After`), and the review answered (200, or 400
when the body is no usable AdmissionReview). A malformed chunk or a body shorter than its
Content-Length is 400. Every one of these is a JSON body `{"error": "..."}`, counted and logged
once; only a bug of ours is a 500 (counted as decision `error`). The worker keeps serving.

Each review takes one policy snapshot and uses it to the end (`webhook.serving.reload`), and
leaves one log line and its metrics (`webhook.serving.metrics`).

`/validate-policy` (the policy ConfigMap, reviewed when it is written: `webhook.policy_review`)
goes through the same checks with its own answer.

The GET endpoints stay on Flask: `/healthz` (the process answers), `/readyz` (policy loaded and
certificate files readable; names the policy version), `/policy` (the policy this worker serves:
its source, hash, rules and document, and whether the file on disk was refused), `/metrics`
(Prometheus), and JSON 404/405 for any other path. They are called every few seconds by the
kubelet and Prometheus, not per pod, so Flask's routing costs nothing that matters there; the
review path never enters Flask, whose request and response objects cost 40% of a review's
instructions (docs/performance.md).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from webhook import admission, policy_review
from webhook.names import DEFAULT_BODY_BUDGET_BYTES, DEFAULT_MAX_BODY_BYTES
from webhook.policy import Decision, Policy
from webhook.serving import metrics
from webhook.serving.reload import PolicyWatcher, static_snapshot

# The part of the budget only bodies up to SMALL_BODY_BYTES may use: a few large slow bodies cannot
# take the budget from the ordinary reviews (a few KiB each) that arrive beside them.
SMALL_BODY_BYTES = 64 * 1024
RESERVED_FOR_SMALL_BODIES = 8 * 1024 * 1024
READ_STEP = 64 * 1024  # bytes asked of the stream at a time, and taken from the budget
RETRY_AFTER_SECONDS = "1"
MAX_ERROR_CHARS = 500  # an error echoes parts of the request: keep logs and answers bounded
INTERNAL_ERROR = "internal error; see the webhook's logs"
ENDPOINTS = (
    "the webhook serves POST /mutate, POST /validate-policy, GET /healthz, GET /readyz, GET /policy and GET /metrics"
)
BUDGET_FULL = "this worker holds as many request bodies as its memory budget allows; retry"

log = logging.getLogger("webhook.review")

StartResponse = Callable[..., Any]
Headers = list[tuple[str, str]]


class BodyTimeout(Exception):
    """Raised into a body read by the serving layer when the body deadline passes."""


class BodyTooLarge(Exception):
    """Raised by the server's body reader when the body declares more than the limit (a chunk
    size line), before its bytes arrive; the message says what was declared."""


@dataclass(frozen=True)
class AppConfig:
    policy: Policy
    certfile: Path | None = None  # checked by /readyz; None when TLS is terminated elsewhere
    keyfile: Path | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    watcher: PolicyWatcher | None = None  # serve: reloads the policy file; else `policy` is fixed
    body_budget_bytes: int = DEFAULT_BODY_BUDGET_BYTES
    # Entered around the read of each body; the server's raises BodyTimeout at the body deadline.
    body_deadline: Callable[[], AbstractContextManager[object]] | None = None


class BodyBudget:
    """The request-body bytes one worker holds at once, bounded.

    A body takes from the budget as its bytes arrive and gives them back once answered, so a
    client that declares a large Content-Length and sends nothing holds nothing. Bodies larger
    than SMALL_BODY_BYTES may use all but `reserve`. One per worker; the gevent worker runs one
    greenlet at a time and none yields inside `take`, so no lock (under gthread a race may let a
    body over by one step, not more).
    """

    def __init__(self, limit: int, reserve: int = RESERVED_FOR_SMALL_BODIES) -> None:
        self.limit = limit
        self.reserve = min(reserve, limit // 2)
        self.used = 0

    @staticmethod
    def smallest_for(max_body_bytes: int, reserve: int = RESERVED_FOR_SMALL_BODIES) -> int:
        """The smallest budget in which a body of `max_body_bytes` fits beside the reserve: a
        smaller one would answer every body near the limit 503, for ever."""
        return 2 * max_body_bytes if max_body_bytes <= reserve else max_body_bytes + reserve

    def take(self, nbytes: int, small: bool) -> bool:
        ceiling = self.limit if small else self.limit - self.reserve
        if self.used + nbytes > ceiling:
            return False
        self.used += nbytes
        return True

    def give(self, nbytes: int) -> None:
        self.used -= nbytes


class _Refused(Exception):
    """A /mutate request answered without a review: a 4xx (or 503) with a JSON reason."""

    def __init__(self, status: int, message: str, headers: Headers | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or []


_STATUS_LINES = {s.value: f"{s.value} {s.phrase}" for s in HTTPStatus}
_JSON = ("Content-Type", "application/json")


Answer = Callable[[PolicyWatcher, bytes, float], tuple[int, bytes]]


class MutateHandler:
    """WSGI: every request to /mutate, whatever its method or shape. See the module docstring.
    The same checks, in the same order, serve /validate-policy with another `answer` (and the
    same body budget: one worker's request bodies are bounded together)."""

    def __init__(
        self,
        config: AppConfig,
        watcher: PolicyWatcher,
        path: str = "/mutate",
        answer: Answer | None = None,
        budget: BodyBudget | None = None,
    ) -> None:
        self.max_body_bytes = config.max_body_bytes
        self.budget = budget or BodyBudget(config.body_budget_bytes)
        self.deadline = config.body_deadline
        self.watcher = watcher
        self.path = path
        self.answer = answer or _answer

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        started = time.perf_counter()
        held = [0]  # budget bytes this request holds, given back once it is answered
        headers: Headers = []
        try:
            status, payload = self.answer(self.watcher, self._body(environ, held), started)
        except _Refused as refused:
            status, payload = _invalid_answer(refused.status, str(refused), started)
            headers = refused.headers
        except Exception:  # a bug of ours: log it, count it, answer 500, keep serving
            log.exception("unhandled error serving %s %s", environ.get("REQUEST_METHOD"), self.path)
            metrics.observe_review(Decision.ERROR, "", False, (), 0.0)
            status, payload = 500, admission.encode({"error": INTERNAL_ERROR})
        finally:
            self.budget.give(held[0])
        start_response(_STATUS_LINES[status], [_JSON, ("Content-Length", str(len(payload))), *headers])
        return [payload]

    def _body(self, environ: dict[str, Any], held: list[int]) -> bytes:
        """The request body, after the checks that need no byte of it; raises _Refused."""
        method = environ.get("REQUEST_METHOD")
        if method != "POST":
            raise _Refused(
                405, f"method {method} is not allowed on {self.path}; POST an AdmissionReview", [("Allow", "POST")]
            )
        mimetype = (environ.get("CONTENT_TYPE") or "").split(";", 1)[0].strip().lower()
        if not mimetype:
            raise _Refused(415, "the Content-Type header is missing; send the AdmissionReview as application/json")
        if mimetype != "application/json":
            raise _Refused(415, f"Content-Type must be application/json, got {mimetype!r}")
        declared = environ.get("CONTENT_LENGTH") or ""
        if declared:
            if not declared.isdigit():
                raise _Refused(400, f"Content-Length {declared!r} is not a number of bytes")
            length = int(declared)
            if length > self.max_body_bytes:
                raise _Refused(413, self._too_large(f"{length} bytes"))
            return self._read(environ["wsgi.input"], length, held)
        if environ.get("wsgi.input_terminated"):  # chunked: gunicorn decodes it and ends the stream
            return self._read(environ["wsgi.input"], None, held)
        return b""  # no length and no end: no body (as werkzeug reads it)

    def _read(self, stream: Any, length: int | None, held: list[int]) -> bytes:
        """`length` bytes, or (None) up to the end of a chunked body, one more than the limit at
        most: more than the limit is 413, never a body cut short."""
        wanted = self.max_body_bytes + 1 if length is None else length
        chunks: list[bytes] = []
        try:
            if self.deadline is None:
                got = self._read_into(chunks, stream, wanted, held)
            else:
                with self.deadline():
                    got = self._read_into(chunks, stream, wanted, held)
        except _Refused:
            raise
        except BodyTimeout:
            received = _received(stream, held[0])
            raise _Refused(408, f"the request body did not arrive in time ({received} bytes received)") from None
        except BodyTooLarge as err:
            raise _Refused(413, self._too_large(str(err))) from None
        except Exception as err:  # the server's body reader: a malformed chunk, a broken connection
            raise _Refused(400, f"cannot read the request body: {type(err).__name__}: {err}") from None
        if got > self.max_body_bytes:
            raise _Refused(413, self._too_large(f"a chunked body of more than {self.max_body_bytes} bytes"))
        if length is not None and got < length:
            raise _Refused(400, f"the request body ended after {got} of its {length} bytes (Content-Length)")
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _read_into(self, chunks: list[bytes], stream: Any, wanted: int, held: list[int]) -> int:
        """Read up to `wanted` bytes into `chunks`, each step taken from the budget first; the
        bytes read. Past the limit (a chunked body) the read stops, before the budget is asked."""
        got = 0
        while got < wanted:
            chunk = stream.read(min(READ_STEP, wanted - got))
            if not chunk:
                break
            got += len(chunk)
            if got > self.max_body_bytes:
                break
            if not self.budget.take(len(chunk), got <= SMALL_BODY_BYTES):
                raise _Refused(503, BUDGET_FULL, [("Retry-After", RETRY_AFTER_SECONDS)])
            held[0] = got
            chunks.append(chunk)
        return got

    def _too_large(self, what: str) -> str:
        return f"request body too large: {what}; the limit is {self.max_body_bytes} bytes (--max-body-bytes)"


def _received(stream: Any, read: int) -> int:
    """The body bytes that arrived: the server's count when its stream keeps one (a read blocks
    until it has all it asked for, so `read` misses a slow body's last partial step)."""
    received_bytes = getattr(stream, "received_bytes", None)
    return max(read, received_bytes()) if callable(received_bytes) else read


def create_app(config: AppConfig) -> Flask:
    app = Flask("netqos-webhook")
    watcher = config.watcher or PolicyWatcher(static_snapshot(config.policy), None)
    watcher.current()  # publishes the policy metrics of this process (the worker) at start

    @app.get("/healthz", provide_automatic_options=False)
    def healthz() -> Response:
        return _json(200, b'{"status":"ok"}')

    @app.get("/readyz", provide_automatic_options=False)
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

    @app.get("/policy", provide_automatic_options=False)
    def policy() -> Response:
        # What this worker serves, read-only: `status` reads it through the API server's pod proxy
        # to tell the policy in force from an invalid ConfigMap the webhook refused.
        snapshot = watcher.current()
        served = {**snapshot.describe(), "file_refused": watcher.file_refused}
        return _json(200, admission.encode({**served, "document": snapshot.data.decode("utf-8", "replace")}))

    @app.get("/metrics", provide_automatic_options=False)
    def metrics_() -> Response:
        body, content_type = metrics.render(request.headers.get("Accept"))
        return Response(body, content_type=content_type)

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Response:
        # Worded and shaped as /mutate's refusals: the same JSON, status line and Allow header.
        if isinstance(err, MethodNotAllowed):
            allowed = ", ".join(sorted(err.valid_methods or ()))
            message = f"method {request.method} is not allowed on {request.path}; use {allowed}"
            return _error(405, message, [("Allow", allowed)])
        if err.code == 404:
            return _error(404, f"no endpoint {request.path}; {ENDPOINTS}")
        return _error(err.code or 500, err.description or err.name)

    @app.errorhandler(Exception)
    def unexpected(err: Exception) -> Response:
        log.exception("unhandled error serving %s %s", request.method, request.path)
        return _error(500, INTERNAL_ERROR)

    mutate = MutateHandler(config, watcher)
    validate = MutateHandler(config, watcher, policy_review.PATH, _validate_policy, mutate.budget)
    app.wsgi_app = _Routes({"/mutate": mutate, policy_review.PATH: validate}, app.wsgi_app)  # type: ignore[method-assign]
    return app


class _Routes:
    """/mutate and /validate-policy to their handlers, everything else to Flask."""

    def __init__(
        self, handlers: dict[str, MutateHandler], other: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
    ):
        self.handlers = handlers
        self.other = other

    @property
    def mutate(self) -> MutateHandler:
        return self.handlers["/mutate"]

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        handler = self.handlers.get(environ.get("PATH_INFO") or "")
        if handler is not None:
            return handler(environ, start_response)
        return self.other(environ, start_response)


def _answer(watcher: PolicyWatcher, body: bytes, started: float) -> tuple[int, bytes]:
    """The status and JSON body answering a review. One policy snapshot for the whole review;
    one log line and the metrics for it."""
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


def _validate_policy(watcher: PolicyWatcher, body: bytes, started: float) -> tuple[int, bytes]:
    """The answer to a review of the policy ConfigMap (`webhook.policy_review`): its key the
    webhook reads is compiled as the webhook compiles its --config file, so a denial carries the
    message the webhook would log when it refused the file; one log line each."""
    source = watcher.watching or f"/config/{policy_review.POLICY_KEY}"
    try:
        verdict = policy_review.review(admission.decode(body), Path(source).name, source)
    except admission.BadReview as err:
        return _invalid_answer(400, str(err), started)
    log.log(
        logging.INFO if verdict.allowed else logging.WARNING,
        "policy ConfigMap %s: %s",
        verdict.name,
        "valid" if verdict.allowed else "denied",
        extra={"config_map": verdict.name, "allowed": verdict.allowed, "error": _short(verdict.message)},
    )
    return 200, admission.encode(verdict.response)


def _invalid_answer(status: int, message: str, started: float) -> tuple[int, bytes]:
    """A request to /mutate that carries no usable AdmissionReview: counted, logged, a 4xx."""
    metrics.observe_invalid(time.perf_counter() - started)
    log.info("rejected a malformed review", extra={"status": status, "error": _short(message)})
    return status, admission.encode({"error": _short(message)})


def _short(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def _json(status: int, body: bytes, headers: Headers | None = None) -> Response:
    return Response(body, status=_STATUS_LINES[status], mimetype="application/json", headers=headers)


def _error(status: int, message: str, headers: Headers | None = None) -> Response:
    return _json(status, admission.encode({"error": _short(message)}), headers)
