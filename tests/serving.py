"""A real `netqos-webhook serve` process over TLS, for end-to-end tests.

The client side does what the API server does: it trusts only the project's CA (`ca.crt`) and
checks the certificate against the Service DNS name, whatever address it connects to.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVER_NAME = "netqos-webhook.netqos-system.svc"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_certs(directory: Path) -> Path:
    """Certificates from the project's own `netqos-webhook certs` command."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "certs",
            "--out",
            str(directory),
            "--service",
            "netqos-webhook",
            "--namespace",
            "netqos-system",
            "--host",
            "127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return directory


@dataclass
class Server:
    port: int
    certs: Path
    process: subprocess.Popen
    log: Path
    client_cert: tuple[str, str] | None = None  # (certificate, key) for a server with --client-ca

    def tls_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
        context.check_hostname = True
        if self.client_cert:
            context.load_cert_chain(*self.client_cert)
        return context

    def connection(self, timeout: float = 10) -> http.client.HTTPSConnection:
        conn = ServiceConnection("127.0.0.1", self.port, timeout=timeout, context=self.tls_context())
        conn.connect()
        return conn

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        conn: http.client.HTTPSConnection | None = None,
    ) -> tuple[int, dict[str, Any] | None, bytes]:
        own = conn is None
        conn = conn or self.connection()
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            data = resp.read()
        finally:
            if own:
                conn.close()
        try:
            parsed = json.loads(data) if data else None
        except ValueError:
            parsed = None
        return resp.status, parsed, data

    def post_review(
        self, review: dict[str, Any], conn: http.client.HTTPSConnection | None = None
    ) -> tuple[int, dict[str, Any] | None]:
        status, parsed, _ = self.request(
            "POST", "/mutate", json.dumps(review).encode(), {"Content-Type": "application/json"}, conn
        )
        return status, parsed

    def logs(self) -> str:
        return self.log.read_text(errors="replace")


class ServiceConnection(http.client.HTTPSConnection):
    """Connects to an address but verifies the certificate for the Service DNS name (and sends it
    as SNI), as the API server does when it calls netqos-webhook.netqos-system.svc."""

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=SERVER_NAME)


@contextmanager
def running_server(
    tmp_path: Path,
    *args: str,
    certs: Path | None = None,
    env: dict[str, str] | None = None,
    ready_timeout: float = 30,
    dev_certs: bool = False,
    client_cert: tuple[str, str] | None = None,
) -> Iterator[Server]:
    """`netqos-webhook serve` in `tmp_path`; with `dev_certs`, no certificate flags, so the
    server generates its development pair into `tmp_path/certs` itself."""
    port = free_port()
    log = tmp_path / f"server-{port}.log"
    command = [sys.executable, "-m", "webhook", "serve", "--bind", f"127.0.0.1:{port}", *args]
    if dev_certs:
        certs = tmp_path / "certs"
    else:
        certs = certs or make_certs(tmp_path / "certs")
        command += ["--certfile", str(certs / "tls.crt"), "--keyfile", str(certs / "tls.key")]
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    server = Server(port, certs, process, log, client_cert)
    try:
        _wait_ready(server, ready_timeout)
        yield server
    finally:
        _stop(process)


def _wait_ready(server: Server, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited with {server.process.returncode}:\n{server.logs()}")
        try:
            status, _, _ = server.request("GET", "/readyz")
            if status == 200:
                return
        except (OSError, ssl.SSLError, http.client.HTTPException):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server not ready within {timeout} s:\n{server.logs()}")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            # gunicorn stops within a couple of seconds; do not let a broken shutdown hang the suite.
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)
