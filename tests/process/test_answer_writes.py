"""How answers leave the server, read at the TLS record layer of a real server's connection.

An answer is one TLS record (its head and body in one write): two records cost the server a second
encryption and system call and the client a second wake-up per review. A worker serves its
connections in turn even when one of them has its next requests already waiting.
"""

from __future__ import annotations

import json
import socket
import ssl
import struct
import threading
import time

import pytest

from harness import reviews
from harness.server import SERVER_NAME, Server, start_server

pytestmark = pytest.mark.process

APPLICATION_DATA = 23  # TLS record content type (RFC 8446, 5.1); TLS 1.3 hides the real type in it


class RecordClient:
    """A TLS client over a plain socket (ssl.MemoryBIO) that sees every record the server sends."""

    def __init__(self, server: Server) -> None:
        self.raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = server.client_context().wrap_bio(self.incoming, self.outgoing, server_hostname=SERVER_NAME)
        self.pending = b""  # received bytes not yet split into records
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._send_out()
                self._receive()
        self._send_out()

    def _send_out(self) -> None:
        data = self.outgoing.read()
        if data:
            self.raw.sendall(data)

    def _receive(self) -> list[tuple[int, int]]:
        """Read from the socket once; the (content type, length) of each record completed."""
        data = self.raw.recv(65536)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.incoming.write(data)
        self.pending += data
        records = []
        while len(self.pending) >= 5:
            kind, _version, length = struct.unpack("!BHH", self.pending[:5])
            if len(self.pending) < 5 + length:
                break
            records.append((kind, length))
            self.pending = self.pending[5 + length :]
        return records

    def exchange(self, request: bytes) -> tuple[bytes, int]:
        """Send `request`; the complete HTTP answer and the application-data records it came in."""
        self.tls.write(request)
        self._send_out()
        answer, records = b"", 0
        while not _complete(answer, request.startswith(b"HEAD ")):
            records += sum(1 for kind, _ in self._receive() if kind == APPLICATION_DATA)
            while True:
                try:
                    answer += self.tls.read(65536)
                except ssl.SSLWantReadError:
                    break
        return answer, records

    def close(self) -> None:
        self.raw.close()


def _complete(answer: bytes, head_only: bool) -> bool:
    head, sep, body = answer.partition(b"\r\n\r\n")
    if not sep:
        return False
    if head_only:
        return True
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    raise AssertionError(f"an answer without Content-Length: {head!r}")


def _request(method: str, path: str, body: bytes = b"") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: {SERVER_NAME}\r\n"
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


REVIEW = json.dumps(reviews.review(reviews.pod())).encode()


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory: pytest.TempPathFactory):
    with start_server(tmp_path_factory.mktemp("answer_writes"), workers=1) as running:
        yield running


@pytest.mark.parametrize(
    ("what", "request_bytes", "status"),
    [
        ("a review", _request("POST", "/mutate?timeout=10s", REVIEW), b"200"),
        ("a malformed review", _request("POST", "/mutate", b'{"kind": "Pod"}'), b"400"),
        ("a GET of /readyz", _request("GET", "/readyz"), b"200"),
        ("a GET of an unknown path", _request("GET", "/nowhere"), b"404"),
    ],
)
def test_an_answer_arrives_in_one_tls_record(one_worker: Server, what: str, request_bytes: bytes, status: bytes):
    client = RecordClient(one_worker)
    try:
        client.exchange(_request("GET", "/healthz"))  # anything sent after the handshake is read by now
        answer, records = client.exchange(request_bytes)
    finally:
        client.close()
    assert answer.split(b" ", 2)[1] == status, answer[:200]
    assert records == 1, f"{what}: the answer ({len(answer)} bytes) came in {records} TLS records"


def test_an_answer_without_a_body_still_arrives(one_worker: Server):
    client = RecordClient(one_worker)
    try:
        answer, records = client.exchange(_request("HEAD", "/healthz"))
        again, _ = client.exchange(_request("GET", "/healthz"))  # and the connection goes on
    finally:
        client.close()
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"\r\n\r\n") and records == 1
    assert again.startswith(b"HTTP/1.1 200") and again.endswith(b'{"status":"ok"}')


def _answer_times(conn: ssl.SSLSocket, count: int, times: list[float]) -> None:
    """Read `count` answers from `conn`, noting when each was complete."""
    got = b""
    while len(times) < count:
        data = conn.recv(65536)
        if not data:
            return
        got += data
        while _complete(got, head_only=False):
            head, _, rest = got.partition(b"\r\n\r\n")
            length = int(
                next(
                    v for n, _, v in (h.partition(b":") for h in head.split(b"\r\n")) if n.lower() == b"content-length"
                )
            )
            got = rest[length:]
            times.append(time.monotonic())


def test_a_connection_with_requests_waiting_does_not_hold_the_worker(one_worker: Server):
    """Two connections to one worker, each with its reviews sent at once (pipelined): their
    answers interleave. Without a yield between requests whose successor is already read, the
    worker answered every request of one connection before the other's first."""
    count = 20
    conns = []
    for _ in range(2):
        raw = socket.create_connection(("127.0.0.1", one_worker.port), timeout=20)
        conns.append(one_worker.client_context().wrap_socket(raw, server_hostname=SERVER_NAME))
    times: list[list[float]] = [[], []]
    readers = [threading.Thread(target=_answer_times, args=(c, count, t)) for c, t in zip(conns, times, strict=True)]
    try:
        for reader in readers:
            reader.start()
        batch = _request("POST", "/mutate", REVIEW) * count
        senders = [threading.Thread(target=c.sendall, args=(batch,)) for c in conns]
        for sender in senders:
            sender.start()
        for thread in senders + readers:
            thread.join(60)
    finally:
        for conn in conns:
            conn.close()
    first, second = times
    assert len(first) == count and len(second) == count, (len(first), len(second))
    # each connection had an answer before the other had its last
    assert first[0] < second[-1] and second[0] < first[-1], (first[0], first[-1], second[0], second[-1])
