"""The Grafana dashboard (deploy/overlays/monitoring/dashboard.json, made by scripts/dashboard):
the committed file is what the generator writes, every panel's query is valid PromQL, and every
query names only metrics netqos-webhook exports (the server's and the monitor's), or the API
server's metrics of our webhook calls that the alerts read too."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures import REPO

DASHBOARD = REPO / "deploy/overlays/monitoring/dashboard.json"
PROMTOOL = shutil.which("promtool")


def queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of every panel."""
    board = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p.get("targets", ())]


def metric_names(expr: str) -> set[str]:
    """The series an expression reads: names followed by a selector or a range, and bare netqos_ names."""
    return set(re.findall(r"\b([a-z_][a-z0-9_]*)\s*[{\[]", expr)) | set(re.findall(r"\b(netqos_[a-z0-9_]+)\b", expr))


def exported() -> set[str]:
    from prometheus_client.parser import text_string_to_metric_families

    from webhook.commands import monitor
    from webhook.serving import metrics

    exposition, _ = metrics.render()
    return {f.name for f in text_string_to_metric_families(exposition.decode())} | monitor.metric_names()


def read_by_alerts() -> set[str]:
    rules = yaml.safe_load((REPO / "deploy/overlays/monitoring/rules.yaml").read_text())
    return {n for g in rules["groups"] for r in g["rules"] for n in metric_names(r["expr"])}


def test_the_committed_dashboard_is_what_the_generator_writes() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts/dashboard"), "--check"], capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0, done.stderr


def test_the_chart_ships_the_same_dashboard() -> None:
    shipped = REPO / "deploy/helm/netqos-webhook/files/dashboard.json"
    assert shipped.read_bytes() == DASHBOARD.read_bytes()


def test_the_dashboard_shows_the_outcome_and_the_webhook() -> None:
    text = " ".join(expr for _, expr in queries())
    for needed in (
        'netqos_monitor_latency_sensitive_pods{node_class="fast"}',  # the share on fast nodes
        'netqos_monitor_selected_pods{state="missing"}',
        "netqos_monitor_stranded_pods",
        "netqos_admission_duration_seconds_bucket",  # the webhook's latency
        "apiserver_admission_webhook_fail_open_count",
        'decision=~"error|invalid"',
    ):
        assert needed in text, f"no panel reads {needed}"


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian package 'prometheus')")
def test_every_panel_query_parses(tmp_path: Path) -> None:
    """One recording rule per query: `promtool check rules` parses each expression."""
    rules: list[dict[str, Any]] = [
        {"record": f"dashboard:query_{i}", "expr": expr} for i, (_, expr) in enumerate(queries())
    ]
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run([str(PROMTOOL), "check", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules)} rules found" in done.stdout


def test_every_query_names_only_metrics_the_project_exports() -> None:
    known = exported()
    unknown = {
        (title, name)
        for title, expr in queries()
        for name in metric_names(expr)
        if re.sub(r"_(total|bucket|count|sum)$", "", name) not in known and name not in read_by_alerts()
    }
    assert not unknown, f"panels read metrics nothing exports: {sorted(unknown)}"
    apiserver = {n for _, e in queries() for n in metric_names(e) if not n.startswith("netqos_")}
    assert apiserver <= {n for n in read_by_alerts() if n.startswith("apiserver_admission_webhook_")}
