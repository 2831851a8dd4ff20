"""The soak/fault script's smoke run (a few seconds): the real server under load survives a
worker's SIGKILL and a certificate rotation with no request lost beyond the killed worker's."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.process


def test_soak_smoke_run_loses_no_request_outside_the_killed_worker(tmp_path, run_python):
    out = tmp_path / "soak.json"
    done = run_python(
        "scripts/soak",
        "--duration",
        "6",
        "--rate",
        "60",
        "--connections",
        "4",
        "--warmup",
        "1",
        "--reconnect-every",
        "20",
        "--kill-at",
        "1.5",
        "--rotate-at",
        "3.5",
        "--json",
        str(out),
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["sent"] >= 0.9 * 60 * 6
    assert report["errors_elsewhere"] == 0
    assert report["errors"] == report["kill"]["failed_requests"] <= report["kill"]["killed_worker_connections"]
    assert report["kill"]["replacement_forked_after_ms"] is not None
    assert report["rotation"]["failed"] == 0 and report["rotation"]["new_connections_get_new_certificate"]
    assert all(report["checks"].values()), report["checks"]
    assert "| requests sent / answered |" in done.stdout
