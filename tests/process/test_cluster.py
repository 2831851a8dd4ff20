"""The cluster edge with the real kubernetes client: failures become one ClusterError message, and
nothing loads the client until a cluster is asked for."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from kubernetes.client import ApiException
from urllib3.exceptions import ConnectTimeoutError, MaxRetryError, NewConnectionError, ProtocolError

from harness.kubeapi import ScriptedAPI
from tests.fixtures import REPO
from webhook.cluster import ClusterError, Connection, KubeconfigError, _request
from webhook.commands import clusterread
from webhook.commands.flags import ClusterArgs


def list_nodes(kubeconfig: str, context: str | None = None) -> list[dict]:
    """Every Node of the cluster, read as the commands read it."""
    with clusterread.reader(ClusterArgs(kubeconfig, context)) as reader:
        return reader.restarting(lambda: list(clusterread.nodes(reader)))


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
    with pytest.raises(
        KubeconfigError, match=f"cannot read kubeconfig {missing}: No such file or directory; check the path"
    ):
        list_nodes(missing)


def test_an_unknown_context_names_the_context(tmp_path):
    config = kubeconfig(tmp_path, "https://127.0.0.1:1")
    with pytest.raises(
        KubeconfigError, match=f"cannot use kubeconfig {config}, context prod: .*check the file and the context name"
    ):
        list_nodes(config, "prod")


def test_an_unreachable_api_server_fails_fast_with_its_address(tmp_path):
    port = closed_port()
    started = time.monotonic()
    with pytest.raises(
        ClusterError,
        match=rf"cannot reach the Kubernetes API server at https://127.0.0.1:{port} \(kubeconfig .*, context demo\): "
        r".*check that the cluster is running",
    ):
        list_nodes(kubeconfig(tmp_path, f"https://127.0.0.1:{port}"), "demo")
    assert time.monotonic() - started < 10


def test_explaining_from_files_never_loads_the_kubernetes_client():
    code = (
        "import sys; from webhook import cli; "
        "assert cli.main(['explain', '--pod', 'deploy/examples/test-pod.yaml', "
        "'--nodes', 'deploy/examples/nodes.yaml']) == 0; "
        "assert 'kubernetes' not in sys.modules, 'kubernetes was imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr


def answering(status: int, body: bytes) -> ScriptedAPI:
    """A loopback API server that answers every request with `status` and `body`."""
    return ScriptedAPI(lambda _request: (status, body))


def test_nodes_are_the_items_as_the_api_server_sent_them(tmp_path):
    node = {
        "metadata": {"name": "n1", "labels": {"net": "high"}, "creationTimestamp": "2024-05-01T10:00:00Z"},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {"images": [{"sizeBytes": 1}]},
    }
    body = json.dumps({"kind": "NodeList", "apiVersion": "v1", "items": [node]}).encode()
    with answering(200, body) as api:
        assert list_nodes(kubeconfig(tmp_path, api.url)) == [node]


def test_an_answer_that_is_not_json_is_one_message(tmp_path):
    with answering(200, b"<html>login</html>") as api:
        with pytest.raises(
            ClusterError,
            match=rf"the API server at {api.url} \(kubeconfig .*\) did not answer the list of nodes with a JSON object",
        ):
            list_nodes(kubeconfig(tmp_path, api.url))


def test_a_forbidden_list_says_to_check_permissions(tmp_path):
    body = b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}'
    with answering(403, body) as api:
        with pytest.raises(
            ClusterError,
            match=rf"the API server at {api.url} \(kubeconfig .*\) refused to list nodes: HTTP 403 Forbidden; "
            r"check that your user may list nodes",
        ):
            list_nodes(kubeconfig(tmp_path, api.url))


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (
            NewConnectionError(
                "HTTPSConnection(host='10.0.0.1', port=6443)",
                "Failed to establish a new connection: [Errno 111] Connection refused",
            ),
            "[Errno 111] Connection refused",
        ),
        (
            MaxRetryError(
                None,
                "/api/v1/nodes",
                ConnectTimeoutError(
                    "<HTTPSConnection(host='10.0.0.1', port=6443) at 0x7f>",
                    "Connection to 10.0.0.1 timed out. (connect timeout=5)",
                ),
            ),
            "Connection to 10.0.0.1 timed out. (connect timeout=5)",
        ),
        (
            ProtocolError("<urllib3.connection.HTTPSConnection object at 0x7f>: Connection aborted."),
            "Connection aborted",
        ),
        (
            ApiException(
                status=0, reason="SSLError\n[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed (_ssl.c:1006)"
            ),
            "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed (_ssl.c:1006)",
        ),
    ],
)
def test_a_connection_failure_is_said_without_urllib3s_wrapping(failure, expected):
    def send():
        raise failure

    cluster = Connection(SimpleNamespace(host="https://10.0.0.1:6443"), "kubeconfig k")
    with pytest.raises(ClusterError) as err:
        _request(cluster, "list nodes", send, forbidden="")
    assert str(err.value) == (
        f"cannot reach the Kubernetes API server at https://10.0.0.1:6443 (kubeconfig k): {expected}; "
        "check that the cluster is running and that --kubeconfig/--context point at it"
    )


def test_only_the_cluster_module_imports_the_kubernetes_client():
    package = REPO / "webhook"
    importers = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if re.search(r"^\s*(from|import) kubernetes\b", path.read_text(), re.MULTILINE)
    )
    assert importers == ["cluster.py"]


class SilentServer:
    """A loopback socket that accepts every connection and never says a byte: an API server that
    hangs (an overloaded one, or a load balancer in front of a dead one). Records when each
    connection arrived."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self.accepted: list[float] = []  # time.monotonic() of each connection
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            self.accepted.append(time.monotonic())
            self._held.append(conn)

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        for conn in self._held:
            conn.close()
        self._listener.close()


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_an_api_server_that_accepts_and_never_answers_fails_within_10_seconds_in_one_line(tmp_path, scheme):
    with SilentServer() as silent:
        config = kubeconfig(tmp_path, f"{scheme}://127.0.0.1:{silent.port}")
        done = subprocess.run(
            [sys.executable, "-m", "webhook", "status", "--kubeconfig", config],
            capture_output=True,
            text=True,
            timeout=120,
        )
        ended = time.monotonic()
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"cannot reach the Kubernetes API server at {scheme}://127.0.0.1:{silent.port}" in done.stderr
    assert "timed out" in done.stderr
    # From the first connection (the command's start-up is not the API server's fault) to the end:
    # one deadline, no retries stacking up.
    assert silent.accepted and ended - silent.accepted[0] < 10, f"connections at {silent.accepted}, ended {ended}"


