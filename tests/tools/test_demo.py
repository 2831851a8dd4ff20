"""scripts/demo.sh, walked offline: stand-ins for kubectl and netqos-webhook record every call and
answer like a minikube cluster, so the test checks the experiment's steps, their order, and what the
script says when something is missing or goes wrong. (On a real cluster, run the script itself.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fixtures import REPO

DEMO = REPO / "scripts/demo.sh"
BASH = shutil.which("bash")
TOOLS = ("bash", "dirname", "sed", "grep", "head", "seq", "sleep", "cat", "rm")

KUBECTL_STUB = r"""#!/usr/bin/env bash
echo "kubectl $*" >> "$CALLS"
case "$*" in
  *"get nodes -o name"*)
    [ -n "$UNREACHABLE" ] && { echo "The connection to the server 127.0.0.1:6443 was refused" >&2; exit 1; }
    printf 'node/minikube\nnode/fake-node-1\n' ;;
  *"jsonpath={.spec.nodeName}"*) printf '%s' "$BOUND_TO" ;;
  *"config current-context"*) echo minikube ;;
esac
exit 0
"""
NETQOS_STUB = r"""#!/usr/bin/env bash
echo "netqos-webhook $*" >> "$CALLS"
"""

pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")


def tools_dir(tmp_path: Path, stubs: dict[str, str]) -> Path:
    """A PATH with only the basic tools the script uses, plus `stubs`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} is not installed")
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
        f"{k} label node minikube net=low --overwrite",
        f"{k} label node fake-node-1 net=high --overwrite",
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


def test_cleanup_undoes_the_demo(tmp_path: Path) -> None:
    done, calls = run_demo(tmp_path, "--cleanup")
    assert done.returncode == 0, done.stderr
    assert calls[1:] == [
        "kubectl delete pod qos-demo-pod --ignore-not-found --force --grace-period=0",
        "kubectl delete node fake-node-1 --ignore-not-found",
        "kubectl label node minikube net-",
        "kubectl delete mutatingwebhookconfiguration netqos-webhook --ignore-not-found",
        f"kubectl delete -k {REPO}/deploy/base --ignore-not-found",
    ]


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
