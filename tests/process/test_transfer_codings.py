"""What a real server (gunicorn, gevent workers, TLS, the default --max-body-bytes of 3 MiB)
answers to each way a request may frame its body: Content-Length, chunked, neither, both, codings
it does not decode, bodies past the limit or cut short. docs/operations.md, "Request framing",
shows this table row for row (the last test compares them), so the doc says what this proves.
"""

from __future__ import annotations

import gzip
import json
import re
import socket
from collections.abc import Iterator

import pytest

from harness.patches import pod_review
from harness.server import Server, start_server
from tests.fixtures import REPO
from tests.process.test_hardening import chunks, read_response
from webhook.names import DEFAULT_MAX_BODY_BYTES

REVIEW = json.dumps(pod_review({"metadata": {"name": "p", "labels": {"qos": "latency-sensitive"}}})).encode()
BODY_DEADLINE = 2  # --body-timeout of this server, seconds
LIMIT = DEFAULT_MAX_BODY_BYTES


def head(*headers: str, version: str = "HTTP/1.1") -> bytes:
    lines = [f"POST /mutate {version}", "Host: x", "Content-Type: application/json", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


CL = f"Content-Length: {len(REVIEW)}"
TE = "Transfer-Encoding: chunked"

# (the request as docs/operations.md names it, what is sent, the status, a fragment of the error)
FRAMINGS = [
    ("`Content-Length` and the review", head(CL) + REVIEW, 200, None),
    ("`Transfer-Encoding: chunked` and the review in chunks", head(TE) + chunks(REVIEW, 100), 200, None),
    ("`Transfer-Encoding: Chunked` (any case)", head("Transfer-Encoding: Chunked") + chunks(REVIEW), 200, None),
    ("chunked, with a trailer section", head(TE) + chunks(REVIEW)[:-2] + b"X-Trailer: 1\r\n\r\n", 200, None),
    ("`Expect: 100-continue`", head(CL, "Expect: 100-continue") + REVIEW, 100, None),
    ("neither `Content-Length` nor `Transfer-Encoding` (the body is empty)", head() + REVIEW, 400, "not valid JSON"),
    ("`Content-Length: 0`", head("Content-Length: 0"), 400, "not valid JSON"),
    ("`Content-Length` over the limit", head(f"Content-Length: {LIMIT + 1}"), 413, "too large: 3145729 bytes"),
    (
        "chunked, the body over the limit",
        head(TE) + chunks(b" " * LIMIT + REVIEW, 65536),
        413,
        "a chunked body of more than 3145728 bytes",
    ),
    ("chunked, a chunk size line past the limit", head(TE) + b"f" * 40 + b"\r\n{", 413, "a chunk of"),
    ("chunked, a chunk size that is not hex", head(TE) + b"zz\r\n{}\r\n0\r\n\r\n", 400, "InvalidChunkSize"),
    ("`Content-Length` 5000, 100 bytes sent", head("Content-Length: 5000") + REVIEW[:100], 408, "100 bytes received"),
    ("chunked, a chunk cut short", head(TE) + b"7d0\r\n" + b"{" * 100, 408, "105 bytes received"),
    ("`Content-Length` and `Transfer-Encoding: chunked`", head(CL, TE) + chunks(REVIEW), 400, "CONTENT-LENGTH"),
    ("two `Content-Length` headers, even equal", head(CL, CL) + REVIEW, 400, "CONTENT-LENGTH"),
    (
        "`Content-Length` not a decimal number (`+5`, `-1`, `abc`)",
        head("Content-Length: +5") + REVIEW,
        400,
        "CONTENT-LENGTH",
    ),
    (
        "`Transfer-Encoding: chunked` in HTTP/1.0",
        head(TE, version="HTTP/1.0") + chunks(REVIEW),
        400,
        "TRANSFER-ENCODING",
    ),
    (
        "`Transfer-Encoding: chunked, chunked`",
        head("Transfer-Encoding: chunked, chunked") + chunks(REVIEW),
        400,
        "TRANSFER-ENCODING",
    ),
    ("`Transfer-Encoding: identity`", head("Transfer-Encoding: identity", CL) + REVIEW, 400, "TRANSFER-ENCODING"),
    ("`Transfer-Encoding` of an unknown coding", head("Transfer-Encoding: zstd-x"), 501, "zstd-x"),
    (
        "`Transfer-Encoding: gzip, chunked` with a gzip body",
        head("Transfer-Encoding: gzip, chunked") + chunks(gzip.compress(REVIEW)),
        501,
        "transfer coding 'gzip'",
    ),
    (
        "`Transfer-Encoding: deflate, chunked`, no body sent",
        head("Transfer-Encoding: deflate, chunked"),
        501,
        "transfer coding 'deflate'",
    ),
    (
        "`Transfer-Encoding: compress` and `Transfer-Encoding: chunked`, two headers",
        head("Transfer-Encoding: COMPRESS", TE) + chunks(REVIEW),
        501,
        "transfer coding 'COMPRESS'",
    ),
    ("`Transfer-Encoding: gzip` without chunked", head("Transfer-Encoding: gzip") + REVIEW, 400, "TRANSFER-ENCODING"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with start_server(tmp_path_factory.mktemp("framing"), "--body-timeout", str(BODY_DEADLINE)) as running:
        yield running


@pytest.mark.parametrize("case, request_, status, error", FRAMINGS, ids=[c[0] for c in FRAMINGS])
def test_the_answer_to_each_framing(server: Server, case: str, request_: bytes, status: int, error: str | None) -> None:
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=BODY_DEADLINE + 8)
    with server.client_context().wrap_socket(raw, server_hostname="localhost") as tls:
        tls.sendall(request_)
        got, headers, body = read_response(tls)
        if got == 100:  # the interim answer; the review follows it on the same connection
            assert read_response(tls)[0] == 200, case
    assert got == status, (case, body)
    if error is not None:
        assert headers["content-type"] == "application/json" and error in json.loads(body)["error"], body


ROW = re.compile(r"^\| (?P<case>.+?) \| (?P<status>\d{3})[^|]*\|", re.MULTILINE)


def test_docs_operations_shows_this_table_row_for_row() -> None:
    doc = (REPO / "docs/operations.md").read_text()
    section = doc.split("<!-- framing table: begin -->", 1)[1].split("<!-- framing table: end -->", 1)[0]
    documented = [(m["case"], int(m["status"])) for m in ROW.finditer(section)]
    assert documented == [(case, status) for case, _, status, _ in FRAMINGS]
