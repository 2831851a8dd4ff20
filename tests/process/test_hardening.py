"""Hostile clients against a real server over TLS: every stage of a connection has a deadline,
request bodies have a memory budget, every client error is a 4xx with a JSON body, and every log
line is JSON. Bounded in time: short deadlines on the shared server, ~20 s in all.
"""

from __future__ import annotations

import json
import resource
import select
import socket
import ssl
import threading
import time
import warnings
from contextlib import ExitStack

import pytest

from harness.patches import pod_review
from harness.procfs import memory_kib
from harness.server import metric_value, start_server

pytestmark = pytest.mark.process

REVIEW = json.dumps(pod_review({"metadata": {"name": "p", "labels": {"qos": "latency-sensitive"}}})).encode()
DEADLINE = 1  # seconds: --handshake-timeout and --header-timeout of the shared server
BODY_DEADLINE = 2
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with start_server(
        tmp_path_factory.mktemp("hardening"),
        "--handshake-timeout",
        str(DEADLINE),
        "--header-timeout",
        str(DEADLINE),
        "--body-timeout",
        str(BODY_DEADLINE),
        "--max-body-bytes",
        str(8 * MIB),
    ) as running:
        yield running


def tls_connection(server, timeout: float = 10) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    return server.client_context().wrap_socket(raw, server_hostname="localhost")


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response with a Content-Length, as the server writes every answer."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a response; got {data[:200]!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split()[1]), headers, body


def exchange(server, request: bytes) -> tuple[int, dict[str, str], bytes]:
    with tls_connection(server) as tls:
        tls.sendall(request)
        return read_response(tls)


def post(body: bytes, extra: str = "", chunked: bool = False) -> bytes:
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}"
    head = f"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{framing}\r\n{extra}\r\n"
    return head.encode() + body


def chunks(body: bytes, size: int = 4096) -> bytes:
    pieces = [b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size]) for i in range(0, len(body), size)]
    return b"".join(pieces) + b"0\r\n\r\n"


def closed_after(sock: socket.socket, limit: float) -> float:
    """Seconds until the server closes `sock` (reads until EOF or reset); fails after `limit`."""
    started = time.monotonic()
    sock.settimeout(limit)
    try:
        while sock.recv(65536):
            pass
    except (ConnectionResetError, ssl.SSLError):
        pass
    except TimeoutError:
        pytest.fail(f"the server kept the connection open for more than {limit} s")
    return time.monotonic() - started


def client_hello() -> bytes:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()


# --- 1. every stage has a deadline -----------------------------------------------------------------


@pytest.mark.parametrize(
    "stage, send",
    [
        ("nothing sent (no ClientHello)", lambda tls_server: b""),
        ("half a ClientHello", lambda tls_server: client_hello()[:60]),
    ],
)
def test_a_connection_stalled_before_its_handshake_is_closed_at_the_handshake_deadline(server, stage, send):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        raw.sendall(send(server))
        assert DEADLINE - 0.2 < closed_after(raw, DEADLINE + 4) < DEADLINE + 4, stage


