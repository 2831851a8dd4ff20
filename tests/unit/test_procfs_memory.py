"""harness.procfs reads a process's memory from /proc/PID/status, the one reader the benchmarks
and the hardening tests share: the resident set by default, its peak on request, in KiB or MiB."""

from __future__ import annotations

import os

import pytest

from harness import procfs


def test_the_resident_set_of_this_process_is_what_status_says():
    with open(f"/proc/{os.getpid()}/status") as f:
        said = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    # a Python interpreter with pytest loaded holds well over 10 MiB; the two reads are moments apart
    assert procfs.memory_kib(os.getpid()) == pytest.approx(said, rel=0.2)
    assert procfs.memory_mib(os.getpid()) > 10


def test_the_peak_is_never_below_the_resident_set():
    rss = procfs.memory_kib(os.getpid())
    assert procfs.memory_kib(os.getpid(), "VmHWM") >= rss


def test_a_field_the_status_lacks_is_an_error_naming_it_and_the_file():
    with pytest.raises(ValueError, match=rf"no VmNothing in /proc/{os.getpid()}/status"):
        procfs.memory_kib(os.getpid(), "VmNothing")
