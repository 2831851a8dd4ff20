"""Hostile clients over a real socket: a worker survives what a broken or malicious client does."""

from __future__ import annotations

import json
import socket
import ssl
import time

import pytest

from harness.patches import pod_review
from harness.server import start_server

pytestmark = pytest.mark.process

REVIEW = json.dumps(pod_review({"metadata": {"labels": {"qos": "latency-sensitive"}}})).encode()


def test_a_body_shorter_than_its_content_length_does_not_hurt_the_server(tmp_path):
    """Over a real socket: the client promises more than it sends, then goes away."""
    with start_server(tmp_path, workers=1) as server:
        context = server.client_context()
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(
                    b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 5000\r\n\r\n" + REVIEW[:100]
                )
                tls.shutdown(socket.SHUT_WR)
                reply = b""
                deadline = time.monotonic() + 10
                try:
                    while time.monotonic() < deadline and (chunk := tls.recv(4096)):
                        reply += chunk
                except (ssl.SSLError, ConnectionResetError):
                    pass
        assert not reply.startswith(b"HTTP/1.1 5"), reply[:200]
        assert server.request("POST", "/mutate", REVIEW)[0] == 200, "the worker must keep serving"
        assert not [r for r in server.log_records() if r["level"] in ("ERROR", "CRITICAL")]
