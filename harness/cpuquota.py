"""A process tree confined to a CPU quota, as the kubelet confines a container (Linux cgroups).

A pod's CPU request is what it is sure to get when its node is busy (its cgroup's `cpu.shares` /
`cpu.weight` against the others'); its limit is what it can never exceed (`cpu.cfs_quota_us` /
`cpu.max`). To see how the webhook behaves when it gets only its request, a test gives its
processes that much CPU as a hard quota: the least it would get on a node whose every other pod
uses its share. The CFS period is the kubelet's (100 ms).

Needs a writable cgroup CPU controller: cgroup v2 (`cpu.max`, with `+cpu` in the parent's
`cgroup.subtree_control`) or v1 (`cpu/cpu.cfs_quota_us`), as root in a container usually has.
`available()` says why not otherwise, so a test can skip naming the reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.procfs import children

PERIOD_US = 100_000  # the kubelet's CFS period
V1 = Path("/sys/fs/cgroup/cpu")
V2 = Path("/sys/fs/cgroup")


class QuotaUnavailable(RuntimeError):
    """No writable cgroup CPU controller; the message says what is missing."""


def _root() -> tuple[Path, str]:
    """(the directory new groups go under, "v1" | "v2")."""
    if (V1 / "cpu.cfs_quota_us").exists():
        return V1, "v1"
    if (V2 / "cgroup.controllers").exists():
        mine = V2 / Path(_own_v2_group()).relative_to("/")
        if "cpu" not in (mine / "cgroup.subtree_control").read_text().split():
            raise QuotaUnavailable(f"the cpu controller is not enabled below {mine} (cgroup.subtree_control)")
        return mine, "v2"
    raise QuotaUnavailable("no cgroup CPU controller at /sys/fs/cgroup/cpu (v1) or /sys/fs/cgroup (v2)")


def _own_v2_group() -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:] or "/"
    return "/"


def available() -> str | None:
    """None when a quota can be set here, else why not."""
    try:
        root, _ = _root()
    except (QuotaUnavailable, OSError) as err:
        return str(err)
    if not os.access(root, os.W_OK):
        return f"{root} is not writable (run as root, or in a container with its own cgroup)"
    return None


@contextmanager
def confined(pid: int, cpus: float, name: str) -> Iterator[Path]:
    """`pid` and its children (gunicorn's master and workers) limited to `cpus` CPUs while the
    block runs; moved back to the parent group and the group removed afterwards. Yields the
    group's directory (its `cpu.stat` counts the periods throttled)."""
    root, version = _root()
    group = root / f"{name}-{os.getpid()}"
    group.mkdir(exist_ok=True)
    quota = max(1000, round(cpus * PERIOD_US))
    if version == "v1":
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(quota))
    else:
        (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
    moved = [pid, *children(pid)]
    try:
        for each in moved:
            (group / "cgroup.procs").write_text(str(each))
        yield group
    finally:
        for left in (group / "cgroup.procs").read_text().split():
            try:
                (root / "cgroup.procs").write_text(left)
            except OSError:
                pass  # already gone
        group.rmdir()


def throttled_periods(group: Path) -> int:
    """CFS periods in which the group used up its quota and waited (`nr_throttled`)."""
    for line in (group / "cpu.stat").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "nr_throttled":
            return int(value)
    return 0
