"""Serving: gunicorn, in-process through its application API, over TLS.

Worker settings are chosen for the API server as the client; docs/performance.md has the
measurements behind each one:
- worker class `gevent`: the API server keeps up to 25 idle keep-alive connections per host and,
  after a burst, leaves freshly handshaken connections idle. Under `sync` or `gthread` each such
  connection holds a worker or a thread until the client speaks, and real reviews queue behind
  them for seconds (with 50 such connections open, reviews time out at 10 s); under gevent an
  idle connection is a parked greenlet (reviews answered in milliseconds).
- the event loop runs between two requests of a connection (`webhook.serving.worker`): a gevent
  worker otherwise keeps serving one keep-alive connection for as long as its next request is
  already waiting, and the worker's other connections stall (up to 0.65 s measured with 4 busy
  connections; 25 ms with the yield);
- keep-alive 120 s: longer than the API server's 90 s idle timeout, so it is always the client
  that retires an idle connection, and a pause between bursts costs no new TLS handshake.
- a busy connection is retired by the server after ~60 s or ~1,000 requests (jittered), answering
  its last request with `Connection: close` (`webhook.serving.keepalive`): the API server's new
  connection may reach a replica that became Ready since, so added replicas take a share of the load.
- `SO_REUSEPORT`, one listening socket per worker: the kernel spreads new connections over the
  workers by hash. With one shared socket, the worker that wakes first can take every connection
  of a burst and keep them (kept alive) on one core (1 run in 8 measured). `check_bind` fails
  fast when the address is taken, since a reuse-port bind would otherwise share it silently.
- one TLS context per worker, built once (`_worker_tls_context`); no TLS session
  tickets (the API server never resumes a session; tickets cost ~25% of a handshake). It is the
  front of the worker's `webhook.serving.tls.CertificateRotator`: a rotated certificate reaches new
  connections through its SNI callback, without a restart (docs/operations.md says why this and
  not `load_cert_chain` into the live context). `--client-ca` is gunicorn's own `ca_certs`.
- the gevent worker class is `webhook.serving.worker`'s: a deadline for the TLS handshake, the
  request headers and the body (`--handshake-timeout`, `--header-timeout`, `--body-timeout`),
  failed handshakes as one rate-limited JSON line, gunicorn's own error answers as JSON, each
  answer's head and body in one write (one TLS record);
  `worker_connections` from the open-files limit, raised to the hard limit at start;
  `forwarded_allow_ips` empty: no proxy sits in front, so no peer's forwarding headers count.
- operations wiring (`webhook.serving.metrics`, `.logs`, `.reload`): the master empties the
  metrics directory before the workers start and drops a dead worker's live gauges in
  `child_exit`; gunicorn's own log lines use the webhook's formatter (`gunicorn_logger`); each
  worker serves the policy snapshot of its `PolicyWatcher`.
- temporary directories (`webhook.serving.tempdirs`): the metrics directory without `--metrics-dir`
  and the workers' shared policy carry an owner record the master keeps locked; at start the
  master removes those of earlier masters that were killed before they could clean up.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import signal
import socket
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gunicorn.app.base import BaseApplication

from webhook.errors import NetqosError
from webhook.names import (
    DEFAULT_BIND,
    DEFAULT_BODY_BUDGET_BYTES,
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_CONNECTION_JITTER,
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_KEEPALIVE_SECONDS,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONNECTION_AGE,
    DEFAULT_MAX_CONNECTION_REQUESTS,
    DEFAULT_WORKERS,
)
from webhook.policy import Policy
from webhook.serving import bodies, metrics, tempdirs
from webhook.serving.app import (
    AppConfig,
    BodyTimeout,
    create_app,
)
from webhook.serving.logs import gunicorn_logger
from webhook.serving.reload import LastGood, PolicyWatcher
from webhook.serving.tls import CertificateRotator, TLSFiles

DEFAULT_REUSE_PORT = True  # one listening socket per worker: connections spread over workers
# Connections per worker: as many as the file descriptor limit allows, up to this many, which fit
# the Deployment's memory limit at ~25 KiB per idle TLS connection (~11 KiB before its handshake);
# docs/operations.md, "Hostile clients". Beyond it, connections wait in the listen backlog.
MAX_WORKER_CONNECTIONS = 2048
RESERVED_FDS = 64

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeOptions:
    certfile: Path
    keyfile: Path
    bind: str = DEFAULT_BIND
    workers: int = DEFAULT_WORKERS
    worker_class: str = "gevent"
    threads: int = 1  # only the gthread worker class uses threads
    keepalive: int = DEFAULT_KEEPALIVE_SECONDS
    reuse_port: bool = DEFAULT_REUSE_PORT
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    body_budget_bytes: int = DEFAULT_BODY_BUDGET_BYTES  # request-body bytes one worker holds at once
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    # a kept-alive connection's age and requests, jittered; then `Connection: close` (gevent workers)
    max_connection_age: float = DEFAULT_MAX_CONNECTION_AGE
    max_connection_requests: int = DEFAULT_MAX_CONNECTION_REQUESTS
    connection_jitter: float = DEFAULT_CONNECTION_JITTER
    worker_connections: int | None = None  # None: from the file descriptor limit
    log_level: str = "info"
    log_format: str = "text"  # gunicorn's own lines use the same formatter as the webhook's
    client_ca: Path | None = None  # require client certificates signed by this CA
    metrics_dir: Path | None = None  # prometheus_client multiprocess files; None: a temporary dir
    extra: dict[str, Any] = field(default_factory=dict)  # further gunicorn settings, by name

    def gunicorn_settings(self) -> dict[str, Any]:
        settings = {
            "bind": [self.bind],
            "workers": self.workers,
            "worker_class": self.worker_class,
            "threads": self.threads,
            "keepalive": self.keepalive,
            "reuse_port": self.reuse_port,
            "certfile": str(self.certfile),
            "keyfile": str(self.keyfile),
            "ssl_context": _worker_tls_context(),
            "ca_certs": str(self.client_ca) if self.client_ca else None,
            "cert_reqs": ssl.CERT_REQUIRED if self.client_ca else ssl.CERT_NONE,
            "child_exit": _child_exit,
            "pre_request": _bounded_bodies(self.max_body_bytes),
            "post_fork": _post_fork,
            "logger_class": gunicorn_logger(self.log_format),
            "loglevel": self.log_level,
            "accesslog": None,  # one structured line per review comes from the app instead
            "errorlog": "-",
            "proc_name": "netqos-webhook",
            # gunicorn's runtime control socket lives under $HOME, which is read-only in the
            # hardened pod, and several servers on one machine (tests) would share it.
            "control_socket_disable": True,
            # The request line and headers of an AdmissionReview are small; the body is limited by
            # max_body_bytes in the app. Keep gunicorn's header limits at their defaults.
            # No proxy sits in front of the webhook: forwarding headers (SCRIPT_NAME,
            # X-Forwarded-*) are ignored from every peer. gunicorn trusts them from loopback by
            # default, where `kubectl port-forward` traffic arrives.
            "forwarded_allow_ips": "",
            "worker_connections": self.worker_connections or worker_connections(),
        }
        if self.worker_class == "gevent":
            from webhook.serving.keepalive import ConnectionLimits
            from webhook.serving.worker import Deadlines, hardened_worker

            limits = ConnectionLimits(self.max_connection_age, self.max_connection_requests, self.connection_jitter)
            deadlines = Deadlines(self.handshake_timeout, self.header_timeout, float(self.keepalive), limits)
            settings["worker_class"] = hardened_worker(deadlines)
        settings.update(self.extra)
        return settings


def _worker_tls_context() -> Callable[[Any, Any], ssl.SSLContext]:
    """gunicorn's `ssl_context` hook, answering each process with its own one TLS context.

    gevent asks once per worker; `sync` and `gthread` ask for every connection, and would
    otherwise build a context (~0.5 ms) per connection. The master builds one too, to check the
    files at start-up; a forked worker must not serve with its parent's, hence the pid. TLS 1.2+,
    no session tickets, client certificates when `ca_certs` is set: `webhook.serving.tls.build_context`.
    The context is the front of the worker's CertificateRotator (webhook.serving.tls), which hands new
    connections a rebuilt context when the certificate files change.
    """
    built: dict[str, Any] = {}  # this closure's state: the owning pid and its context

    def tls_context(conf: Any, default_factory: Any) -> ssl.SSLContext:
        if built.get("pid") != os.getpid():
            client_ca = Path(conf.ca_certs) if conf.ca_certs else None
            rotator = CertificateRotator(TLSFiles(Path(conf.certfile), Path(conf.keyfile), client_ca))
            built.update(pid=os.getpid(), context=rotator.front)
        context: ssl.SSLContext = built["context"]
        return context

    return tls_context


def _child_exit(server: Any, worker: Any) -> None:
    metrics.mark_worker_dead(worker.pid)


def _bounded_bodies(max_body_bytes: int) -> Callable[[Any, Any], None]:
    """gunicorn's `pre_request` hook: every request's body read with chunk sizes bounded by the
    limit and its received bytes counted (webhook.serving.bodies), whatever the worker class."""

    def pre_request(worker: Any, req: Any) -> None:
        bodies.install(req, max_body_bytes)

    return pre_request


def _post_fork(server: Any, worker: Any) -> None:
    # A new worker inherits the master's signal handlers until it installs its own (after gevent's
    # monkey-patching, ~0.1 s). A SIGTERM in that window ran the master's handler in the worker
    # and was lost, and shutdown hung for graceful_timeout. With the default action the worker,
    # which has accepted nothing yet, just ends.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def raise_fd_limit() -> int:
    """Raise this process's soft limit of open files to its hard limit (what the pod allows; the
    workers inherit it) and return the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as err:
            log.warning("cannot raise the open-files limit from %d to %d: %s", soft, hard, err)
    return soft