@pytest.mark.parametrize(
    "stage, request_, deadline",
    [
        ("headers stopped halfway", b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-", DEADLINE),
        ("body stopped halfway", post(REVIEW)[: -len(REVIEW) // 2], BODY_DEADLINE),
    ],
)
def test_a_request_stalled_halfway_is_closed_at_its_deadline(server, stage, request_, deadline):
    with tls_connection(server) as tls:
        tls.sendall(request_)
        started = time.monotonic()
        if stage.startswith("body"):
            status, _, body = read_response(tls)
            assert status == 408 and "did not arrive in time" in json.loads(body)["error"]
        assert deadline - 0.2 < closed_after(tls, deadline + 4) + (time.monotonic() - started) < deadline + 4


SLOW_BODIES = [
    # what arrives of the body before the client stops, as sent on the wire (framing included)
    (
        "Content-Length 5000, 1000 sent",
        post(b"{" * 1000)[:-1000].replace(b"Length: 1000", b"Length: 5000") + b"{" * 1000,
        1000,
    ),
    ("chunked, a chunk of 2000 with 1000 sent", post(b"7d0\r\n" + b"{" * 1000, chunked=True), 1005),
]


@pytest.mark.parametrize("case, request_, received", SLOW_BODIES, ids=[c[0] for c in SLOW_BODIES])
def test_the_408_after_a_slow_body_states_the_bytes_received(server, case, request_, received):
    with tls_connection(server) as tls:
        tls.sendall(request_)
        status, _, body = read_response(tls)
    assert (status, json.loads(body)["error"]) == (
        408,
        f"the request body did not arrive in time ({received} bytes received)",
    ), case


def _raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < needed:
        pytest.skip(f"needs {needed} open files; the hard limit here is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, needed), hard))


def test_silent_and_idle_connections_do_not_stall_a_new_one(tmp_path):
    """2,000 TCP connections that never send a ClientHello and 500 idle handshaken ones, held at
    once (more than gunicorn's default 1,000 connections per worker), and a new connection still
    completes a review within 1 s, ten times over."""
    _raise_fd_limit(4000)
    with start_server(tmp_path) as flooded, ExitStack() as held:
        for _ in range(500):
            held.enter_context(tls_connection(flooded)).sendall(b"")
        for _ in range(2000):
            held.enter_context(socket.create_connection(("127.0.0.1", flooded.port), timeout=10))
        for attempt in range(10):
            started = time.monotonic()
            with tls_connection(flooded, timeout=5) as tls:
                tls.sendall(post(REVIEW))
                status, _, _ = read_response(tls)
            seconds = time.monotonic() - started
            assert status == 200 and seconds < 1.0, f"new connection {attempt}: {status} after {seconds:.2f} s"
        assert flooded.process.poll() is None


# --- 2. memory has a budget ------------------------------------------------------------------------


def _slow_body(server, results: list, declared: int, sent: int, pieces: int = 15) -> None:
    """A client that declares `declared` bytes and sends `sent` of them in `pieces`, 0.1 s apart
    (within the body deadline), reading the answer as soon as there is one."""
    try:
        with tls_connection(server, timeout=20) as tls:
            tls.sendall(post(b"", chunked=False).replace(b"Content-Length: 0", b"Content-Length: %d" % declared))
            piece = b" " * (sent // pieces)
            for _ in range(pieces):
                tls.sendall(piece)
                if select.select([tls], [], [], 0.1)[0]:
                    break
            results.append(read_response(tls)[0])
    except (OSError, ConnectionError) as err:  # refused and closed while still sending
        results.append(type(err).__name__)


def test_large_slow_bodies_are_held_within_the_budget_and_reviews_go_on(server):
    """40 connections each declaring 8 MiB and sending 7.5 MiB slowly: each worker's RSS stays
    under 200 MiB, and reviews are answered meanwhile."""
    workers = server.workers()
    results: list = []
    attack = (server, results, 8 * MIB, 7 * MIB + MIB // 2)
    clients = [threading.Thread(target=_slow_body, args=attack) for _ in range(40)]
    for client in clients:
        client.start()
    peak = dict.fromkeys(workers, 0)
    latencies = []
    with tls_connection(server) as api_server:  # a kept-alive connection, as the API server's
        while any(c.is_alive() for c in clients):
            for pid in workers:
                peak[pid] = max(peak[pid], memory_kib(pid) * 1024)
            started = time.monotonic()
            api_server.sendall(post(REVIEW))
            assert read_response(api_server)[0] == 200
            latencies.append(time.monotonic() - started)
            time.sleep(0.05)
    for client in clients:
        client.join()
    print(f"peak RSS {[round(rss / MIB) for rss in peak.values()]} MiB; review latency max {max(latencies):.3f} s")
    assert max(peak.values()) < 200 * MIB, {pid: f"{rss / MIB:.0f} MiB" for pid, rss in peak.items()}
    assert max(latencies) < 1.0, f"slowest review during the storm: {max(latencies):.2f} s"
    assert 503 in results, f"no body was refused for the budget: {results}"
    assert server.workers() == workers, "no worker may die or restart"


# --- 3, 4, 6. every client error is a 4xx with a JSON body ------------------------------------------

BAD_CHUNKS = [
    ("chunk size not hex", b"zz\r\n{}\r\n0\r\n\r\n"),
    ("no CRLF after chunk data", b"2\r\n{}XX0\r\n\r\n"),
    ("bad chunk extension", b"2;\x01\r\n{}\r\n0\r\n\r\n"),
]


@pytest.mark.parametrize("case, body", BAD_CHUNKS, ids=[c[0] for c in BAD_CHUNKS])
def test_a_malformed_chunked_body_is_a_400_not_an_error(server, case, body):
    before = metric_value(server.metrics(), "netqos_admission_requests_total", decision="error")
    status, headers, payload = exchange(server, post(body, chunked=True))
    assert status == 400 and headers["content-type"] == "application/json", (case, payload)
    assert json.loads(payload)["error"]
    assert metric_value(server.metrics(), "netqos_admission_requests_total", decision="error") == before


def test_a_chunked_body_over_the_limit_is_413_never_cut_short(server):
    padded = REVIEW + b" " * (8 * MIB - len(REVIEW) + 1)  # cut at the limit, this would parse
    status, _, payload = exchange(server, post(chunks(padded, 64 * 1024), chunked=True))
    assert status == 413 and "limit is 8388608 bytes" in json.loads(payload)["error"]


HUGE_CHUNKS = [
    # chunked bodies whose size lines declare more than --max-body-bytes; a few bytes follow, then nothing
    ("a chunk size of 40 hex digits", b"f" * 40 + b"\r\n{", "a chunk of " + str(int("f" * 40, 16)) + " bytes"),
    ("one chunk over the limit", b"%x\r\n{" % (8 * MIB + 1), f"a chunk of {8 * MIB + 1} bytes"),
    ("the second chunk past the limit", b"2\r\n{}\r\n%x\r\n{" % (8 * MIB - 1), f"a chunk of {8 * MIB - 1} bytes"),
]


@pytest.mark.parametrize("case, body, declared", HUGE_CHUNKS, ids=[c[0] for c in HUGE_CHUNKS])
def test_a_chunk_declared_past_the_limit_is_413_at_once_not_at_the_body_deadline(server, case, body, declared):
    started = time.monotonic()
    status, headers, payload = exchange(server, post(body, chunked=True))
    assert status == 413 and headers["content-type"] == "application/json", (case, payload)
    assert declared in json.loads(payload)["error"] and "limit is 8388608 bytes" in json.loads(payload)["error"]
    assert time.monotonic() - started < BODY_DEADLINE, "answered at the body deadline, not when the size arrived"


@pytest.mark.parametrize("header", ["SCRIPT_NAME: /elsewhere", "X-Forwarded-Proto: http", "X-Forwarded-For: 10.0.0.1"])
def test_forwarding_headers_are_ignored_from_loopback(server, header):
    status, _, payload = exchange(server, post(REVIEW, extra=f"{header}\r\n"))
    assert status == 200 and json.loads(payload)["response"]["allowed"] is True


GUNICORN_ERRORS = [
    ("malformed request line", b"GARBAGE\r\n\r\n", 400),
    ("request line too long", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    ("too many headers", b"GET /healthz HTTP/1.1\r\n" + b"X-A: b\r\n" * 200 + b"\r\n", 431),
    ("unknown transfer coding", b"POST /mutate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: zstd-x\r\n\r\n", 501),
]


@pytest.mark.parametrize("case, request_, status", GUNICORN_ERRORS, ids=[c[0] for c in GUNICORN_ERRORS])
def test_errors_gunicorn_answers_itself_have_a_json_body(server, case, request_, status):
    got, headers, payload = exchange(server, request_)
    assert got == status, case
    assert headers["content-type"] == "application/json" and json.loads(payload)["error"], payload


# --- 5. every log line is JSON, handshake failures included -----------------------------------------


def _plain_http(server) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        closed_after(raw, 5)


def _stale_ca_bundle(server) -> None:
    """The API server with a caBundle of another CA: it rejects our certificate."""
    stranger = ssl.create_default_context()  # the system CAs, not ours
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        with pytest.raises(ssl.SSLCertVerificationError):
            stranger.wrap_socket(raw, server_hostname="localhost")


def _tls_1_0(server) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with warnings.catch_warnings():  # TLS 1.0 is deprecated: that is what the server must refuse
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = context.maximum_version = ssl.TLSVersion.TLSv1
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        with pytest.raises(ssl.SSLError):
            context.wrap_socket(raw, server_hostname="localhost")


def _connect_and_close(server) -> None:
    socket.create_connection(("127.0.0.1", server.port), timeout=5).close()


STORM = [("http_request", _plain_http), ("unknown_ca", _stale_ca_bundle), ("protocol_version", _tls_1_0)]


def test_a_tls_failure_storm_leaves_only_json_lines_and_counts_every_failure(server):
    metrics_before = server.metrics()
    lines_before = len(server.log.read_text().splitlines())
    started = time.monotonic()
    for _, attempt in STORM:
        attempt(server)
    for _ in range(300):
        _connect_and_close(server)
    time.sleep(0.5)  # the server logs after the client is gone
    seconds = time.monotonic() - started
    lines = server.log.read_text().splitlines()[lines_before:]
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            pytest.fail(f"not a JSON log line: {line!r}")
    failures = [r for r in records if r.get("logger") == "webhook.serving.handshake"]
    assert any(
        r.get("reason") == "unknown_ca"
        and "client rejected our certificate (unknown CA): is the caBundle current?" in r["message"]
        and r["peer"].startswith("127.0.0.1:")
        for r in failures
    ), failures
    # Each worker logs at most 10 lines and a summary per 10 s window; the storm touches the window
    # open when it starts (an earlier test's) and those it lasts into.
    windows = int(seconds // 10) + 2
    assert len(failures) <= 2 * windows * (10 + 1), f"rate-limited: {len(failures)} lines in {seconds:.1f} s"
    after = server.metrics()
    for reason, _ in STORM:
        assert metric_value(after, "netqos_tls_handshake_errors_total", reason=reason) > metric_value(
            metrics_before, "netqos_tls_handshake_errors_total", reason=reason
        ), reason
    eof = metric_value(after, "netqos_tls_handshake_errors_total", reason="eof")
    assert eof - metric_value(metrics_before, "netqos_tls_handshake_errors_total", reason="eof") == 300
    assert exchange(server, post(REVIEW))[0] == 200
