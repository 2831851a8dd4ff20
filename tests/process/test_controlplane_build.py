"""The control plane's build (harness.gobuild.build) when `go build` outlasts its
timeout: one error naming the release, the time waited and how to go on, not a traceback of
subprocess.TimeoutExpired. A stand-in `go` that never finishes: a real cold build takes an hour."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from harness import gobuild


def test_a_build_that_outlasts_its_timeout_is_one_error_saying_how_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go = tmp_path / "go"
    go.write_text('#!/bin/sh\n[ "$1" = env ] && { echo go1.26.8; exit 0; }\nexec sleep 30\n')
    go.chmod(0o755)
    monkeypatch.setenv(gobuild.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(gobuild.BUILD_TIMEOUT_ENV, "1")
    log = io.StringIO()
    with pytest.raises(gobuild.BuildError) as raised:
        gobuild.build(str(go), log=log, of=gobuild.release("1.37"))
    assert str(raised.value) == (
        "go build of Kubernetes v1.37.2 did not finish within 1 s; what it compiled is in Go's build cache, "
        "so running it again resumes; set $NETQOS_BUILD_TIMEOUT (seconds) to wait longer"
    )
    assert "(a cold build takes 15-80 minutes on two cores" in log.getvalue()
