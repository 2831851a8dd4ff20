"""The real-API-server scale benchmark (benchmarks/realscale.py) at 1/50 size, on a control plane of
its own (the world it loads would be in every other test's way): 100 nodes, 3,000 bound pods, and
a Deployment scaled 0 -> 200 under the webhook, the Go baseline and the admission policy. What is
asserted is what must hold at any size: every pod created carries the preference, nothing failed
open or was rejected, `status` agrees, every command read the pods in pages, and a list whose
continue token expired was read again from its first page. Then the monitor benchmark
(benchmarks/monitor_scale.py) on the same world, briefly: the monitor publishes, follows pod churn
and its gauges equal `status`'s report. Times are reported, never asserted: docs/performance.md
holds the full-size tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from harness import controlplane, gobuild
from tests.fixtures import REPO


def test_realscale_smoke_injects_every_replica_reads_in_pages_and_restarts_an_expired_list(tmp_path):
    out = tmp_path / "realscale.json"
    with controlplane.running(tmp_path / "cluster", gobuild.build().bin_dir) as cluster:  # a cluster of its own
        env = {**os.environ, controlplane.CLUSTER_DIR_ENV: str(cluster.directory)}
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.realscale", "--smoke", "--json", str(out)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=1500,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        monitored = subprocess.run(
            [sys.executable, "-m", "benchmarks.monitor_scale", "--fraction", "0.02", "--seconds", "5", "--rate", "40"]
            + ["--window", "50", "--json", str(tmp_path / "monitor.json")],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert monitored.returncode == 0, monitored.stdout[-3000:] + monitored.stderr[-3000:]
    monitor = json.loads((tmp_path / "monitor.json").read_text())
    assert monitor["agree"] and monitor["churn_events"] > 0, monitor
    assert monitor["gauges"]["states"]["injected"] > 0, monitor
    result = json.loads(out.read_text())
    assert (result["nodes"], result["pods"]) == (100, 3000)

    assert [s["variant"] for s in result["scaleup"]] == ["webhook", "go", "policy"]
    for scaled in result["scaleup"]:
        assert scaled["created"] == scaled["with_preference"] == scaled["status_selected"] == 200, scaled
        assert (scaled["status_missing"], scaled["fail_open"], scaled["rejected"]) == (0, 0, 0), scaled
    webhook = result["scaleup"][0]
    assert webhook["reviews"] >= 200 and webhook["p50_ms"] is not None

    runs = {r["what"]: r for r in result["runs"]}
    assert runs["floor"]["summary"] == {"pods": 3000, "pages": 6}
    for what in ("status", "rebalance", "explain"):
        assert runs[what]["exit_code"] in (0, 3), runs[what]
        assert runs[what]["requests"].get("LIST pods", 0) >= 6, runs[what]  # 3,000 bound pods, 500 a page
    assert result["expiry"] == {"pods": 3000, "restarts": 1, "first_read": 500, "requests": 1 + 1 + 6}
