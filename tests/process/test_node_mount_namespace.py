"""Each real node's containerd and kubelet run in a mount namespace of their own in which the host's
/var/lib and /var/log are overlays: they read the host's files, and every write lands under the
node's directory (`harness.nodes.in_own_mount_namespace`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from harness import nodes

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="a mount namespace needs root and unshare"
)


def run_as_node(directory: Path, name: str, script: str) -> subprocess.CompletedProcess[str]:
    command = nodes.in_own_mount_namespace(directory, name, ["sh", "-c", script])
    return subprocess.run(command, capture_output=True, text=True, timeout=30)


@needs_root
@pytest.mark.parametrize("host_dir", nodes.PRIVATE_HOST_DIRS)
def test_a_write_under_an_overlaid_directory_lands_in_the_nodes_directory_and_never_on_the_host(tmp_path, host_dir):
    probe = f"netqos-probe-{uuid.uuid4().hex}"
    written = run_as_node(tmp_path, "node-a", f"mkdir {host_dir}/{probe} && echo a > {host_dir}/{probe}/f")
    assert written.returncode == 0, written.stderr
    assert not Path(host_dir, probe).exists()
    assert (nodes.overlay_dir(tmp_path, "node-a", host_dir) / "upper" / probe / "f").read_text() == "a\n"


@needs_root
def test_the_hosts_files_stay_readable_inside(tmp_path):
    host_file = next(p for p in Path("/var/lib").rglob("*") if p.is_file() and not p.is_symlink())
    read = run_as_node(tmp_path, "node-a", f"cat '{host_file}' | wc -c")
    assert read.returncode == 0, read.stderr
    assert int(read.stdout) == host_file.stat().st_size


@needs_root
def test_two_nodes_never_see_each_others_writes(tmp_path):
    probe = f"/var/lib/netqos-probe-{uuid.uuid4().hex}"
    assert run_as_node(tmp_path, "node-a", f"echo a > {probe}").returncode == 0
    other = run_as_node(tmp_path, "node-b", f"test -e {probe} && echo seen || echo unseen")
    assert other.stdout.strip() == "unseen"
    again = run_as_node(tmp_path, "node-a", f"cat {probe}")
    assert again.stdout == "a\n", "a node's writes persist across its processes"


@needs_root
def test_nothing_mounted_inside_remains_on_the_host_after_the_last_process_ends(tmp_path):
    assert run_as_node(tmp_path, "node-a", f"mount -t tmpfs netqos-probe {tmp_path}").returncode == 0
    with open("/proc/self/mountinfo") as mountinfo:
        assert [line for line in mountinfo if "netqos-node" in line or str(tmp_path) in line.split()[4]] == []


@pytest.mark.parametrize(
    ("directory", "refused_for"),
    [
        ("/tmp/netqos-e2e-x/cluster", None),
        ("/var/lib/netqos/cluster", "is under /var/lib, which every node overlays"),
        ("/var/log/cluster", "is under /var/log, which every node overlays"),
        ("/tmp/a,b/cluster", "has a ',' or ':' in its path"),
        ("/tmp/a:b/cluster", "has a ',' or ':' in its path"),
    ],
)
def test_a_cluster_directory_the_overlays_cannot_serve_is_refused_saying_why(directory, refused_for):
    if refused_for is None:
        nodes.check_directory(Path(directory))
        return
    with pytest.raises(nodes.NodesError, match=refused_for):
        nodes.check_directory(Path(directory))
