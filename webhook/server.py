"""Serving: gunicorn, in-process through its application API, over TLS.

Worker settings are chosen for the API server as the client (docs/performance.md has the numbers):
- worker class `gevent`: the API server keeps up to 25 idle keep-alive connections per host and,
  after a burst, leaves freshly handshaken connections idle. Under `sync` or `gthread` each such
  connection holds a worker or a thread until the client speaks, and real reviews queue behind
  them for seconds; under gevent an idle connection is a parked greenlet.
- keep-alive 120 s: longer than the API server's 90 s idle timeout, so it is always the client
  that retires a connection, and a pause between bursts costs no new TLS handshake.
- one TLS context per worker, built once (gevent's StreamServer reuses it for every connection);
  a new certificate on disk reaches new connections through that context's SNI callback
  (`webhook.tls`), the policy file through a per-worker snapshot (`webhook.reload`).
- operations wiring (`webhook.metrics`, `webhook.logs`): the master empties the metrics directory
  before the workers start and drops a dead worker's live gauges in `child_exit`; gunicorn's own
  log lines use the webhook's formatter.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gunicorn.app.base import BaseApplication

from webhook import metrics
from webhook.app import DEFAULT_MAX_BODY_BYTES, AppConfig, create_app
from webhook.logs import GunicornLogger
from webhook.policy import Policy
from webhook.reload import PolicyWatcher
from webhook.tls import TLSFiles, gunicorn_ssl_context

DEFAULT_BIND = "127.0.0.1:8443"
DEFAULT_WORKERS = 2
DEFAULT_KEEPALIVE_SECONDS = 120  # > the API server's 90 s idle-connection timeout
WORKER_CLASSES = ("gevent", "gthread", "sync")

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
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    log_level: str = "info"
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
            "certfile": str(self.certfile),
            "keyfile": str(self.keyfile),
            "ssl_context": gunicorn_ssl_context(TLSFiles(self.certfile, self.keyfile, self.client_ca)),
            "child_exit": _child_exit,
            "post_fork": _post_fork,
            "logger_class": GunicornLogger,
            "loglevel": self.log_level,
            "accesslog": None,  # one structured line per review comes from the app instead
            "errorlog": "-",
            "proc_name": "netqos-webhook",
            # gunicorn's runtime control socket lives under $HOME, which is read-only in the
            # hardened pod, and several servers on one machine (tests) would share it.
            "control_socket_disable": True,
            # The request line and headers of an AdmissionReview are small; the body is limited by
            # max_body_bytes in the app. Keep gunicorn's header limits at their defaults.
        }
        settings.update(self.extra)
        return settings


def _child_exit(server: Any, worker: Any) -> None:
    metrics.mark_worker_dead(worker.pid)


def _post_fork(server: Any, worker: Any) -> None:
    # A new worker inherits the master's signal handlers until it installs its own (after gevent's
    # monkey-patching, ~0.1 s). A SIGTERM in that window ran the master's handler in the worker
    # and was lost, and shutdown hung for graceful_timeout. With the default action the worker,
    # which has accepted nothing yet, just ends.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


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
            )
        )


def serve(options: ServeOptions, policy: Policy, watcher: PolicyWatcher | None = None) -> None:
    temporary = None
    if options.metrics_dir is None:
        temporary = tempfile.mkdtemp(prefix="netqos-metrics-")
    directory = metrics.prepare_multiprocess_dir(options.metrics_dir or temporary)
    log.info("metrics: per-worker files in %s%s", directory, " (removed at exit)" if temporary else "",
             extra={"metrics_dir": str(directory)})
    master = os.getpid()
    try:
        WebhookServer(options, policy, watcher).run()
    finally:
        # Workers leave through here too (SystemExit from the fork): only the master cleans up.
        if temporary and os.getpid() == master:
            shutil.rmtree(temporary, ignore_errors=True)
