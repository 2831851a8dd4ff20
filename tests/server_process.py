"""The real server for the operations tests and scripts/soak, on top of the e2e harness.

`serving.running_server` (the lead's e2e harness) starts and stops `netqos-webhook serve`; this
module adds what load and fault tests need: several workers and their pids, JSON log records,
keep-alive connections with or without SNI (the API server sends the Service name; a client
dialling an IP address sends none), client certificates, RSS and which worker holds which client
connection (from /proc), and metric values. Start-up waits for every worker; all bounded in time.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serving import ServiceConnection, running_server

from webhook.certs import CertFiles, generate

HOSTS = ("localhost", "127.0.0.1")


def make_certs(directory: Path, days: int = 365, ca_days: int = 3650) -> CertFiles:
    return generate(directory, hosts=HOSTS, days=days, ca_days=ca_days)


@dataclass
class Server:
    base: Any  # serving.Server
    certs: CertFiles
    client_cert: tuple[str, str] | None
    _context_manager: Any
    _conns: list[http.client.HTTPSConnection] = field(default_factory=list)

    @property
    def port(self) -> int:
        return self.base.port

    @property
    def proc(self):
        return self.base.process

    @property
    def log_path(self) -> Path:
        return self.base.log

    # --- clients -------------------------------------------------------------------------------
    def client_context(self, cafile: Path | None = None, client_cert: tuple[str, str] | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(cafile or self.certs.ca_cert))
        cert = client_cert or self.client_cert
        if cert:
            context.load_cert_chain(*cert)
        return context

    def connect(
        self, timeout: float = 10, service_name: bool = False, **context_args: Any
    ) -> http.client.HTTPSConnection:
        """A keep-alive connection to 127.0.0.1: without SNI, or (service_name) as the API server
        connects, with the Service DNS name as SNI and verified name."""
        kind = ServiceConnection if service_name else http.client.HTTPSConnection
        conn = kind("127.0.0.1", self.port, context=self.client_context(**context_args), timeout=timeout)
        self._conns.append(conn)
        return conn

    def request(
        self,
        method: str,
        path: str,
        body: bytes | dict | None = None,
        headers: dict[str, str] | None = None,
        conn: http.client.HTTPSConnection | None = None,
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

    def stop(self) -> int:
        for conn in self._conns:
            conn.close()
        self._context_manager.__exit__(None, None, None)
        return self.proc.returncode

    def __enter__(self) -> Server:
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
    """`netqos-webhook serve` on 127.0.0.1 with JSON logs and `workers` workers, all booted."""
    workdir.mkdir(parents=True, exist_ok=True)
    certs = certs or make_certs(workdir / "certs")
    env = {"PROMETHEUS_MULTIPROC_DIR": ""}  # "": each test server gets its own temporary directory
    manager = running_server(
        workdir,
        "--workers",
        str(workers),
        "--log-format",
        "json",
        *args,
        certs=certs.directory,
        env=env,
        ready_timeout=timeout,
        client_cert=client_cert,
    )
    base = manager.__enter__()
    server = Server(base, certs, client_cert, manager)
    try:
        server.wait_for_workers(workers, timeout=timeout)
    except BaseException:
        server.stop()
        raise
    return server


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
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return sorted(found)


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ValueError(f"no VmRSS for {pid}")


def tcp_sockets() -> Iterator[tuple[int, int, str, str]]:
    """(local port, remote port, state, inode) of every TCP socket, from /proc/net/tcp{,6}
    (state 01 is ESTABLISHED, 0A is LISTEN)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote = (int(address.rsplit(":", 1)[1], 16) for address in fields[1:3])
            yield local, remote, fields[3], fields[9]


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets process `pid` holds open (empty when it is gone)."""
    found = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(target[8:-1])
    return found


def client_ports(pid: int) -> set[int]:
    """Remote (client) ports of the TCP connections process `pid` holds: which worker serves whom."""
    inodes = socket_inodes(pid)
    ports = set()
    for _, remote_port, state, inode in tcp_sockets():
        if inode in inodes and state == "01":  # ESTABLISHED
            ports.add(remote_port)
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
