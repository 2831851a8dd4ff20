"""scripts/demo.sh, walked offline: stand-ins for kubectl and netqos-webhook record every call and
answer like a minikube cluster, so the test checks the experiment's steps, their order, and what the
script says when something is missing or goes wrong. (On a real cluster, run the script itself.)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures import REPO

DEMO = REPO / "scripts/demo.sh"
BASH = shutil.which("bash")
TOOLS = ("bash", "dirname", "sed", "grep", "head", "seq", "sleep", "cat", "rm", "ps")

# Nodes as the environment says: NODES (every node), CREATED (those labelled netqos.io/demo=created),
# FOREIGN_NET (those with a net label the demo did not set), LABELLED (netqos.io/demo=labelled).
KUBECTL_STUB = r"""#!/usr/bin/env bash
echo "kubectl $*" >> "$CALLS"
case "$*" in
  *"get nodes -o name"*)
    [ -n "$UNREACHABLE" ] && { echo "The connection to the server 127.0.0.1:6443 was refused" >&2; exit 1; }
    printf "$NODES" ;;
  *"get nodes -l netqos.io/demo=created -o name"*) printf "$CREATED" ;;
  *"get nodes -l net,netqos.io/demo!=labelled -o name"*) printf "$FOREIGN_NET" ;;
  *"get nodes -l netqos.io/demo=labelled -o name"*) printf "$LABELLED" ;;
  *"jsonpath={.metadata.labels.net}"*) printf 'fast' ;;
  *"jsonpath={.spec.nodeName}"*) printf '%s' "$BOUND_TO" ;;
  *"config current-context"*) echo minikube ;;
esac
exit 0
"""
NETQOS_STUB = r"""#!/usr/bin/env bash
echo "netqos-webhook $*" >> "$CALLS"
if [ "$1" = serve ]; then  # a server that keeps running until stopped, as the real one does
  echo $$ > "$SERVER_PID"
  while :; do sleep 0.2; done
fi
"""
CURL_STUB = r"""#!/usr/bin/env bash
exit 0
"""

pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")


@pytest.fixture(autouse=True)
def _no_server_left(tmp_path: Path) -> Iterator[None]:
    """Whatever a test asserts, the stand-in server a --dev demo started does not outlive it."""
    yield
    pid_file = tmp_path / "server.pid"
    if pid_file.exists():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def tools_dir(tmp_path: Path, stubs: dict[str, str]) -> Path:
    """A PATH with only the basic tools the script uses, plus `stubs`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in TOOLS:
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} is not installed")
        (bin_dir / tool).unlink(missing_ok=True)
        (bin_dir / tool).symlink_to(found)
    for name, text in stubs.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def run_demo(
    tmp_path: Path, *args: str, stubs: dict[str, str] | None = None, **env: str
) -> tuple[subprocess.CompletedProcess, list[str]]:
    stubs = {"kubectl": KUBECTL_STUB, "netqos-webhook": NETQOS_STUB} if stubs is None else stubs
    calls = tmp_path / "calls"
    environment = {
        "PATH": str(tools_dir(tmp_path, stubs)),
        "CALLS": str(calls),
        "BOUND_TO": "fake-node-1",
        "NODES": "node/minikube\\nnode/fake-node-1\\n",
        "CREATED": "node/fake-node-1\\n",  # left by an earlier run of the demo
        "FOREIGN_NET": "",
        "LABELLED": "node/minikube\\n",
        "SERVER_PID": str(tmp_path / "server.pid"),
        "TMPDIR": str(tmp_path),  # the --dev server's pid file and log
        "HOME": str(tmp_path),
        "VENV": str(tmp_path / "no-venv"),  # not the repository's .venv: the stub on PATH answers
        **env,
    }
    done = subprocess.run([BASH, str(DEMO), *args], capture_output=True, text=True, env=environment, timeout=120)
    return done, calls.read_text().splitlines() if calls.exists() else []


