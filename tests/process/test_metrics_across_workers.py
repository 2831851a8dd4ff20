"""/metrics and the log across gunicorn workers of a real server: totals add up whichever worker
answers, survive a worker's death, and the metrics directory is the server's to manage."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from harness.patches import pod_review
from harness.server import Server, metric_value, start_server

pytestmark = pytest.mark.process

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": {"qos": "latency-sensitive"}},
    "spec": {"containers": [{"name": "c", "image": "i"}]},
}


def test_metrics_add_up_across_workers_and_survive_a_worker_death(tmp_path):
    with start_server(tmp_path, workers=2) as server:
        sent = 60
        for i in range(sent):  # a new connection each time, so both workers answer some
            server.review(pod_review(POD, uid=f"w{i}"), conn=server.connect())
        records = server.log_records()
        assert any(r["logger"] == "gunicorn.error" and r["message"].startswith("Booting worker") for r in records), (
            "gunicorn's own lines must come through the same JSON formatter"
        )
        served_by = {r["process"] for r in records if r.get("message") == "review"}
        assert len(served_by) == 2, "the reviews did not reach both workers; the test proves nothing"
        status, body = server.request("GET", "/metrics", headers={"Accept": "application/openmetrics-text"})
        assert status == 200 and body.endswith(b"# EOF\n"), "OpenMetrics when asked for it"
        scrapes = [server.metrics() for _ in range(6)]  # answered by either worker
        for exposition in scrapes:
            assert metric_value(exposition, "netqos_admission_requests_total", decision="mutated") == sent
            assert metric_value(exposition, "netqos_rule_injections_total", rule="netqos") == sent
            assert metric_value(exposition, "netqos_admission_duration_seconds_count") == sent
            for certificate in ("serving", "ca"):
                assert (
                    metric_value(exposition, "netqos_certificate_expiry_timestamp_seconds", certificate=certificate)
                    > 1.7e9
                )
            assert metric_value(exposition, "netqos_build_info") == 1

        victim = server.workers()[0]
        os.kill(victim, signal.SIGKILL)
        server.wait_for_workers(2, exclude=[victim])
        exposition = server.metrics()
        assert metric_value(exposition, "netqos_admission_requests_total", decision="mutated") == sent, (
            "a dead worker's counts must stay in the totals"
        )
        files = os.listdir(_metrics_dir(server))
        assert not [f for f in files if f.startswith("gauge_live") and f.endswith(f"_{victim}.db")], (
            "the dead worker's live gauges were not removed (mark_process_dead)"
        )
    assert not _metrics_dir(server).exists(), "the temporary metrics directory outlived the server"


def _metrics_dir(server: Server) -> Path:
    (directory,) = {r["metrics_dir"] for r in server.log_records() if "metrics_dir" in r}
    return Path(directory)


def test_serve_empties_a_given_metrics_directory_at_start_and_leaves_it(tmp_path):
    given = tmp_path / "metrics"
    given.mkdir()
    (given / "counter_12345.db").write_bytes(b"an earlier run's counts")
    (given / "notes.txt").write_text("not prometheus_client's")
    with start_server(tmp_path, "--metrics-dir", str(given)) as server:
        server.review(pod_review(POD))
        assert metric_value(server.metrics(), "netqos_admission_requests_total") == 1
        assert not (given / "counter_12345.db").exists()
    assert (given / "notes.txt").exists(), "only *.db files are prometheus_client's to delete"


def test_the_next_start_removes_the_metrics_directory_of_a_killed_server_and_nothing_else(tmp_path):
    """SIGKILL leaves the master no chance to clean up; the next server's start does, touching only
    directories whose owner record says their master is gone."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {"TMPDIR": str(tmpdir)}
    unrelated = tmpdir / "netqos-metrics-not-made-by-serve"
    unrelated.mkdir()
    (unrelated / "counter_1.db").write_bytes(b"someone else's")
    with start_server(tmp_path / "alive", env=env) as alive:
        killed = start_server(tmp_path / "killed", env=env)
        killed_dir = _metrics_dir(killed)
        os.killpg(killed.process.pid, signal.SIGKILL)  # the master and its workers
        killed.process.wait(timeout=10)
        assert killed_dir.is_dir(), "a killed server's directory stays behind: the test proves nothing"
        with start_server(tmp_path / "next", env=env) as after:
            (line,) = [r for r in after.log_records() if "removed" in r]
            assert line["removed"] == [{"path": str(killed_dir), "pid": killed.process.pid}]
            assert line["kept"] == {"owner alive": 1, "no owner record": 1}
            assert not killed_dir.exists()
            assert _metrics_dir(alive).is_dir(), "a live server's directory was removed"
            assert (unrelated / "counter_1.db").read_bytes() == b"someone else's"
            assert _metrics_dir(after).is_dir()
