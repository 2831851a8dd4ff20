"""`netqos-webhook serve` as a real process (gunicorn, gevent workers, TLS) on a loopback port.

Reusable by tests and by scripts/soak. The server binds 127.0.0.1:0 and the port is read from
gunicorn's "Listening at" log line, so servers never race for a port. Logs go to a file (JSON
lines), which `log_records()` parses. Everything is bounded in time: start-up waits at most
`timeout` seconds, `stop()` escalates from SIGTERM to SIGKILL.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from webhook.certs import CertFiles, generate

REPO = Path(__file__).resolve().parent.parent
HOSTS = ("localhost", "127.0.0.1")
_LISTENING = re.compile(r"Listening at: https://127\.0\.0\.1:(\d+)")


def make_certs(directory: Path, days: int = 365, ca_days: int = 3650) -> CertFiles:
    return generate(directory, hosts=HOSTS, days=days, ca_days=ca_days)


@dataclass
class Server:
    proc: subprocess.Popen
    port: int
    certs: CertFiles
    log_path: Path
    client_cert: tuple[str, str] | None = None  # (cert, key) for --client-ca servers
    _conns: list[http.client.HTTPSConnection] = field(default_factory=list)

    # --- clients -------------------------------------------------------------------------------
    def client_context(self, cafile: Path | None = None, client_cert: tuple[str, str] | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(cafile or self.certs.ca_cert))
        cert = client_cert or self.client_cert
        if cert:
            context.load_cert_chain(*cert)
        return context

    def connect(self, timeout: float = 10, **context_args: Any) -> http.client.HTTPSConnection:
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.client_context(**context_args), timeout=timeout)
        self._conns.append(conn)
        return conn

    def request(
        self, method: str, path: str, body: bytes | dict | None = None,
        headers: dict[str, str] | None = None, conn: http.client.HTTPSConnection | None = None,
    ) -> tuple[int, bytes]:
        conn = conn or self.connect()
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        if headers is None:
            headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()

    def review(self, document: dict, conn: http.client.HTTPSConnection | None = None) -> dict:
        status, body = self.request("POST", "/mutate", document, conn=conn)
        assert status == 200, f"/mutate answered {status}: {body[:300]!r}"
        return json.loads(body)

    def metrics(self) -> str:
        status, body = self.request("GET", "/metrics")
        assert status == 200, body
        return body.decode()

    # --- the processes -------------------------------------------------------------------------
    def workers(self) -> list[int]:
        return children(self.proc.pid)

    def log_records(self) -> list[dict]:
        records = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    records.append(json.loads(line))
                except ValueError:
                    pass
        return records

    def wait_for_workers(self, count: int, exclude: Iterable[int] = (), timeout: float = 20) -> list[int]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = [p for p in self.workers() if p not in set(exclude)]
            if len(pids) >= count:
                return pids
            time.sleep(0.01)
        raise AssertionError(f"gunicorn did not have {count} workers within {timeout} s; log:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, timeout: float = 15) -> int:
        for conn in self._conns:
            conn.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_server(
    workdir: Path,
    *args: str,
    certs: CertFiles | None = None,
    workers: int = 2,
    timeout: float = 30,
    client_cert: tuple[str, str] | None = None,
) -> Server:
    """Start `netqos-webhook serve` on 127.0.0.1 with JSON logs; return once /healthz answers."""
    workdir.mkdir(parents=True, exist_ok=True)
    certs = certs or make_certs(workdir / "certs")
    log_path = workdir / f"server-{time.monotonic_ns()}.log"
    command = [
        sys.executable, "-m", "webhook", "serve", "--bind", "127.0.0.1:0",
        "--certfile", str(certs.cert), "--keyfile", str(certs.key), "--workers", str(workers),
        "--log-format", "json", *args,
    ]
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, cwd=workdir, env=env)
    server = Server(proc, 0, certs, log_path, client_cert)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"serve exited with {proc.returncode}:\n{server.log_tail()}")
            found = _LISTENING.search(log_path.read_text(errors="replace"))
            if found and len(server.workers()) >= workers:
                server.port = int(found.group(1))
                try:
                    if server.request("GET", "/healthz")[0] == 200:
                        return server
                except (OSError, http.client.HTTPException):
                    pass
            time.sleep(0.05)
        raise AssertionError(f"serve did not answer /healthz within {timeout} s:\n{server.log_tail()}")
    except BaseException:
        server.stop()
        raise


def children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (gunicorn's workers), from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return sorted(found)


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ValueError(f"no VmRSS for {pid}")


def client_ports(pid: int) -> set[int]:
    """Remote (client) ports of the TCP connections process `pid` holds: which worker serves whom."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return set()
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[9] in inodes and parts[3] == "01":  # ESTABLISHED
                ports.add(int(parts[2].rsplit(":", 1)[1], 16))
    return ports


def metric_value(exposition: str, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels` (0 when none)."""
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total
