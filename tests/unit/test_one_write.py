"""The gevent worker's answer writer (`webhook.serving.worker.OneWrite`): gunicorn writes a response
head and then its body with two `sendall` calls; the connection gets them as one write, and every
byte in its order. tests/process/test_answer_writes.py counts the TLS records on a real server."""

from __future__ import annotations

import pytest

from webhook.serving.worker import OneWrite


class Connection:
    """What the writer is given: it records each call that reaches the connection."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes]] = []

    def sendall(self, data: bytes) -> None:
        self.calls.append(("sendall", bytes(data)))

    def send(self, data: bytes) -> int:
        self.calls.append(("send", bytes(data)))
        return len(data)

    def sendfile(self, file: object) -> None:
        self.calls.append(("sendfile", b"<file>"))

    def shutdown(self, how: int) -> None:
        self.calls.append(("shutdown", b""))

    def close(self) -> None:
        self.calls.append(("close", b""))


HEAD = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"


def _run(steps):
    conn = Connection()
    answer = OneWrite(conn)
    for step in steps:
        step(answer)
    answer.flush()
    return conn.calls


# (what gunicorn does, the steps, what reaches the connection)
CASES = [
    ("head and body", [lambda a: a.sendall(HEAD), lambda a: a.sendall(b"{}")], [("sendall", HEAD + b"{}")]),
    (
        "head and three chunks",
        [lambda a: a.sendall(HEAD), lambda a: a.sendall(b"1"), lambda a: a.sendall(b"2"), lambda a: a.sendall(b"3")],
        [("sendall", HEAD + b"1"), ("sendall", b"2"), ("sendall", b"3")],
    ),
    ("a head without a body (HEAD, 204)", [lambda a: a.sendall(HEAD)], [("sendall", HEAD)]),
    ("nothing written", [], []),
    (
        "100 Continue, then the answer",
        [lambda a: a.send(b"HTTP/1.1 100 Continue\r\n\r\n"), lambda a: a.sendall(HEAD), lambda a: a.sendall(b"{}")],
        [("send", b"HTTP/1.1 100 Continue\r\n\r\n"), ("sendall", HEAD + b"{}")],
    ),
    (
        "a file sent after the head",
        [lambda a: a.sendall(HEAD), lambda a: a.sendfile(None)],
        [("sendall", HEAD), ("sendfile", b"<file>")],
    ),
    (
        "an answer cut off after its head",
        [lambda a: a.sendall(HEAD), lambda a: a.shutdown(2), lambda a: a.close()],
        [("shutdown", b""), ("close", b"")],
    ),
]


@pytest.mark.parametrize(("what", "steps", "sent"), CASES, ids=[c[0] for c in CASES])
def test_the_head_leaves_with_the_first_body_bytes_and_every_byte_in_order(what, steps, sent):
    assert _run(steps) == sent, what


def test_a_memoryview_head_is_held_as_bytes():
    conn = Connection()
    answer = OneWrite(conn)
    buffer = bytearray(HEAD)
    answer.sendall(memoryview(buffer))
    buffer[:4] = b"XXXX"  # the caller may reuse its buffer once sendall returns
    answer.sendall(b"{}")
    assert conn.calls == [("sendall", HEAD + b"{}")]