BROKEN_KUBECONFIGS = [
    (
        "an exec credential plugin that is not installed",
        """\
apiVersion: v1
kind: Config
clusters:
- name: demo
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: demo
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: no-such-credential-plugin, args: [token]}
contexts:
- name: demo
  context: {cluster: demo, user: demo}
current-context: demo
""",
        "its credential plugin (user.exec) failed: [Errno 2] No such file or directory: 'no-such-credential-plugin'",
    ),
    (
        "an empty server",
        """\
apiVersion: v1
kind: Config
clusters:
- name: demo
  cluster: {server: ""}
users:
- name: demo
  user: {token: t}
contexts:
- name: demo
  context: {cluster: demo, user: demo}
current-context: demo
""",
        "the cluster's server (clusters[].cluster.server) is empty, not an https URL of an API server",
    ),
    (
        "a server without a scheme",
        """\
apiVersion: v1
kind: Config
clusters:
- name: demo
  cluster: {server: "10.0.0.1:6443"}
users:
- name: demo
  user: {token: t}
contexts:
- name: demo
  context: {cluster: demo, user: demo}
current-context: demo
""",
        "the cluster's server (clusters[].cluster.server) is '10.0.0.1:6443', not an https URL",
    ),
    ("a list", "- apiVersion: v1\n- kind: Config\n", "is a list, not a kubeconfig"),
]


@pytest.mark.parametrize("case, text, fragment", BROKEN_KUBECONFIGS, ids=[c[0] for c in BROKEN_KUBECONFIGS])
@pytest.mark.parametrize("command", ["status", "register"])
def test_an_unusable_kubeconfig_is_one_line_naming_the_problem_and_exit_code_2(tmp_path, case, text, fragment, command):
    config = tmp_path / "kubeconfig"
    config.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "webhook", command, "--kubeconfig", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, f"library log lines or warnings leaked: {done.stderr}"
    assert done.stderr.startswith(f"netqos-webhook {command}: ") and fragment in done.stderr
    assert str(config) in done.stderr
    assert not (tmp_path / "certs").exists(), "register writes no certificate for a cluster it cannot use"
