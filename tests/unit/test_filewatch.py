"""webhook.serving.filewatch: one stat per interval, and what each look reports."""

import os

import pytest

from harness.clock import ManualClock
from webhook.serving.filewatch import FileWatch, Look, signature


@pytest.fixture
def files(tmp_path):
    paths = [tmp_path / "tls.crt", tmp_path / "tls.key"]
    for p in paths:
        p.write_text("v1")
    return paths


def _replace(path, text):
    """As a Secret volume does: a new file (new inode) swapped in under the same name."""
    new = path.with_suffix(".new")
    new.write_text(text)
    os.replace(new, path)


def test_nothing_is_looked_at_before_the_interval_passes(files):
    clock = ManualClock(100.0)
    watch = FileWatch(files, 1.0, clock, signature(files))
    _replace(files[0], "v2")
    assert watch.look() is Look.NOT_DUE
    clock.now += 1.0
    assert watch.look() is Look.CHANGED
    assert watch.look() is Look.NOT_DUE
    clock.now += 1.0
    assert watch.look() is Look.UNCHANGED


@pytest.mark.parametrize("seen, first", [(None, Look.CHANGED), ("now", Look.UNCHANGED)])
def test_the_first_look_compares_with_what_the_caller_was_built_from(files, seen, first):
    watch = FileWatch(files, 1.0, ManualClock(100.0), signature(files) if seen else None)
    assert watch.look(force=True) is first


def test_a_missing_file_is_reported_once_and_its_return_is_a_change(files):
    clock = ManualClock(100.0)
    watch = FileWatch(files, 1.0, clock, signature(files))
    files[1].unlink()
    assert watch.look(force=True) is Look.GONE
    assert isinstance(watch.error, FileNotFoundError)
    assert watch.look(force=True) is Look.UNCHANGED
    files[1].write_text("v1")
    assert watch.look(force=True) is Look.CHANGED
