"""A real `netqos-webhook serve` process over TLS on loopback, and clients that call it as the API
server does.

The client side trusts only the project's CA (`ca.crt`) and, by default, verifies the certificate
for the Service DNS name and sends that name as SNI, whatever address it dials. A server is
started in its own session (process group) and stopped as a group; every wait is bounded.
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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple

from prometheus_client.parser import text_string_to_metric_families

from harness.certs import make_certs
from harness.controlplane import LOOPBACK
from harness.procfs import children
from webhook.certs import CertFiles
from webhook.names import DEFAULT_NAMESPACE, DEFAULT_SERVICE, METRICS_DIR_ENV

SERVER_NAME = f"{DEFAULT_SERVICE}.{DEFAULT_NAMESPACE}.svc"  # what the API server dials and verifies
STOP_GRACE_SECONDS = 5  # gunicorn stops within a couple of seconds; a broken shutdown must not hang
KILL_WAIT_SECONDS = 15


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        port: int = s.getsockname()[1]
        return port


class ServiceConnection(http.client.HTTPSConnection):
    """Connects to an address but verifies the certificate for the Service DNS name (and sends it
    as SNI), as the API server does when it calls netqos-webhook.netqos-system.svc."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext, timeout: float) -> None:
        super().__init__(host, port, context=context, timeout=timeout)
        self.tls = context

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self.tls.wrap_socket(sock, server_hostname=SERVER_NAME)


class Reply(NamedTuple):
    status: int
    body: bytes

    def json(self) -> Any:
        """The body as JSON, or None when it is empty or not JSON."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None


@dataclass
class Server:
    """A running `netqos-webhook serve`: its master process, port, certificates and log file."""

    process: subprocess.Popen[bytes]
    port: int
    certs: CertFiles
    log: Path
    client_cert: tuple[str, str] | None = None  # (certificate, key) for a server with --client-ca
    _conns: list[http.client.HTTPSConnection] = field(default_factory=list)

    # --- clients -------------------------------------------------------------------------------
    def client_context(self, cafile: Path | None = None, client_cert: tuple[str, str] | None = None) -> ssl.SSLContext:
        """Trusts only `cafile` (default: the server's CA); presents `client_cert` if given."""
        context = ssl.create_default_context(cafile=str(cafile or self.certs.ca_cert))
        cert = client_cert or self.client_cert
        if cert:
            context.load_cert_chain(*cert)
        return context

    def connect(
        self,
        timeout: float = 10,
        service_name: bool = True,
        cafile: Path | None = None,
        client_cert: tuple[str, str] | None = None,
    ) -> http.client.HTTPSConnection:
        """A keep-alive connection to 127.0.0.1, closed when the server stops: as the API server
        connects (`service_name`: the Service DNS name as SNI and verified name), or as a client
        dialling the IP address (no SNI, the address verified)."""
        conn = self._connection(timeout, service_name, cafile, client_cert)
        self._conns.append(conn)
        return conn

    def _connection(
        self, timeout: float, service_name: bool, cafile: Path | None, client_cert: tuple[str, str] | None
    ) -> http.client.HTTPSConnection:
        context = self.client_context(cafile, client_cert)
        if service_name:
            return ServiceConnection(LOOPBACK, self.port, context=context, timeout=timeout)
        return http.client.HTTPSConnection(LOOPBACK, self.port, context=context, timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        body: bytes | dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        conn: http.client.HTTPSConnection | None = None,
    ) -> Reply:
        """One request, on `conn` or on a new connection closed afterwards. A dict body is sent as
        JSON; without `headers`, a body is labelled application/json."""
        own = conn is None
        conn = conn or self._connection(10, True, None, None)
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        if headers is None:
            headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return Reply(response.status, response.read())
        finally:
            if own:
                conn.close()

    def post_review(self, document: dict[str, Any], conn: http.client.HTTPSConnection | None = None) -> Reply:
        return self.request("POST", "/mutate", document, conn=conn)

    def review(self, document: dict[str, Any], conn: http.client.HTTPSConnection | None = None) -> dict[str, Any]:
        """The AdmissionReview the server answers to `document`; it must answer 200."""
        reply = self.post_review(document, conn)
        assert reply.status == 200, f"/mutate answered {reply.status}: {reply.body[:300]!r}"
        answer: dict[str, Any] = json.loads(reply.body)
        return answer

    def metrics(self) -> str:
        reply = self.request("GET", "/metrics")
        assert reply.status == 200, reply.body
        return reply.body.decode()

    # --- the processes -------------------------------------------------------------------------
    def workers(self) -> list[int]:
        return children(self.process.pid)

    def wait_for_workers(self, count: int, exclude: Iterable[int] = (), timeout: float = 20) -> list[int]:
        """At least `count` worker pids not in `exclude`, once gunicorn has forked them."""
        excluded = set(exclude)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = [p for p in self.workers() if p not in excluded]
            if len(pids) >= count:
                return pids
            time.sleep(0.01)
        raise AssertionError(f"gunicorn did not have {count} workers within {timeout} s; log:\n{self.log_tail()}")

    # --- the log -------------------------------------------------------------------------------
    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    def log_records(self) -> list[dict[str, Any]]:
        """Every JSON log line so far, parsed (other lines, such as a crash's output, skipped)."""
        records = []
        for line in self.logs().splitlines():
            if line.startswith("{"):
                try:
                    records.append(json.loads(line))
                except ValueError:
                    pass
        return records

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.logs().splitlines()[-lines:])

    # --- stopping ------------------------------------------------------------------------------
    def stop(self) -> int | None:
        """Close the clients' connections, stop the server's process group; its exit status."""
        for conn in self._conns:
            conn.close()
        _stop(self.process)
        return self.process.returncode

    def __enter__(self) -> Server:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


