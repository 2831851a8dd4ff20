"""deploy/overlays/monitor and the chart's `monitor.*`: one replica of `netqos-webhook monitor` with
read-only permissions, serving the port its Service, its scrape annotations and its ServiceMonitor
name; the chart renders the overlay's objects (and nothing of them by default)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.fixtures import REPO
from webhook.commands.monitor import DEFAULT_METRICS_BIND

OVERLAY = REPO / "deploy/overlays/monitor"
CHART = REPO / "deploy/helm/netqos-webhook"
KUBECTL = shutil.which("kubectl")
READ_VERBS = {"get", "list", "watch"}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """deploy/base with the monitor and monitoring components, as a user's kustomization combines them."""
    if KUBECTL is None:
        pytest.skip("kubectl is not installed: cannot render deploy/ with 'kubectl kustomize'")
    tree = tmp_path_factory.mktemp("installation")
    components = [os.path.relpath(OVERLAY, tree), os.path.relpath(REPO / "deploy/overlays/monitoring", tree)]
    (tree / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(REPO / "deploy/base", tree)],
                "components": components,
            }
        )
    )
    done = subprocess.run([KUBECTL, "kustomize", str(tree)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def monitor_objects(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        o["kind"]: o
        for o in objs
        if (o["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "monitor"
        and o["kind"] != "ServiceMonitor"
    }


def test_the_overlay_is_valid_and_runs_one_monitor_replica(rendered: list[dict[str, Any]]) -> None:
    objs = monitor_objects(rendered)
    assert set(objs) == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
    }
    for obj in objs.values():
        kubernetes_validate.validate(obj, "1.28", strict=True)
    deployment = objs["Deployment"]
    assert deployment["spec"]["replicas"] == 1
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["netqos-webhook", "monitor"]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == objs["ServiceAccount"]["metadata"]["name"]


def test_the_monitor_may_only_read(rendered: list[dict[str, Any]]) -> None:
    objs = monitor_objects(rendered)
    verbs = {v for kind in ("ClusterRole", "Role") for rule in objs[kind]["rules"] for v in rule["verbs"]}
    assert verbs <= READ_VERBS, f"write verbs granted: {sorted(verbs - READ_VERBS)}"
    cluster_rules = objs["ClusterRole"]["rules"]
    assert {"list", "watch"} <= {v for r in cluster_rules if "pods" in r["resources"] for v in r["verbs"]}
    assert {"list", "watch"} <= {v for r in cluster_rules if "nodes" in r["resources"] for v in r["verbs"]}


def test_the_port_served_is_the_one_scraped(rendered: list[dict[str, Any]]) -> None:
    objs = monitor_objects(rendered)
    pod = objs["Deployment"]["spec"]["template"]
    [container] = pod["spec"]["containers"]
    port = int(DEFAULT_METRICS_BIND.rsplit(":", 1)[1])
    assert f"--metrics-bind=0.0.0.0:{port}" in container["args"]
    assert container["ports"] == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(port)
    assert objs["Service"]["spec"]["ports"][0]["targetPort"] == "metrics"
    [monitor] = [o for o in rendered if o["kind"] == "ServiceMonitor" and o["metadata"]["name"] == "netqos-monitor"]
    labels = objs["Service"]["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"


@pytest.fixture(scope="module")
def helm() -> str:
    done = subprocess.run([str(REPO / "scripts/helm"), "--path"], capture_output=True, text=True, timeout=600)
    if done.returncode == 3 and os.environ.get("CI", "").lower() != "true":
        pytest.skip(done.stderr.strip())
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def helm_template(helm: str, tmp: Path, *sets: str) -> list[dict[str, Any]]:
    args = [helm, "template", "netqos-webhook", str(CHART), "-n", "netqos-system"]
    for s in sets:
        args += ["--set", s]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=tmp)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def test_the_chart_renders_no_monitor_by_default(helm: str, tmp_path: Path) -> None:
    objs = helm_template(helm, tmp_path, "monitoring.serviceMonitor.enabled=true")
    assert not [o for o in objs if (o["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "monitor"]


def test_the_chart_renders_the_overlays_monitor(helm: str, tmp_path: Path, rendered: list[dict[str, Any]]) -> None:
    objs = helm_template(
        helm,
        tmp_path,
        "monitor.enabled=true",
        "monitor.dashboard.enabled=true",
        "monitoring.serviceMonitor.enabled=true",
    )
    chart, overlay = monitor_objects(objs), monitor_objects(rendered)
    assert set(chart) == set(overlay) | {"ConfigMap"}
    for kind in ("ClusterRole", "Role"):
        assert chart[kind]["rules"] == overlay[kind]["rules"], kind
    ours, theirs = (o["Deployment"]["spec"]["template"]["spec"]["containers"][0] for o in (chart, overlay))
    assert ours["command"] == theirs["command"] and ours["ports"] == theirs["ports"]
    assert set(theirs["args"]) <= set(ours["args"])
    for obj in chart.values():
        kubernetes_validate.validate(obj, "1.28", strict=True)
    dashboard = chart["ConfigMap"]["data"]["netqos-webhook.json"]
    assert dashboard == (REPO / "deploy/overlays/monitoring/dashboard.json").read_text().rstrip("\n")
    assert [o for o in objs if o["kind"] == "ServiceMonitor" and o["metadata"]["name"] == "netqos-monitor"]
