"""Serving: gunicorn, in-process through its application API, over TLS.

Worker settings are chosen for the API server as the client (docs/performance.md has the numbers):
- worker class `gevent`: the API server keeps up to 25 idle keep-alive connections per host and,
  after a burst, leaves freshly handshaken connections idle. Under `sync` or `gthread` each such
  connection holds a worker or a thread until the client speaks, and real reviews queue behind
  them for seconds; under gevent an idle connection is a parked greenlet.
- keep-alive 120 s: longer than the API server's 90 s idle timeout, so it is always the client
  that retires a connection, and a pause between bursts costs no new TLS handshake.
- one TLS context per worker, built once (gevent's StreamServer reuses it for every connection).
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gunicorn.app.base import BaseApplication

from webhook.app import DEFAULT_MAX_BODY_BYTES, AppConfig, create_app
from webhook.policy import Policy

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
            "ssl_context": _tls_context,
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


def _tls_context(conf: Any, default_factory: Any) -> ssl.SSLContext:
    context = default_factory()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


class WebhookServer(BaseApplication):
    """gunicorn's master and workers; each worker builds the Flask app from the compiled policy.

    The policy is compiled in the master before any worker starts (a bad policy stops start-up
    there) and inherited by the workers through fork.
    """

    def __init__(self, options: ServeOptions, policy: Policy) -> None:
        self.options = options
        self.policy = policy
        super().__init__()

    def load_config(self) -> None:
        for name, value in self.options.gunicorn_settings().items():
            self.cfg.set(name, value)

    def load(self) -> Any:
        return create_app(
            AppConfig(
                policy=self.policy,
                certfile=self.options.certfile,
                keyfile=self.options.keyfile,
                max_body_bytes=self.options.max_body_bytes,
            )
        )


def serve(options: ServeOptions, policy: Policy) -> None:
    WebhookServer(options, policy).run()
