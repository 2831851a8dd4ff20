"""The cluster edge with the real kubernetes client: failures become one ClusterError message, and
nothing loads the client until a cluster is asked for."""

from __future__ import annotations

import http.server
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from webhook.cluster import ClusterError, list_nodes


def kubeconfig(tmp_path, server: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(f"""\
apiVersion: v1
kind: Config
clusters:
- name: demo
  cluster:
    server: {server}
    insecure-skip-tls-verify: true
users:
- name: demo
  user:
    token: not-a-real-token
contexts:
- name: demo
  context: {{cluster: demo, user: demo}}
current-context: demo
""")
    return str(path)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


def test_a_missing_kubeconfig_names_the_file(tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(ClusterError, match=f"cannot use kubeconfig {missing}: .*check the file and the context name"):
        list_nodes(missing)


def test_an_unknown_context_names_the_context(tmp_path):
    config = kubeconfig(tmp_path, "https://127.0.0.1:1")
    with pytest.raises(ClusterError, match=f"cannot use kubeconfig {config}, context prod: "):
        list_nodes(config, "prod")


def test_an_unreachable_api_server_fails_fast_with_its_address(tmp_path):
    port = closed_port()
    started = time.monotonic()
    with pytest.raises(ClusterError, match=rf"cannot reach the API server at https://127.0.0.1:{port} \(kubeconfig .*, context demo\): .*check that the cluster is running"):
        list_nodes(kubeconfig(tmp_path, f"https://127.0.0.1:{port}"), "demo")
    assert time.monotonic() - started < 10


def test_explaining_from_files_never_loads_the_kubernetes_client():
    code = (
        "import sys; from webhook import cli; "
        "assert cli.main(['explain', '--pod', 'deploy/examples/test-pod.yaml', '--nodes', 'deploy/examples/nodes.yaml']) == 0; "
        "assert 'kubernetes' not in sys.modules, 'kubernetes was imported'"
    )
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=root)
    assert done.returncode == 0, done.stderr


def test_a_forbidden_list_says_to_check_permissions(tmp_path):
    class Forbidden(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            body = b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}'
            self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Forbidden)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        address = f"http://127.0.0.1:{server.server_port}"
        with pytest.raises(ClusterError, match=rf"the API server at {address} \(kubeconfig .*\) refused to list nodes: HTTP 403 Forbidden; check that your user may list nodes"):
            list_nodes(kubeconfig(tmp_path, address))
    finally:
        server.shutdown()
        server.server_close()
