"""Serve a WSGI app under gunicorn with explicit serving settings, for the serving experiments.

    python benchmarks/serve_variant.py --app benchmarks.baseline_app:app --bind 127.0.0.1:8443 \
        --certfile tls.crt --keyfile tls.key --worker-class gthread --workers 2 --threads 4 \
        --keepalive 2 [--reuse-port] [--reuse-ssl-context]

The benchmark uses it to measure one setting at a time (docs/performance.md, "Serving choices").
"""

from __future__ import annotations

import argparse
import os
import ssl
import sys

from gunicorn.app.base import BaseApplication

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _App(BaseApplication):
    def __init__(self, app_spec: str, options: dict) -> None:
        self.app_spec = app_spec
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self):
        module, _, attr = self.app_spec.partition(":")
        __import__(module)
        return getattr(sys.modules[module], attr)


_CONTEXTS: dict[int, ssl.SSLContext] = {}


def _reused_context(conf, default_factory):
    """One SSLContext per worker process instead of one per connection (gthread, sync)."""
    ctx = _CONTEXTS.get(os.getpid())
    if ctx is None:
        ctx = _CONTEXTS[os.getpid()] = default_factory()
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def _fresh_context(conf, default_factory):
    ctx = default_factory()
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if os.environ.get("NETQOS_BENCH_NO_TICKETS"):
        ctx.num_tickets = 0
    return ctx


def _yield_after_request(worker, req, environ, resp):
    """Let the event loop poll before this greenlet reads its connection's next request."""
    import gevent

    gevent.sleep(0.000001)


def _install_coalescing_response():
    from gunicorn.http import wsgi

    class _Buffer:
        def __init__(self):
            self.data = b""

        def sendall(self, data):
            self.data += data

    class CoalescingResponse(wsgi.Response):
        _pending = b""

        def send_headers(self):
            if self.headers_sent:
                return
            real, buf = self.sock, _Buffer()
            self.sock = buf
            try:
                super().send_headers()
            finally:
                self.sock = real
            self._pending = buf.data

        def _emit_body(self, data):
            pending, self._pending = self._pending, b""
            if pending:
                if self.chunked:
                    self.sock.sendall(pending + b"%X\r\n%s\r\n" % (len(data), data))
                    return
                data = pending + data
            super()._emit_body(data)

        def close(self):
            if not self.headers_sent:
                self.send_headers()
            pending, self._pending = self._pending, b""
            if pending:
                self.sock.sendall(pending)
            super().close()

    wsgi.Response = CoalescingResponse


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--app", default="benchmarks.baseline_app:app")
    p.add_argument("--bind", required=True)
    p.add_argument("--certfile", required=True)
    p.add_argument("--keyfile", required=True)
    p.add_argument("--worker-class", default="gevent")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--keepalive", type=int, default=120)
    p.add_argument("--reuse-port", action="store_true")
    p.add_argument("--reuse-ssl-context", action="store_true")
    p.add_argument("--yield-after-request", action="store_true")
    p.add_argument("--coalesce-writes", action="store_true")
    args = p.parse_args(argv)
    options = {
        "bind": [args.bind],
        "certfile": args.certfile,
        "keyfile": args.keyfile,
        "worker_class": args.worker_class,
        "workers": args.workers,
        "threads": args.threads,
        "keepalive": args.keepalive,
        "reuse_port": args.reuse_port,
        "ssl_context": _reused_context if args.reuse_ssl_context else _fresh_context,
        "control_socket_disable": True,
        "loglevel": "warning",
    }
    if args.coalesce_writes:
        _install_coalescing_response()
    if args.yield_after_request:
        options["post_request"] = _yield_after_request
    _App(args.app, options).run()


if __name__ == "__main__":
    main()
