"""`scripts/cluster up --nodes` and `down` as a user runs them, beside the session's cluster (so two
clusters with nodes run at once, on different ranges): a second `up` after a killed one works, an
`up` asking for another cluster while one is up is refused and leaves it running, and `down`
leaves nothing behind: no process, mount, network namespace, link, nftables table or cgroup."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import controlplane, nodes
from tests.fixtures import REPO

UP_TIMEOUT = 300


def cluster_command(directory: Path, *args: str, timeout: float = UP_TIMEOUT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, controlplane.CLUSTER_DIR_ENV: str(directory)}
    return subprocess.run(
        [str(REPO / "scripts/cluster"), *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO
    )


def leftovers(directory: Path, network: nodes.Network) -> list[str]:
    found = []
    if Path(f"/run/netns/{network.namespace}").exists():
        found.append(f"network namespace {network.namespace}")
    if Path(f"/sys/class/net/{network.host_link}").exists():
        found.append(f"link {network.host_link}")
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    if network.table in tables.split():
        found.append(f"nftables table {network.table}")
    found += [f"cgroup {p}" for p in Path("/sys/fs/cgroup").glob(f"*/{network.cgroup}")]
    marker = str(directory.resolve())
    with open("/proc/self/mountinfo") as mountinfo:
        found += [f"mount {line.split()[4]}" for line in mountinfo if marker in line.split()[4]]
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(f"process {entry.name}")
        except OSError:
            continue
    return found


@pytest.fixture
def directory() -> Iterator[Path]:
    """A short path: containerd's sockets live under it, and a unix socket's path has 107 bytes."""
    made = Path(tempfile.mkdtemp(prefix="netqos-e2e-", dir="/tmp"))
    yield made / "cluster"
    cluster_command(made / "cluster", "down", timeout=120)
    shutil.rmtree(made, ignore_errors=True)


def test_a_second_up_after_a_killed_one_works_a_different_one_is_refused_and_down_leaves_nothing(
    real_cluster, directory
):
    env = {**os.environ, controlplane.CLUSTER_DIR_ENV: str(directory)}
    output = directory.parent / "first-up.log"
    with open(output, "w") as log:
        first = subprocess.Popen(
            [str(REPO / "scripts/cluster"), "up", "--nodes", "1"],
            env=env,
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    state = directory / controlplane.STATE_FILE
    deadline = time.monotonic() + UP_TIMEOUT
    # killed once the kubelet runs: containers, mounts, the network and cgroups all exist
    while not (state.exists() and json.loads(state.read_text()).get("node_pids")):
        assert first.poll() is None, f"the first up ended before it was killed:\n{output.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "the first up never started its nodes"
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    killed = nodes.recorded(directory)
    assert killed is not None
    theirs = nodes.recorded(real_cluster.directory)
    assert theirs is not None and killed.slot != theirs.slot, "two clusters, two ranges"

    second = cluster_command(directory, "up", "--nodes", "1")
    assert second.returncode == 0, second.stderr
    assert "node fast-1 net=high" in second.stderr.splitlines()
    cluster = controlplane.attach(directory)
    assert cluster.nodes == ["fast-1"]
    node = cluster.get("/api/v1/nodes/fast-1")
    assert node is not None and node["metadata"]["labels"]["net"] == "high"
    network = nodes.recorded(directory)
    assert network is not None

    # a plain `up` now would lose the running cluster: refused (a usage error), the cluster kept
    plain = cluster_command(directory, "up")
    assert plain.returncode == 2, plain.stderr
    (refusal,) = plain.stderr.splitlines()[-1:]
    assert f"a cluster is up in {directory} (Kubernetes {cluster.kubernetes}, 1 node: fast-1 net=high)" in refusal
    assert "stop it first with 'scripts/cluster down'" in refusal
    assert controlplane.attach(directory).pids == cluster.pids
    assert all(health == "ok" for health in cluster.healthy().values()), cluster.healthy()
    again = cluster_command(directory, "up", "--nodes", "1")
    assert again.returncode == 0 and "a cluster is already up in" in again.stderr, again.stderr

    down = cluster_command(directory, "down", timeout=120)
    assert down.returncode == 0, down.stderr
    assert leftovers(directory, network) == []
    assert leftovers(directory, killed) == []


def test_every_kubelet_registers_device_plugins_in_its_own_directory_and_writes_nothing_on_the_hosts_var(
    real_cluster,
):
    # the kubelet's device-plugin socket is a constant path; shared, two kubelets starting together
    # fail with "bind: address already in use" (each removes the other's socket before listening)
    directory = real_cluster.directory
    registered = {}
    for name in real_cluster.nodes:
        kubelet = real_cluster.node_pids[f"kubelet-{name}"]
        seen = Path(f"/proc/{kubelet}/root/var/lib/kubelet/device-plugins/kubelet.sock")
        assert stat.S_ISSOCK(seen.stat().st_mode), f"the kubelet of {name} has no registration socket"
        own = nodes.overlay_dir(directory, name, "/var/lib") / "upper/kubelet/device-plugins/kubelet.sock"
        assert stat.S_ISSOCK(own.stat().st_mode), f"{name}'s socket is not under its directory: {own}"
        registered[name] = own.stat().st_mtime
    host = Path("/var/lib/kubelet/device-plugins/kubelet.sock")
    if host.exists():  # another kubelet's on this machine, never one of ours
        assert host.stat().st_mtime < min(registered.values()), f"{host} was written by one of the nodes"
    logs = Path("/var/log/containers")
    ours = [
        link for link in (logs.iterdir() if logs.is_dir() else []) if str(directory.resolve()) in os.path.realpath(link)
    ]
    assert ours == [], f"container-log links of the nodes on the host: {ours}"
