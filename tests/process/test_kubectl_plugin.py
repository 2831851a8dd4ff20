"""`kubectl netqos ...`: the installed `kubectl-netqos` entry point run by the real kubectl as a plugin,
against the fake API server, answering as `netqos-webhook` does with kubectl's global flags honoured
wherever kubectl's users write them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import yaml

from harness import kubeapi
from tests.fixtures import REPO
from webhook.cli import kubectl_argv

SCRIPTS = Path(sys.executable).parent  # the virtualenv's console scripts: netqos-webhook, kubectl-netqos
FULL = REPO / "deploy/examples/full-cluster"
WRITTEN = yaml.safe_load((FULL / "pod.yaml").read_text())  # order-router in namespace trading

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


def in_cluster() -> dict:
    """order-router as the API server holds it once scheduled."""
    pod = json.loads(json.dumps(WRITTEN))
    pod["spec"]["nodeName"] = "std-1"
    pod["status"] = {"phase": "Running"}
    return pod


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kubeapi.Running]:
    nodes = yaml.safe_load((FULL / "nodes.yaml").read_text())["items"]
    pods = yaml.safe_load((FULL / "pods.yaml").read_text())["items"]
    snapshot = kubeapi.Snapshot().add_all([*nodes, *pods, kubeapi.namespace("trading"), in_cluster()])
    with kubeapi.serve(snapshot, tmp_path_factory.mktemp("kubeapi")) as running:
        yield running


def run(argv: Sequence[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """ARGV run as a user runs it, the virtualenv's scripts on the PATH (where kubectl finds its
    plugins); no $KUBECONFIG but what `env` sets."""
    environment = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    environment["PATH"] = f"{SCRIPTS}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(
        list(argv), capture_output=True, text=True, env={**environment, **(env or {})}, cwd=REPO, timeout=120
    )


@pytest.mark.parametrize(
    ("plugin", "command"),
    [
        # kubectl's way and netqos-webhook's: TYPE/NAME and -n after the command
        (
            ("explain", "pod/order-router", "-n", "trading", "--kubeconfig", "{kubeconfig}"),
            ("explain", "pod/order-router", "-n", "trading", "--kubeconfig", "{kubeconfig}"),
        ),
        # kubectl's global flags before the command
        (
            ("-n", "trading", "--kubeconfig", "{kubeconfig}", "explain", "pods/order-router", "-o", "json"),
            ("explain", "pods/order-router", "-n", "trading", "--kubeconfig", "{kubeconfig}", "-o", "json"),
        ),
        (
            ("--namespace=trading", "--kubeconfig={kubeconfig}", "--context", "fake", "explain", "po/order-router"),
            ("explain", "po/order-router", "-n", "trading", "--kubeconfig", "{kubeconfig}", "--context", "fake"),
        ),
        # a pod's name alone, with -n
        (
            ("-ntrading", "--kubeconfig", "{kubeconfig}", "explain", "order-router", "-o", "json"),
            ("explain", "pod/order-router", "-n", "trading", "--kubeconfig", "{kubeconfig}", "-o", "json"),
        ),
        (
            ("--kubeconfig", "{kubeconfig}", "status", "-o", "json"),
            ("status", "--kubeconfig", "{kubeconfig}", "-o", "json"),
        ),
        (
            ("--context", "fake", "--kubeconfig", "{kubeconfig}", "rebalance", "-o", "json"),
            ("rebalance", "--kubeconfig", "{kubeconfig}", "--context", "fake", "-o", "json"),
        ),
    ],
)
def test_kubectl_netqos_answers_as_netqos_webhook_does(
    plugin: Sequence[str], command: Sequence[str], api: kubeapi.Running
) -> None:
    fill = lambda argv: [word.format(kubeconfig=api.kubeconfig) for word in argv]  # noqa: E731
    through_kubectl = run(["kubectl", "netqos", *fill(plugin)])
    direct = run([str(SCRIPTS / "netqos-webhook"), *fill(command)])
    assert direct.returncode in (0, 3), direct.stderr  # 3: status and rebalance find this cluster wanting
    assert (through_kubectl.returncode, through_kubectl.stdout) == (direct.returncode, direct.stdout)
    assert through_kubectl.stderr.replace("kubectl netqos", "netqos-webhook") == direct.stderr


def test_without_flags_kubectl_netqos_reads_the_kubeconfig_of_the_environment_and_its_contexts_namespace(
    api: kubeapi.Running, tmp_path: Path
) -> None:
    """As kubectl: $KUBECONFIG, and the namespace of its current context when -n is not given."""
    config = kubeapi.write_kubeconfig(tmp_path / "kubeconfig", api.url, namespace="trading")
    done = run(["kubectl", "netqos", "explain", "order-router", "-o", "json"], env={"KUBECONFIG": str(config)})
    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["pod"], json.loads(done.stdout)["namespace"]) == ("order-router", "trading")


@pytest.mark.parametrize(
    ("argv", "first_line"),
    [
        (("--help",), "usage: kubectl netqos [-h] [--version] COMMAND ..."),
        (("status", "--help"), "usage: kubectl netqos status [-h]"),
        (("-n", "trading", "explain", "--help"), "usage: kubectl netqos explain [-h]"),
    ],
)
def test_the_help_names_the_program_kubectl_netqos(argv: Sequence[str], first_line: str) -> None:
    done = run(["kubectl", "netqos", *argv])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(first_line), done.stdout


def test_an_error_is_one_line_naming_kubectl_netqos(api: kubeapi.Running) -> None:
    done = run(["kubectl", "netqos", "-n", "shop", "--kubeconfig", str(api.kubeconfig), "explain", "pod/missing"])
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("kubectl netqos explain: pod missing not found in namespace shop"), done.stderr
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "moved"),
    [
        (["-n", "ns", "explain", "pod/x"], ["explain", "-n", "ns", "pod/x"]),
        (["--context=c", "-nns", "status"], ["status", "--context=c", "-nns"]),
        (["explain", "-n", "ns", "pod/x"], ["explain", "-n", "ns", "pod/x"]),  # already after it
        (["--help"], ["--help"]),
        (["-n", "ns"], ["-n", "ns"]),  # no command: the parser says what is missing
    ],
)
def test_kubectls_global_flags_before_the_command_move_after_it(argv: list[str], moved: list[str]) -> None:
    assert kubectl_argv(argv) == moved