def worker_connections(fd_limit: int | None = None) -> int:
    """Connections one worker takes at once: what its file descriptors allow, at most
    MAX_WORKER_CONNECTIONS (beyond that, connections wait in the listen backlog)."""
    limit = fd_limit if fd_limit is not None else resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return max(1, min(MAX_WORKER_CONNECTIONS, limit - RESERVED_FDS))


class BindError(NetqosError):
    """The listening address cannot be used; the message says which and why."""


def check_bind(bind: str) -> None:
    """Fail fast, with a clear message, when HOST:PORT cannot be bound.

    With `reuse_port` the workers bind, not the master: a taken port would make each worker retry
    and exit in a loop, and a port held by another reuse-port server would be shared silently.
    A plain bind (no SO_REUSEPORT) refuses both.
    """
    host, _, port = bind.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, ValueError) as err:
        raise BindError(f"cannot listen on {bind}: {err}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as err:
            hint = " (another process listens there)" if err.errno == errno.EADDRINUSE else ""
            raise BindError(f"cannot listen on {bind}: {err.strerror}{hint}") from None


class WebhookServer(BaseApplication):
    """gunicorn's master and workers; each worker builds the Flask app from the compiled policy.

    The policy is compiled in the master before any worker starts (a bad policy stops start-up
    there) and inherited by the workers through fork.
    """

    def __init__(self, options: ServeOptions, policy: Policy, watcher: PolicyWatcher | None = None) -> None:
        self.options = options
        self.policy = policy
        self.watcher = watcher
        super().__init__()

    def load_config(self) -> None:
        for name, value in self.options.gunicorn_settings().items():
            self.cfg.set(name, value)

    def load(self) -> Any:
        log.info("worker loaded the app", extra={"worker_pid": os.getpid()})  # it serves right after
        return create_app(
            AppConfig(
                policy=self.policy,
                certfile=self.options.certfile,
                keyfile=self.options.keyfile,
                max_body_bytes=self.options.max_body_bytes,
                watcher=self.watcher,
                body_budget_bytes=self.options.body_budget_bytes,
                body_deadline=self._body_deadline(),
            )
        )

    def _body_deadline(self) -> Callable[[], Any] | None:
        if self.options.worker_class != "gevent":
            return None  # sync and gthread: gunicorn's socket timeout bounds each read instead
        import gevent

        seconds = self.options.body_timeout
        return lambda: gevent.Timeout(seconds, BodyTimeout())


def serve(options: ServeOptions, policy: Policy, watcher: PolicyWatcher | None = None) -> None:
    fd_limit = raise_fd_limit()
    if options.worker_connections is None:
        options = replace(options, worker_connections=worker_connections(fd_limit))
    log.info(
        "capacity: %d connections per worker (open-files limit %d)",
        options.worker_connections,
        fd_limit,
        extra={"worker_connections": options.worker_connections, "fd_limit": fd_limit},
    )
    if options.reuse_port and not options.bind.startswith(("unix:", "fd://")):
        check_bind(options.bind)
    _sweep_temporary_directories()
    temporary = None if options.metrics_dir is not None else tempdirs.make(tempdirs.METRICS_PREFIX)
    directory = metrics.prepare_multiprocess_dir(options.metrics_dir or str(temporary and temporary.path))
    log.info(
        "metrics: per-worker files in %s%s",
        directory,
        " (removed at exit)" if temporary else "",
        extra={"metrics_dir": str(directory)},
    )
    shared = None
    if watcher is not None and watcher.watching:
        # The workers' one "last good policy" (webhook.serving.reload.LastGood), made before they fork.
        shared = tempdirs.make(tempdirs.POLICY_PREFIX)
        watcher.share(LastGood(shared.path))
    master = os.getpid()
    try:
        WebhookServer(options, policy, watcher).run()
    finally:
        # Workers leave through here too (SystemExit from the fork): only the master cleans up.
        if os.getpid() == master:
            for made in (temporary, shared):
                if made:
                    made.remove()


def _sweep_temporary_directories() -> None:
    """Remove what servers killed before they could clean up left under $TMPDIR (only directories
    of ours whose owner record says their master is gone: webhook.serving.tempdirs); one line."""
    done = tempdirs.sweep()
    if done.removed or done.kept:
        log.info(
            "temporary directories of earlier servers: removed %d whose server is gone, left %d alone",
            len(done.removed),
            sum(done.kept.values()),
            extra={"removed": done.removed, "kept": dict(done.kept), "tmpdir": tempfile.gettempdir()},
        )
