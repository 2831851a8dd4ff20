"""Serving properties that the API server's traffic depends on, on a real server.

No timing thresholds beyond "well under the API server's timeout": these hold on a loaded CI
machine or they are bugs.
"""

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import reviews
from harness.procfs import LISTEN, socket_inodes, tcp_sockets
from harness.server import SERVER_NAME, start_server
from webhook.serving.server import DEFAULT_KEEPALIVE_SECONDS, ServeOptions

pytestmark = pytest.mark.process

API_SERVER_IDLE_CONN_TIMEOUT = 90  # client-go's http.Transport IdleConnTimeout


def _review(uid: str) -> dict:
    document = reviews.review(reviews.pod())
    document["request"]["uid"] = uid
    return document


def _handshaken(server, count: int) -> list:
    """`count` TLS connections with the handshake done, that never send a request."""
    conns = []
    for _ in range(count):
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        conns.append(server.client_context().wrap_socket(raw, server_hostname=SERVER_NAME))
    return conns


def test_fifty_idle_handshaken_connections_do_not_block_a_review(server):
    idle = _handshaken(server, 50)
    try:
        # what the API server does after a burst: connections it dialled, never used
        started = time.monotonic()
        body = server.review(_review("9a0c2f3e-6b1d-4c8e-a7f5-1d2e3f4a5b6c"))
        elapsed = time.monotonic() - started
        assert body["response"]["uid"] == "9a0c2f3e-6b1d-4c8e-a7f5-1d2e3f4a5b6c"
        assert body["response"]["patchType"] == "JSONPatch"
        # sync/gthread workers answer this only when the idle connections go away (seconds)
        assert elapsed < 1.0, f"a review waited {elapsed:.2f} s behind idle connections"
        # and the idle connections are still being held open for their owner, not dropped
        probe = idle[0]
        probe.sendall(b"GET /healthz HTTP/1.1\r\nHost: " + SERVER_NAME.encode() + b"\r\n\r\n")
        assert probe.recv(64).startswith(b"HTTP/1.1 200")
    finally:
        for conn in idle:
            conn.close()


def test_keep_alive_outlasts_the_api_servers_idle_connections(server):
    assert ServeOptions(Path("c"), Path("k")).gunicorn_settings()["keepalive"] >= API_SERVER_IDLE_CONN_TIMEOUT
    assert DEFAULT_KEEPALIVE_SECONDS >= API_SERVER_IDLE_CONN_TIMEOUT
    conn = server.connect()
    try:
        assert server.post_review(_review("00000000-0000-4000-8000-00000000000a"), conn).status == 200
        time.sleep(3)  # longer than gunicorn's default keep-alive (2 s)
        body = server.review(_review("00000000-0000-4000-8000-00000000000b"), conn)
        assert body["response"]["uid"] == "00000000-0000-4000-8000-00000000000b"
    finally:
        conn.close()


def _listening_inodes(port: int) -> set[str]:
    return {inode for local, _, state, inode in tcp_sockets() if state == LISTEN and local == port}


def test_the_start_up_log_names_the_address_and_the_worker_class(server):
    """The workers bind (SO_REUSEPORT), the master holds no socket: gunicorn's own line would name
    no address ("Listening at:  (pid)")."""
    messages = [r["message"] for r in server.log_records() if r.get("logger") == "gunicorn.error"]
    listening = [m for m in messages if m.startswith("Listening at:")]
    assert listening == [
        f"Listening at: https://127.0.0.1:{server.port} (pid {server.process.pid}; "
        "a SO_REUSEPORT socket in each of 2 workers)"
    ]
    assert "Using worker: HardenedGeventWorker" in messages


def test_one_worker_is_named_in_the_singular(tmp_path):
    with start_server(tmp_path, workers=1) as one:
        messages = [r["message"] for r in one.log_records() if r.get("logger") == "gunicorn.error"]
    assert (
        f"Listening at: https://127.0.0.1:{one.port} (pid {one.process.pid}; a SO_REUSEPORT socket in its 1 worker)"
        in (messages)
    )


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")
def test_every_worker_listens_on_its_own_socket_and_connections_spread(server):
    # the CLI runs gunicorn in-process: the test's child process is the master
    workers = server.workers()
    assert len(workers) == 2
    listening = _listening_inodes(server.port)
    owned = [(socket_inodes(w) & listening) for w in workers]
    assert all(len(o) == 1 for o in owned), f"each worker should own one listening socket: {owned}"
    assert owned[0] != owned[1]

    before = {w: len(socket_inodes(w)) for w in workers}
    conns = []
    try:
        for i in range(32):
            conn = server.connect()
            assert server.post_review(_review(f"00000000-0000-4000-8000-{i:012x}"), conn).status == 200
            conns.append(conn)
        gained = {w: len(socket_inodes(w)) - before[w] for w in workers}
        assert sum(gained.values()) >= 32
        # hashed over two sockets, 32 connections all land on one worker with p = 2**-31
        assert all(g > 0 for g in gained.values()), f"connections per worker: {gained}"
    finally:
        for conn in conns:
            conn.close()


def test_the_serving_path_never_imports_kubernetes(tmp_path):
    """The server, the app and the whole review path load without the `kubernetes` client
    (a big import that only cluster-facing CLI commands need)."""
    import importlib.util

    assert importlib.util.find_spec("kubernetes") is not None, (
        "kubernetes is not installed: this test would prove nothing"
    )
    code = """
import sys
from pathlib import Path
import webhook.cli, webhook.serving.server, webhook.serving.app, webhook.admission, webhook.policy_file
from webhook.serving.app import AppConfig, create_app
from webhook.policy_file import default_policy
from webhook.serving.server import ServeOptions, WebhookServer
import gunicorn.workers.ggevent  # the worker class the server runs
options = ServeOptions(certfile=Path("tls.crt"), keyfile=Path("tls.key"))
options.gunicorn_settings()
parser = webhook.cli.build_parser()  # the CLI's serve command is built the same way
app = create_app(AppConfig(policy=default_policy()))
client = app.test_client()
assert client.post("/mutate", data=sys.stdin.buffer.read(), content_type="application/json").status_code == 200
print(sorted(m for m in sys.modules if m == "kubernetes" or m.startswith("kubernetes.")))
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(_review("00000000-0000-4000-8000-0000000000cc")).encode(),
        capture_output=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "[]"


def test_the_serving_package_imports_neither_kubernetes_nor_the_command_line(tmp_path):
    """webhook.serving is the serving process: the pure core below it, never the CLI above it."""
    code = """
import pkgutil, sys
import webhook.serving
for module in pkgutil.iter_modules(webhook.serving.__path__):
    __import__(f"webhook.serving.{module.name}")
above = ("kubernetes", "webhook.cli", "webhook.commands")
print(sorted(m for m in sys.modules if m.split(".")[0] == "kubernetes" or m.startswith(above)))
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "[]"
