"""The README's Quick start, as a newcomer follows it: the lines of its tagged block, read from
README.md (harness.quickstart), run in one `bash -euo pipefail` from a copy of the working tree as
a fresh clone holds it (no .venv, no certs/), without the caller's KUBECONFIG or virtual
environment. The block starts its own cluster (`scripts/cluster up --nodes 2`, in a directory of
the test's own, stopped at the end with `scripts/cluster down`) and builds and loads the image
itself (`scripts/image load`).

Each line exits 0 (a failure names the line), the labelled pod of deploy/examples/test-pod.yaml is
scheduled on the net=high node, and `netqos-webhook status`, the block's last line, exits 0. The
seconds of each line are printed.

Not on the session's cluster: its other tests install deploy/base under a CA of their own, which
the block's `register` rightly refuses to replace, so sharing would mean removing their
installation and restoring it (about 110 s, and only for an installation whose CA the session
holds); a cluster of its own costs about 40 s to start and stop, and is what a reader starts."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import controlplane, quickstart
from harness.controlplane import CLUSTER_DIR_ENV
from tests.e2e.realnodes.conftest import unavailable
from tests.fixtures import REPO

POD = "qos-demo-pod"  # deploy/examples/test-pod.yaml, in the default namespace
# The control plane's build and the image's layers are cached: minutes at most, unless the image's
# sources changed and its build stage runs again.
TIMEOUT = 1500
DOWN_TIMEOUT = 180
# What a newcomer's shell would not have: the caller's cluster, virtual environment, Python path.
NOT_A_NEWCOMERS = ("KUBECONFIG", "VIRTUAL_ENV", "VENV", "PYTHONPATH", "PYTHONHOME", CLUSTER_DIR_ENV)


@pytest.fixture
def cluster_directory() -> Iterator[Path]:
    """Where the block's `scripts/cluster up` starts the cluster; stopped and removed afterwards.
    A short path: containerd's sockets live under it, and a unix socket's path has 107 bytes."""
    reason = unavailable()
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}; CI must run the real-node tests")
        pytest.skip(reason)
    made = Path(tempfile.mkdtemp(prefix="netqos-qs-", dir="/tmp"))
    directory = made / "cluster"
    try:
        yield directory
    finally:
        down = subprocess.run(
            [str(REPO / "scripts/cluster"), "down"],
            env={**os.environ, CLUSTER_DIR_ENV: str(directory)},
            capture_output=True,
            text=True,
            timeout=DOWN_TIMEOUT,
        )
        shutil.rmtree(made, ignore_errors=True)
        assert down.returncode == 0, f"scripts/cluster down exited {down.returncode}: {down.stderr}"


@pytest.fixture
def fresh_clone(tmp_path: Path) -> Path:
    clone = tmp_path / "netqos-webhook"
    copied = quickstart.copy_working_tree(REPO, clone)
    assert copied and not (clone / ".venv").exists() and not (clone / "certs" / "ca.crt").exists()
    return clone


def newcomers_environment(cluster_directory: Path) -> dict[str, str]:
    """The caller's environment without its cluster or virtual environment, naming the test's
    cluster directory."""
    env = {key: value for key, value in os.environ.items() if key not in NOT_A_NEWCOMERS}
    venv_bin = str(REPO / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env[CLUSTER_DIR_ENV] = str(cluster_directory)
    return env


def test_the_readme_quick_start_puts_the_labelled_pod_on_the_net_high_node_and_status_exits_0(
    cluster_directory: Path, fresh_clone: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = quickstart.commands((fresh_clone / "README.md").read_text())
    run = quickstart.run(commands, fresh_clone, newcomers_environment(cluster_directory), TIMEOUT)
    with capsys.disabled():
        print(f"\nthe README's Quick start, line by line (seconds):\n{run.timings()}")
    failure = run.failure()
    assert failure is None, f"README.md: {failure}; the output ends:\n{run.output[-4000:]}"
    cluster = controlplane.attach(cluster_directory)
    pod = cluster.pod("default", POD)
    assert pod is not None, f"no pod {POD} after the Quick start"
    node_name = pod["spec"].get("nodeName")
    node = cluster.get(f"/api/v1/nodes/{node_name}") if node_name else None
    assert node is not None, f"{POD} is not scheduled: {pod.get('status')}"
    labels = node["metadata"].get("labels", {})
    assert labels.get("net") == "high", f"{POD} landed on {node_name} ({labels}), not on the net=high node"
