"""The `rebalance` scale benchmark runs end to end in smoke mode (a few hundred objects) and reports
what it measured; no timing is asserted here: docs/operations.md records the full-size figures,
measured with `scripts/bench --rebalance-scale`."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.fixtures import REPO


def test_rebalance_scale_smoke_reports_time_memory_and_the_plan_of_a_complete_run() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.rebalance_scale", "--smoke", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert (result["nodes"], result["pods"]) == (200, 2000)
    [run] = result["runs"]
    # 400 selected: 5 % opted out, 10 % on net=high nodes, 2 % pending; one pod per owner moves
    assert run["candidates"] == 340 and 0 < run["movable"] < run["candidates"] and run["exit_code"] == 3
    assert run["seconds"] > 0 and run["cpu_seconds"] > 0 and run["max_rss_mib"] > 10
