"""The master's temporary directories: `sweep` removes one only when its owner record says its
master is gone, and leaves everything else under $TMPDIR alone (webhook.serving.tempdirs)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from webhook.serving import tempdirs
from webhook.serving.tempdirs import BAD_RECORD, LOCKED, NO_RECORD, NOT_A_DIRECTORY, OWNER_FILE

NO_SUCH_PID = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # above any pid the kernel hands out


def _record(directory: Path, **changes: object) -> None:
    """An owner record as `make` writes it, for this process unless `changes` say otherwise, and
    not locked by anyone."""
    record = tempdirs._identity(os.getpid()) | {"version": tempdirs.RECORD_VERSION} | changes
    (directory / OWNER_FILE).write_text(json.dumps(record))


def _unlocked(tmp: Path, **changes: object) -> Path:
    directory = tmp / f"{tempdirs.METRICS_PREFIX}x"
    directory.mkdir()
    (directory / "counter_1.db").write_bytes(b"samples")
    _record(directory, **changes)
    return directory


def _dead_master(tmp: Path) -> Path:
    return _unlocked(tmp, pid=NO_SUCH_PID, start_ticks=1)


def _pid_reused(tmp: Path) -> Path:
    """This process's pid, but another start time: the recorded master is gone, its pid reused."""
    mine = tempdirs._identity(os.getpid())["start_ticks"]
    return _unlocked(tmp, start_ticks=mine + 1)


def _other_namespace(tmp: Path) -> Path:
    """A master of another PID namespace (an earlier container of the pod): the free lock decides."""
    return _unlocked(tmp, pid_namespace="pid:[1]", pid=1)


def _policy_dir_of_dead_master(tmp: Path) -> Path:
    directory = tmp / f"{tempdirs.POLICY_PREFIX}x"
    directory.mkdir()
    _record(directory, pid=NO_SUCH_PID)
    return directory


REMOVED: list[tuple[str, Callable[[Path], Path]]] = [
    ("master dead", _dead_master),
    ("pid reused by another process", _pid_reused),
    ("master of another PID namespace, lock free", _other_namespace),
    ("shared policy directory of a dead master", _policy_dir_of_dead_master),
]


@pytest.mark.parametrize(("case", "make"), REMOVED, ids=[c for c, _ in REMOVED])
def test_a_directory_whose_master_is_gone_is_removed(tmp_path, case, make):
    directory = make(tmp_path)
    done = tempdirs.sweep(parent=tmp_path)
    assert not directory.exists(), case
    assert [entry["path"] for entry in done.removed] == [str(directory)]
    assert not done.kept


def _live_master(tmp: Path) -> Path:
    return tempdirs.make(tempdirs.METRICS_PREFIX, tmp).path  # this process holds the lock


def _record_unlocked_but_master_runs(tmp: Path) -> Path:
    """The lock is free but the recorded process (this one, same start time) runs: kept."""
    return _unlocked(tmp)


def _no_record(tmp: Path) -> Path:
    directory = tmp / f"{tempdirs.METRICS_PREFIX}someone-elses"
    directory.mkdir()
    (directory / "data").write_text("not ours")
    return directory


def _not_json(tmp: Path) -> Path:
    directory = _no_record(tmp)
    (directory / OWNER_FILE).write_text("pid=12")
    return directory


def _no_pid(tmp: Path) -> Path:
    directory = _no_record(tmp)
    (directory / OWNER_FILE).write_text(json.dumps({"pid": "12"}))
    return directory


def _record_is_a_symlink(tmp: Path) -> Path:
    elsewhere = tmp / "elsewhere.json"
    elsewhere.write_text(json.dumps({"pid": NO_SUCH_PID}))
    directory = _no_record(tmp)
    (directory / OWNER_FILE).symlink_to(elsewhere)
    return directory


def _symlink(tmp: Path) -> Path:
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    target = _dead_master(elsewhere)
    (tmp / f"{tempdirs.METRICS_PREFIX}link").symlink_to(target)
    return target


def _file(tmp: Path) -> Path:
    path = tmp / f"{tempdirs.METRICS_PREFIX}file"
    path.write_text(json.dumps({"pid": NO_SUCH_PID}))
    return path


KEPT: list[tuple[str, Callable[[Path], Path], str]] = [
    ("its master runs (holds the lock)", _live_master, LOCKED),
    ("lock free but the recorded master still runs", _record_unlocked_but_master_runs, LOCKED),
    ("no owner record: not made by serve", _no_record, NO_RECORD),
    ("owner record not JSON", _not_json, BAD_RECORD),
    ("owner record without a pid", _no_pid, BAD_RECORD),
    ("owner record is a symlink", _record_is_a_symlink, BAD_RECORD),
    ("a symlink with our prefix, to a dead master's directory", _symlink, NOT_A_DIRECTORY),
    ("a file with our prefix", _file, NOT_A_DIRECTORY),
]


@pytest.mark.parametrize(("case", "make", "reason"), KEPT, ids=[c for c, _, _ in KEPT])
def test_anything_else_is_left_alone_and_counted_by_reason(tmp_path, case, make, reason):
    kept = make(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    done = tempdirs.sweep(parent=tmp_path)
    assert kept.exists(), case
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before, "something was touched"
    assert done.removed == []
    assert dict(done.kept) == {reason: 1}


def test_names_without_our_prefixes_are_not_even_looked_at(tmp_path):
    directory = tmp_path / "netqos-bench-x"
    directory.mkdir()
    _record(directory, pid=NO_SUCH_PID)
    done = tempdirs.sweep(parent=tmp_path)
    assert directory.exists() and not done.removed and not done.kept


def test_make_locks_the_record_before_it_has_its_name_and_remove_deletes_the_directory(tmp_path):
    made = tempdirs.make(tempdirs.METRICS_PREFIX, tmp_path)
    assert made.path.name.startswith(tempdirs.METRICS_PREFIX)
    assert sorted(os.listdir(made.path)) == [OWNER_FILE], "no record left aside under another name"
    record = json.loads((made.path / OWNER_FILE).read_text())
    assert record["pid"] == os.getpid()
    assert dict(tempdirs.sweep(parent=tmp_path).kept) == {LOCKED: 1}
    made.remove()
    assert not made.path.exists()


def test_a_directory_whose_master_ended_and_released_the_lock_is_removed(tmp_path):
    made = tempdirs.make(tempdirs.METRICS_PREFIX, tmp_path)
    os.close(made.lock_fd)  # what the kernel does when the master dies; the record still names us
    record = json.loads((made.path / OWNER_FILE).read_text())
    (made.path / OWNER_FILE).write_text(json.dumps(record | {"pid": NO_SUCH_PID}))
    done = tempdirs.sweep(parent=tmp_path)
    assert done.removed == [{"path": str(made.path), "pid": NO_SUCH_PID}]
