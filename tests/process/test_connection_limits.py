"""A kept-alive connection is served for a bounded age and number of requests, then closed after
its last answer says `Connection: close`: on a real server (gunicorn, gevent, TLS).

The limits have no jitter here (`--connection-jitter 0`), so the request that ends a connection
is known; the jitter's bounds are tested on the pure function (tests/unit/test_keepalive.py).
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import reviews
from harness.server import SERVER_NAME, Server, metric_value, start_server

pytestmark = pytest.mark.process

REQUESTS = 4


@pytest.fixture(scope="module")
def by_requests(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    flags = ("--max-connection-requests", str(REQUESTS), "--max-connection-age", "0", "--connection-jitter", "0")
    with start_server(tmp_path_factory.mktemp("by-requests"), *flags, workers=1) as running:
        yield running


def _open(server: Server) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return server.client_context().wrap_socket(raw, server_hostname=SERVER_NAME)


def _exchange(tls: ssl.SSLSocket, uid: str) -> tuple[str | None, str]:
    """POST one review on `tls`; the answer's Connection header and the uid it answers."""
    document = reviews.review(reviews.pod())
    document["request"]["uid"] = uid
    body = json.dumps(document).encode()
    head = (
        f"POST /mutate HTTP/1.1\r\nHost: {SERVER_NAME}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    tls.sendall(head.encode() + body)
    response = http.client.HTTPResponse(tls)  # type: ignore[arg-type]
    response.begin()
    answer = json.loads(response.read())
    assert response.status == 200, answer
    return response.getheader("Connection"), answer["response"]["uid"]


def _closed_by_server(tls: ssl.SSLSocket) -> bool:
    """True when the server has closed the connection (end of stream, or a reset)."""
    tls.settimeout(5)
    try:
        return tls.recv(1) == b""
    except (ssl.SSLError, ConnectionResetError):
        return True
    except TimeoutError:
        return False


def test_the_request_that_reaches_the_limit_is_answered_with_connection_close_and_the_connection_ends(
    by_requests: Server,
):
    tls = _open(by_requests)
    try:
        headers = [_exchange(tls, str(uuid.uuid4()))[0] for _ in range(REQUESTS)]
        assert headers == ["keep-alive"] * (REQUESTS - 1) + ["close"]
        assert _closed_by_server(tls)
    finally:
        tls.close()


def test_a_fresh_connection_is_served_after_the_limit_and_no_review_is_lost_or_answered_twice(by_requests: Server):
    before = metric_value(by_requests.metrics(), "netqos_admission_requests_total")
    sent: list[str] = []
    answered: list[str] = []
    closes = 0
    tls = _open(by_requests)
    try:
        for _ in range(3 * REQUESTS + 1):  # three full connections and one more request
            uid = str(uuid.uuid4())
            sent.append(uid)
            connection, got = _exchange(tls, uid)
            answered.append(got)
            if connection == "close":
                closes += 1
                assert _closed_by_server(tls)
                tls.close()
                tls = _open(by_requests)
    finally:
        tls.close()
    assert answered == sent
    assert closes == 3
    after = metric_value(by_requests.metrics(), "netqos_admission_requests_total")
    assert after - before == len(sent)  # each review reached the application once


def test_a_connection_older_than_its_age_is_closed_after_answering_its_next_request(tmp_path: Path):
    flags = ("--max-connection-age", "1", "--max-connection-requests", "0", "--connection-jitter", "0")
    with start_server(tmp_path, *flags, workers=1) as server:
        tls = _open(server)
        try:
            assert _exchange(tls, "00000000-0000-4000-8000-000000000001") == (
                "keep-alive",
                "00000000-0000-4000-8000-000000000001",
            )
            time.sleep(1.2)
            assert _exchange(tls, "00000000-0000-4000-8000-000000000002") == (
                "close",
                "00000000-0000-4000-8000-000000000002",
            )
            assert _closed_by_server(tls)
        finally:
            tls.close()


def test_without_limits_a_connection_stays_open(tmp_path: Path):
    flags = ("--max-connection-age", "0", "--max-connection-requests", "0")
    with start_server(tmp_path, *flags, workers=1) as server:
        tls = _open(server)
        try:
            headers = {_exchange(tls, str(uuid.uuid4()))[0] for _ in range(20)}
            assert headers == {"keep-alive"}
        finally:
            tls.close()
