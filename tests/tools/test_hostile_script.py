"""scripts/hostile's smoke run (a few seconds): a new connection is answered within 1 s during the
cheapest scenarios, and the script's own checks pass."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.fixtures import REPO

pytestmark = pytest.mark.process


def test_hostile_smoke_run_keeps_new_connections_answered(tmp_path):
    out = tmp_path / "hostile.json"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "hostile"),
            "--seconds",
            "1",
            "--json",
            str(out),
            "half-hello",
            "malformed",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = {r["scenario"]: r for r in json.loads(out.read_text())}
    assert set(results) == {"half-hello", "malformed"}
    for name, result in results.items():
        assert result["new_connection_ms_max"] < 1000 and result["log_lines_not_json"] == 0, (name, result)
    assert "| half-hello |" in done.stdout