def test_missing_prerequisites_are_all_named_with_what_to_do(tmp_path: Path) -> None:
    done, calls = run_demo(tmp_path, stubs={})
    assert done.returncode == 1
    assert "missing prerequisites" in done.stderr
    assert "- kubectl: install it" in done.stderr
    assert (
        f"- netqos-webhook: neither in {tmp_path}/no-venv/bin nor on the PATH; run {REPO}/scripts/venv "
        f"(or pip install -e {REPO}) or set NETQOS_WEBHOOK" in done.stderr
    )
    assert calls == []


def test_the_repositorys_virtual_environment_is_found_without_netqos_webhook_on_the_path(tmp_path: Path) -> None:
    """README's set-up makes .venv/bin/netqos-webhook, not a command on the PATH."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "netqos-webhook").write_text(NETQOS_STUB)
    (venv / "bin" / "netqos-webhook").chmod(0o755)
    done, calls = run_demo(tmp_path, "--context", "minikube", stubs={"kubectl": KUBECTL_STUB}, VENV=str(venv))
    assert done.returncode == 0, done.stderr
    assert f"$ {venv}/bin/netqos-webhook register --context minikube" in done.stdout
    assert any(call.startswith("netqos-webhook register --context minikube") for call in calls)


def test_build_needs_docker_and_a_cluster_to_load_into(tmp_path: Path) -> None:
    done, _ = run_demo(tmp_path, "--build")
    assert done.returncode == 1
    assert "- docker: needed by --build" in done.stderr
    assert "- minikube or kind: needed by --build" in done.stderr


def test_an_unreachable_cluster_is_named_and_nothing_is_changed(tmp_path: Path) -> None:
    done, calls = run_demo(tmp_path, "--context", "minikube", UNREACHABLE="1")
    assert done.returncode == 1
    assert (
        "cannot reach the cluster of context minikube: The connection to the server 127.0.0.1:6443 was refused"
        in done.stderr
    )
    assert calls == ["kubectl --context minikube get nodes -o name --request-timeout=10s"]


def test_walkthrough_follows_the_experiment_and_reports_the_binding(tmp_path: Path) -> None:
    done, calls = run_demo(tmp_path, "--context", "minikube")
    assert done.returncode == 0, done.stderr
    k = "kubectl --context minikube"
    steps = [
        f"{k} apply -f {REPO}/deploy/examples/fake-node.yaml",
        f"{k} label node fake-node-1 net=high netqos.io/demo=created --overwrite",
        f"{k} label node minikube net=low netqos.io/demo=labelled --overwrite",
        f"{k} apply -k {REPO}/deploy/base",
        f"netqos-webhook register --context minikube --config {REPO}/deploy/base/policy.yaml --certs {REPO}/certs",
        f"{k} -n netqos-system rollout status deployment/netqos-webhook --timeout=180s",
        f"{k} delete pod qos-demo-pod --ignore-not-found --force --grace-period=0",
        f"{k} apply -f {REPO}/deploy/examples/test-pod.yaml",
        f"{k} get pod qos-demo-pod -o jsonpath={{.spec.nodeName}}",
    ]
    positions = [calls.index(step) for step in steps]
    assert positions == sorted(positions), calls
    assert f"{k} get pod qos-demo-pod -o jsonpath={{.spec.affinity.nodeAffinity}}" in calls
    assert (
        "As with the NetQoS scheduler plugin: qos-demo-pod is bound to fake-node-1 (net=high), not minikube (net=low)"
        in done.stdout
    )


def test_a_pod_bound_elsewhere_fails_with_where_to_look(tmp_path: Path) -> None:
    done, _ = run_demo(tmp_path, BOUND_TO="minikube")
    assert done.returncode == 1
    assert "qos-demo-pod was bound to 'minikube', not fake-node-1" in done.stderr
    assert "a caBundle must be set" in done.stderr


def test_cleanup_undoes_the_demo_on_the_nodes_it_marked(tmp_path: Path) -> None:
    done, calls = run_demo(tmp_path, "--cleanup")
    assert done.returncode == 0, done.stderr
    assert [c for c in calls[1:] if " get " not in c] == [
        "kubectl delete pod qos-demo-pod --ignore-not-found --force --grace-period=0",
        "kubectl delete nodes -l netqos.io/demo=created",
        "kubectl label nodes -l netqos.io/demo=labelled net- netqos.io/demo-",
        "kubectl delete mutatingwebhookconfiguration netqos-webhook --ignore-not-found",
        f"kubectl delete -k {REPO}/deploy/base --ignore-not-found --wait=false",
    ]


def test_cleanup_leaves_alone_the_nodes_the_demo_did_not_create_or_label(tmp_path: Path) -> None:
    done, calls = run_demo(tmp_path, "--cleanup", CREATED="", LABELLED="", FOREIGN_NET="node/minikube\\n")
    assert done.returncode == 0, done.stderr
    assert not [c for c in calls if " node" in c and " get " not in c], calls
    assert "left node fake-node-1 alone: it lacks the label netqos.io/demo=created" in done.stdout


def test_a_real_node_with_a_net_label_the_demo_did_not_set_is_refused_before_anything_changes(tmp_path: Path) -> None:
    done, calls = run_demo(tmp_path, CREATED="", NODES="node/minikube\\n", FOREIGN_NET="node/minikube\\n")
    assert done.returncode == 1
    assert "node minikube already has the label net=fast, which the demo did not set" in done.stderr
    assert "--node NAME" in done.stderr
    assert [c for c in calls if " get " not in c] == [], calls


def test_another_node_is_chosen_with_node(tmp_path: Path) -> None:
    nodes = "node/minikube\\nnode/worker-2\\nnode/fake-node-1\\n"
    done, calls = run_demo(tmp_path, "--node", "worker-2", NODES=nodes, FOREIGN_NET="node/minikube\\n")
    assert done.returncode == 0, done.stderr
    assert "kubectl label node worker-2 net=low netqos.io/demo=labelled --overwrite" in calls
    assert not [c for c in calls if "label node minikube" in c]


def test_a_fake_node_the_demo_did_not_create_is_refused(tmp_path: Path) -> None:
    done, calls = run_demo(tmp_path, CREATED="")
    assert done.returncode == 1
    assert "node fake-node-1 exists and the demo did not create it" in done.stderr
    assert [c for c in calls if " get " not in c] == [], calls


def test_a_failing_dev_demo_stops_the_server_it_started(tmp_path: Path) -> None:
    stubs = {"kubectl": KUBECTL_STUB, "netqos-webhook": NETQOS_STUB, "curl": CURL_STUB}
    done, calls = run_demo(tmp_path, "--dev", stubs=stubs, BOUND_TO="minikube")
    assert done.returncode == 1, done.stderr
    assert "qos-demo-pod was bound to 'minikube'" in done.stderr
    pid = int((tmp_path / "server.pid").read_text())
    assert not _alive(pid), "the --dev server outlived the failed demo"
    assert f"stopped the local webhook (pid {pid})" in done.stdout


def test_a_dev_demo_on_a_loopback_url_listens_on_loopback_only(tmp_path: Path) -> None:
    stubs = {"kubectl": KUBECTL_STUB, "netqos-webhook": NETQOS_STUB, "curl": CURL_STUB}
    done, calls = run_demo(tmp_path, "--dev", "--url", "https://127.0.0.1:9443/mutate", stubs=stubs)
    try:
        assert done.returncode == 0, done.stderr
        serve = next(c for c in calls if c.startswith("netqos-webhook serve"))
        assert "--bind 127.0.0.1:9443 " in serve
    finally:
        cleanup, _ = run_demo(tmp_path, "--cleanup", stubs=stubs)
    assert not _alive(int((tmp_path / "server.pid").read_text())), cleanup.stdout


def _alive(pid: int) -> bool:
    deadline = time.monotonic() + 5  # SIGTERM was sent; the process may take a moment to go
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.05)
    return True


def test_help_describes_the_options(tmp_path: Path) -> None:
    done, calls = run_demo(tmp_path, "--help")
    assert done.returncode == 0
    assert "--dev" in done.stdout and "--cleanup" in done.stdout and "set -euo" not in done.stdout
    assert calls == []


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_shellcheck_finds_nothing() -> None:
    done = subprocess.run(["shellcheck", str(DEMO)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout


def test_demo_is_executable() -> None:
    assert os.access(DEMO, os.X_OK)
