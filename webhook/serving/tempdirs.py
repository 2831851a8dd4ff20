"""The master's temporary directories: made with an owner record, swept at start once their owner is gone.

`serve` without `--metrics-dir` makes its workers' metrics directory (and, when it watches a
policy file, the workers' shared last-good policy) under `$TMPDIR` and removes it on a clean exit.
A master killed with SIGKILL (the OOM killer, a container's grace period running out) cannot, and
its directory stayed forever; in the Deployment that is the memory-backed `/tmp` emptyDir, which
outlives the container.

Each such directory holds one owner record, `OWNER_FILE`: JSON naming the master's pid (and its
start time, boot and PID namespace), and a file the master holds an exclusive `flock` on for its
whole life. The kernel drops the lock when the last process holding the open file ends, however
it ends (SIGKILL included; the forked workers share it, so orphaned workers still count), and in
whatever PID namespace it ran: a new container of the same pod gets a new namespace and, often,
the same pid 1, where a pid alone would read as alive forever. The record is locked before it is
given its name (written aside, locked, then renamed), so a sweeper never sees an unlocked record
of a live master.

`sweep` removes a directory only when all of these hold, and leaves everything else alone:
- its name starts with one of our prefixes and it is a real directory (not a symlink) of this user;
- it holds an owner record that parses (a directory without one was not made by this code, or
  by an older release: never touched);
- the record's lock can be taken: no process holds it;
- the recorded pid, where this process can judge it (same boot and PID namespace), is not the
  recorded process still running (same pid and start time).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

METRICS_PREFIX = "netqos-metrics-"
POLICY_PREFIX = "netqos-policy-"
PREFIXES = (METRICS_PREFIX, POLICY_PREFIX)
OWNER_FILE = ".netqos-owner.json"
RECORD_VERSION = 1

# Why a directory with one of our prefixes was left alone (the log line counts them by reason).
NOT_A_DIRECTORY = "not a directory of this user"
NO_RECORD = "no owner record"
BAD_RECORD = "owner record unreadable"
LOCKED = "owner alive"


@dataclass(frozen=True)
class OwnedDirectory:
    """A directory made by `make`; `lock_fd` is the open, locked owner record: keep it open."""

    path: Path
    lock_fd: int

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        try:
            os.close(self.lock_fd)
        except OSError:
            pass


@dataclass
class Sweep:
    """What `sweep` did: the directories removed (with the pid their record named) and the ones
    left alone, counted by reason."""

    removed: list[dict[str, Any]] = field(default_factory=list)
    kept: Counter[str] = field(default_factory=Counter)


def make(prefix: str, parent: str | Path | None = None) -> OwnedDirectory:
    """A new directory under `parent` (default `$TMPDIR`) holding this process's locked owner record."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    aside = path / f"{OWNER_FILE}.{os.getpid()}"
    fd = os.open(aside, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new and ours: never contended
        os.write(fd, json.dumps(_identity(os.getpid()) | {"version": RECORD_VERSION}).encode())
        os.replace(aside, path / OWNER_FILE)  # visible only once locked
    except BaseException:
        os.close(fd)
        shutil.rmtree(path, ignore_errors=True)
        raise
    return OwnedDirectory(path, fd)


def sweep(prefixes: tuple[str, ...] = PREFIXES, parent: str | Path | None = None) -> Sweep:
    """Remove the directories under `parent` (default `$TMPDIR`) whose owner is gone (module doc)."""
    base = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    done = Sweep()
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return done
    for name in names:
        if name.startswith(prefixes):
            _sweep_one(base / name, done)
    return done


def _sweep_one(path: Path, done: Sweep) -> None:
    try:
        info = os.lstat(path)
    except OSError:
        return  # gone meanwhile
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        done.kept[NOT_A_DIRECTORY] += 1
        return
    try:
        fd = os.open(path / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        done.kept[NO_RECORD] += 1
        return
    except OSError:
        done.kept[BAD_RECORD] += 1
        return
    try:
        record = _record(fd)
        if record is None:
            done.kept[BAD_RECORD] += 1
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            done.kept[LOCKED] += 1
            return
        if _still_running(record):  # the lock is free, yet the recorded process runs: be safe
            done.kept[LOCKED] += 1
            return
        shutil.rmtree(path, ignore_errors=True)
        done.removed.append({"path": str(path), "pid": record["pid"]})
    finally:
        os.close(fd)


def _record(fd: int) -> dict[str, Any] | None:
    """The owner record, when it is one this code wrote (a pid that is a positive integer)."""
    try:
        data = json.loads(os.read(fd, 4096))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    pid = data.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    return data


def _still_running(record: dict[str, Any]) -> bool:
    """Whether the recorded master provably runs: judged only within this boot and PID namespace,
    where the pid means the same process; a reused pid (another start time) is not it."""
    here = _identity(os.getpid())
    if record.get("boot_id") != here["boot_id"] or record.get("pid_namespace") != here["pid_namespace"]:
        return False
    ticks = _start_ticks(record["pid"])
    if ticks is None:
        return _signalable(record["pid"])
    return ticks == record.get("start_ticks")


def _signalable(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: it exists
    return True


def _identity(pid: int) -> dict[str, Any]:
    """pid, start time in clock ticks since boot (/proc/PID/stat field 22), boot id and PID
    namespace; None for what this system does not show."""
    return {
        "pid": pid,
        "start_ticks": _start_ticks(pid),
        "boot_id": _read("/proc/sys/kernel/random/boot_id"),
        "pid_namespace": _link("/proc/self/ns/pid"),
    }


def _start_ticks(pid: int) -> int | None:
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    # the command name in parentheses may hold spaces: the fields start after its ")"
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[19])


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _link(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None