def start_server(
    workdir: Path,
    *args: str,
    certs: CertFiles | None = None,
    workers: int = 2,
    env: dict[str, str] | None = None,
    timeout: float = 30,
    dev_certs: bool = False,
    client_cert: tuple[str, str] | None = None,
) -> Server:
    """`netqos-webhook serve` on 127.0.0.1 with JSON logs and `workers` workers, answering /readyz
    and with every worker forked, within `timeout` seconds. Runs in `workdir`, which holds its log.

    Certificates: `certs`, else new ones in `workdir/certs`; with `dev_certs`, no certificate flags
    at all, so the server generates its development pair into `workdir/certs` itself. Each server
    gets its own metrics directory. `args` go last (they may override the flags above).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = workdir / f"server-{port}.log"
    command = [sys.executable, "-m", "webhook", "serve", "--bind", f"{LOOPBACK}:{port}"]
    command += ["--workers", str(workers), "--log-format", "json"]
    if dev_certs:
        certs = CertFiles(workdir / "certs")
    else:
        certs = certs or make_certs(workdir / "certs")
        command += ["--certfile", str(certs.cert), "--keyfile", str(certs.key)]
    # "": the server makes a temporary metrics directory of its own
    environment = {**os.environ, METRICS_DIR_ENV: "", **(env or {})}
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [*command, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=workdir,
            env=environment,
            start_new_session=True,
        )
    server = Server(process, port, certs, log, client_cert)
    try:
        _wait_ready(server, timeout)
        server.wait_for_workers(workers, timeout=timeout)
    except BaseException:
        server.stop()
        raise
    return server


def metric_value(exposition: str, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels` (0 when none)."""
    total = 0.0
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def _wait_ready(server: Server, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited with {server.process.returncode}:\n{server.logs()}")
        try:
            if server.request("GET", "/readyz").status == 200:
                return
        except (OSError, http.client.HTTPException):  # ssl.SSLError is an OSError
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server not ready within {timeout} s:\n{server.logs()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=KILL_WAIT_SECONDS)
