"""The `status` and `rebalance` scale benchmarks run end to end in smoke mode (a few hundred
objects) and report what they measured; no timing is asserted here: docs/operations.md records the
full-size figures, measured with `scripts/bench --status-scale` and `scripts/bench --rebalance-scale`."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from tests.fixtures import REPO


def smoke_runs(module: str) -> list[dict[str, Any]]:
    """The runs of `python -m MODULE --smoke --json`, after checking the cluster's size."""
    done = subprocess.run(
        [sys.executable, "-m", module, "--smoke", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert (result["nodes"], result["pods"]) == (200, 2000)
    runs: list[dict[str, Any]] = result["runs"]
    for run in runs:
        assert run["seconds"] > 0 and run["cpu_seconds"] > 0 and run["max_rss_mib"] > 10
        assert run["lists"] > 0 and run["objects"] > 0 and run["bytes"] > 0
    return runs


def test_status_scale_smoke_reports_time_memory_and_reads_of_a_complete_run_beside_the_floor() -> None:
    floor, run = smoke_runs("benchmarks.status_scale")
    # the floor: every pod of the 2,000, in pages of 500
    assert floor["tree"] == "floor" and (floor["lists"], floor["objects"]) == (4, 2000)
    assert run["tree"] == "this tree" and run["selected"] == 400 and run["missing"] == 60 and run["exit_code"] == 3


def test_rebalance_scale_smoke_reports_time_memory_reads_and_the_plan_of_a_complete_run_beside_the_floor() -> None:
    (run,) = smoke_runs("benchmarks.rebalance_scale")
    # 400 selected: 5 % opted out, 10 % on net=high nodes, 2 % pending; one pod per owner moves
    assert run["candidates"] == 340 and 0 < run["movable"] < run["candidates"] and run["exit_code"] == 3
    assert run["floor_seconds"] > 0 and run["objects"] >= 2000  # every bound pod, and the pending ones
