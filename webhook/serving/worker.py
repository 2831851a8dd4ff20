"""gunicorn's gevent worker with a deadline for every stage of a connection, and JSON errors.

Stages and their deadlines (docs/operations.md, "Hostile clients"):
1. TLS handshake, from accept: `handshake` seconds. gunicorn's gevent worker hands the listening
   socket to gevent's StreamServer with the TLS context, which does the handshake inside
   `wrap_socket` with no deadline (gevent/server.py `wrap_socket_and_handle`), so a connection that
   sends nothing held its greenlet and pool slot for ever, and a failed handshake escaped the
   greenlet as a traceback on stderr (gevent/hub.py `print_exception`). Here the worker accepts
   plain sockets and does the handshake itself under a `gevent.Timeout`; a failure is one
   (rate-limited) log line and a count (`webhook.serving.handshake`), never a traceback.
2. Idle keep-alive, between requests (and before the first): `keepalive` seconds for the first
   byte of the next request. gunicorn bounds "wait for and read the request headers" with one
   timer (`timeout_ctx` around `next(parser)` in gunicorn/workers/base_async.py); here the wait
   comes first (`_await_request`), so that timer bounds only the reading of the headers:
3. request line and headers, from their first byte: `header` seconds (`timeout_ctx`);
4. the body: `body` seconds, enforced by the application around its read of the body
   (`webhook.serving.app.AppConfig.body_deadline`), answered 408.
Unread body bytes of an answered request are drained by gunicorn before the next request
(gunicorn/http/parser.py `finish_body`), inside stage 3's timer.

A connection's age and number of requests are bounded (`webhook.serving.keepalive`, jittered):
each connection gets its budget at accept, and the request that spends it is answered with
`Connection: close`, so the client's next connection may reach another replica. The hook is
gunicorn's own way to end a kept-alive connection (gunicorn 27, gunicorn/workers/base_async.py
`AsyncWorker.handle_request`: `resp.force_close()` when the worker stops, then, once the answer is
written, `if resp.should_close(): raise StopIteration()`; gunicorn/http/wsgi.py
`Response.should_close` asks `req.should_close()`, gunicorn/http/message.py `Message.should_close`
is true once `must_close` is set, and `Response.default_headers` then writes `Connection: close`):
`handle_request` here sets `req.must_close` before gunicorn answers. gunicorn's `max_requests` is another
thing: it restarts the whole worker.

Between two requests of a connection the worker goes back to the event loop, so that its other
connections are served in turn: waiting for the next request (stage 2) does it, and when that
request has already arrived (pipelined, or decrypted and pending in the TLS layer), where reading
it would not yield, a timer does (`YIELD_SECONDS`). Without that, a worker kept serving one busy
connection while its others stalled (up to a second measured; docs/performance.md).

Each answer leaves in one write, one TLS record when it fits: gunicorn's response writer sends the
head and the body with two `sendall` calls (gunicorn/http/wsgi.py `Response.send_headers`, then
`Response.write`), which made two TLS records, two system calls and two wake-ups of the client per
answer. `OneWrite`, the connection as the writer sees it during one request, holds the head and
sends it with the body.

Capacity: the pool of each worker (`worker_connections`) is sized by the server from the file
descriptor limit (webhook.serving.server), so silent connections do not fill it before their
handshake deadline closes them.

Errors gunicorn answers itself (a malformed request line or header, a header section or URI too
large, an unsupported transfer coding) get the same JSON body `{"error": ...}` as the
application's, instead of gunicorn's HTML page (`util.write_error`), with gunicorn's status.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import ssl
import time
from dataclasses import dataclass
from typing import Any

import gevent
from gevent.pool import Pool
from gevent.server import StreamServer
from gevent.socket import wait_read
from gunicorn import util
from gunicorn.http import errors as http_errors
from gunicorn.sock import ssl_context
from gunicorn.workers.ggevent import GeventWorker

from webhook import admission
from webhook.serving.handshake import FailureLog, HandshakeTimeout
from webhook.serving.keepalive import Budget, ConnectionLimits, budget

log = logging.getLogger(__name__)


# A timer, not sleep(0): sleep(0) resumes this greenlet before the loop polls the other sockets.
YIELD_SECONDS = 0.000001


@dataclass(frozen=True)
class Deadlines:
    handshake: float
    header: float
    keepalive: float
    connections: ConnectionLimits = ConnectionLimits()


class _Connection:
    """One accepted connection: its budget and the requests it has been answered so far."""

    __slots__ = ("budget", "served")

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.served = 0


# gunicorn's client errors and the status it answers each with (gunicorn/workers/base.py
# `handle_error`); the first match wins, so subclasses come before their bases.
_CLIENT_ERRORS: tuple[tuple[type[BaseException], int, str], ...] = (
    (http_errors.LimitRequestLine, 414, "URI Too Long"),
    (http_errors.LimitRequestHeaders, 431, "Request Header Fields Too Large"),
    (http_errors.UnsupportedTransferCoding, 501, "Not Implemented"),
    (http_errors.ExpectationFailed, 417, "Expectation Failed"),
    (http_errors.ForbiddenProxyRequest, 403, "Forbidden"),
    (http_errors.InvalidResponseHeader, 0, ""),  # the application's fault: gunicorn answers 500
    (http_errors.InvalidResponseHeaderName, 0, ""),
    (http_errors.ConfigurationProblem, 0, ""),
    (http_errors.ParseException, 400, "Bad Request"),
)


def hardened_worker(deadlines: Deadlines) -> type[GeventWorker]:
    """The worker class for gunicorn's `worker_class` setting, with `deadlines` bound into it
    (gunicorn builds the worker itself, from the class)."""

    class Worker(HardenedGeventWorker):
        pass

    Worker.__name__ = Worker.__qualname__ = HardenedGeventWorker.__name__  # as gunicorn's log names it

    Worker.deadlines = deadlines
    return Worker


class HardenedGeventWorker(GeventWorker):
    deadlines = Deadlines(handshake=10.0, header=10.0, keepalive=120.0)

    def init_process(self) -> None:
        self.handshake_failures = FailureLog(time.monotonic)
        self.connections: dict[Any, _Connection] = {}  # by the socket gunicorn's handle() serves
        self.rng = random.Random()  # seeded from the OS in each worker, not inherited through fork
        super().init_process()

    def run(self) -> None:
        """GeventWorker.run with the TLS handshake taken out of StreamServer (stage 1). The rest,
        graceful shutdown included, is GeventWorker.run's: it is called with no server of its own
        left to start (`_servers` started here, `run_servers` below)."""
        gevent.get_hub().print_exception = self._hub_error  # gevent's last resort: one JSON line
        # gunicorn's `ssl_context` hook (webhook.serving.server): this worker's one context.
        context = ssl_context(self.cfg) if self.cfg.is_ssl else None
        self._servers = []
        for listener in self.sockets:
            listener.setblocking(1)
            handle = functools.partial(self._accepted, listener, context)
            server = StreamServer(listener, handle=handle, spawn=Pool(self.worker_connections))
            if self.cfg.workers > 1:
                server.max_accept = 1  # as GeventWorker.run: leave the next connection to another worker
            server.start()
            self._servers.append(server)
        self._serve_until_stopped()

    def _serve_until_stopped(self) -> None:
        # GeventWorker.run's loop and graceful shutdown (gunicorn/workers/ggevent.py), unchanged.
        while self.alive:
            self.notify()
            gevent.sleep(1.0)
        try:
            for server in self._servers:
                server.close()
            started = time.time()
            while time.time() - started <= self.cfg.graceful_timeout:
                if all(server.pool.free_count() == server.pool.size for server in self._servers):
                    return
                self.notify()
                gevent.sleep(1.0)
            self.log.warning("Worker graceful timeout (pid:%s)", self.pid)
            for server in self._servers:
                server.stop(timeout=1)
        except Exception:
            pass

    def _accepted(self, listener: Any, context: ssl.SSLContext | None, client: Any, addr: Any) -> None:
        accepted_at = time.monotonic()
        client.setblocking(1)
        sock = self._handshake(context, client, addr) if context is not None else client
        if sock is None:
            return
        if not self._await_request(sock, None):
            util.close(sock)
            return
        self.connections[sock] = _Connection(budget(self.deadlines.connections, accepted_at, self.rng))
        try:
            self.handle(listener, sock, addr)  # gunicorn's: parse, call the app, keep alive
        finally:
            del self.connections[sock]

    def _handshake(self, context: ssl.SSLContext, client: Any, addr: Any) -> Any:
        tls = None
        try:
            with gevent.Timeout(self.deadlines.handshake, HandshakeTimeout()):
                # Until the ClientHello arrives the connection holds no TLS state: a silent
                # connection costs half the memory (docs/operations.md, "Hostile clients").
                wait_read(client.fileno())
                tls = context.wrap_socket(client, server_side=True, do_handshake_on_connect=False)
                tls.do_handshake()
            return tls
        except (HandshakeTimeout, OSError) as err:  # ssl.SSLError is an OSError
            self.handshake_failures.failed(err, _peer(addr))
        util.close(tls or client)
        return None

    def _await_request(self, sock: Any, req: Any) -> bool:
        """Stage 2: True when the next request has begun to arrive within the keep-alive time.
        Either way the event loop runs first (see the module docstring)."""
        unreader = getattr(req, "unreader", None)
        buffered = getattr(unreader, "buf", None)
        if (buffered is not None and buffered.seek(0, os.SEEK_END)) or (
            isinstance(sock, ssl.SSLSocket) and sock.pending()
        ):
            gevent.sleep(YIELD_SECONDS)  # already here (read, or decrypted): reading would not yield
            return True
        try:
            wait_read(sock.fileno(), timeout=self.deadlines.keepalive)  # yields while it waits
        except (TimeoutError, OSError, ValueError):
            return False
        return True

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> None:
        connection = self.connections.get(sock)
        if connection is not None:
            connection.served += 1
            if connection.budget.spent(time.monotonic(), connection.served):
                req.must_close = True  # answered with `Connection: close`, then closed (module docstring)
        answer = OneWrite(sock)
        try:
            super().handle_request(listener_name, req, answer, addr)
        finally:
            answer.flush()  # a head without a body (HEAD, 204), held until the answer is complete
        if self.alive and not self._await_request(sock, req):
            raise StopIteration()  # gunicorn's way out of its keep-alive loop (base_async.handle)

    def timeout_ctx(self) -> gevent.Timeout:
        """Stage 3: gunicorn enters this around reading each request's line and headers."""
        return gevent.Timeout(self.deadlines.header, False)

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        status, reason = next(((s, r) for kind, s, r in _CLIENT_ERRORS if isinstance(exc, kind)), (0, ""))
        if not status:
            super().handle_error(req, client, addr, exc)  # a bug: gunicorn logs it and answers 500
            return
        log.warning(
            "refused a malformed HTTP request: %s",
            str(exc)[:200] or type(exc).__name__,
            extra={"peer": _peer(addr), "status": status},
        )
        body = admission.encode({"error": f"{reason}: {str(exc)[:200] or type(exc).__name__}"})
        head = f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
        try:
            util.write_nonblock(client, f"{head}Content-Length: {len(body)}\r\n\r\n".encode("latin-1") + body)
        except Exception:
            log.debug("could not send the error answer")

    def _hub_error(self, context: Any, kind: Any, value: Any, tb: Any) -> None:
        log.error("error in an event-loop callback: %s", context, exc_info=(kind, value, tb))


class OneWrite:
    """A connection as gunicorn's response writer sees it while it answers one request: the first
    `sendall` (the response head) is held and sent with the second (the body, or its first chunk),
    in one write; later ones pass straight through. `flush` sends what is still held; the
    answer's owner calls it once the request is done. Anything else asked of the connection
    (`send` for "100 Continue", `sendfile`, ...) first sends what is held, so bytes keep their
    order; `shutdown` and `close`, gunicorn's way to cut off an answer that failed half-way, drop it."""

    __slots__ = ("_sock", "_held", "_holding")

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._held = b""
        self._holding = True

    def sendall(self, data: bytes) -> None:
        if self._holding:
            self._holding = False
            self._held = bytes(data)
            return
        held, self._held = self._held, b""
        self._sock.sendall(held + data if held else data)

    def flush(self) -> None:
        held, self._held = self._held, b""
        if held:
            self._sock.sendall(held)

    def shutdown(self, how: int) -> None:
        self._held = b""
        self._sock.shutdown(how)

    def close(self) -> None:
        self._held = b""
        self._sock.close()

    def __getattr__(self, name: str) -> Any:
        self.flush()
        return getattr(self._sock, name)


def _peer(addr: Any) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return str(addr)
