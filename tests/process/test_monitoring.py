"""deploy/overlays/monitoring: the ServiceMonitor scrapes the webhook's real Service over HTTPS with
the CA of its own TLS Secret; the alerts are valid PromQL (`promtool check rules`), fire as their
runbooks say (`promtool test rules`), name only metrics that exist, and each has a runbook in
docs/operations.md. rules.yaml (no operator) and prometheusrule.yaml (operator) are the same rules.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.fixtures import FIXTURES, REPO

MONITORING = REPO / "deploy/overlays/monitoring"
PROMTOOL = shutil.which("promtool")
KUBECTL = shutil.which("kubectl")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (Debian package 'prometheus'; .ci/run installs it)"
)
needs_kubectl = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed: cannot render deploy/ with 'kubectl kustomize'"
)


def rules() -> dict[str, Any]:
    return yaml.safe_load((MONITORING / "rules.yaml").read_text())


def alerts() -> list[dict[str, Any]]:
    return [r for group in rules()["groups"] for r in group["rules"] if "alert" in r]


def test_the_operator_and_plain_rule_files_hold_the_same_rules() -> None:
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert rule["spec"] == rules()


@needs_promtool
def test_promtool_accepts_every_rule() -> None:
    done = subprocess.run([PROMTOOL, "check", "rules", str(MONITORING / "rules.yaml")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in done.stdout


@needs_promtool
def test_alerts_fire_on_the_series_they_watch(tmp_path: Path) -> None:
    text = (FIXTURES / "monitoring/alerts_test.yaml").read_text().replace("- RULES", f"- {MONITORING / 'rules.yaml'}")
    cases = tmp_path / "alerts_test.yaml"
    cases.write_text(text)
    done = subprocess.run([PROMTOOL, "test", "rules", str(cases)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_alerts_on_the_webhook_name_only_metrics_it_exports() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from webhook.commands import monitor
    from webhook.serving import metrics

    exposition, _ = metrics.render()  # every family is declared, with or without samples yet
    families = {f.name for f in text_string_to_metric_families(exposition.decode())} | monitor.metric_names()
    used = {word for a in alerts() for word in _metric_names(a["expr"]) if word.startswith("netqos_")}
    assert used, "no alert reads the webhook's own metrics"
    unknown = {name for name in used if re.sub(r"_(total|bucket|count|sum)$", "", name) not in families}
    assert not unknown, f"alerts read metrics the webhook does not export: {sorted(unknown)}"


def _metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\b([a-z_][a-z0-9_]*)\s*[{\[]", expr)) | set(re.findall(r"\b(netqos_[a-z0-9_]+)\b", expr))


@pytest.mark.parametrize("alert", sorted({a["alert"] for a in alerts()}))
def test_every_alert_has_a_runbook_paragraph(alert: str) -> None:
    operations = (REPO / "docs/operations.md").read_text()
    assert f"\n#### {alert}\n" in operations, f"docs/operations.md has no '#### {alert}' runbook"
    for a in alerts():
        if a["alert"] == alert:
            assert a["annotations"]["runbook"] == f"docs/operations.md#{alert.lower()}"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """deploy/base with the monitoring component, as a user's kustomization would combine them."""
    if KUBECTL is None:
        pytest.skip("kubectl is not installed: cannot render deploy/ with 'kubectl kustomize'")
    tree = tmp_path_factory.mktemp("installation")
    (tree / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                # kustomize takes only relative paths
                "resources": [os.path.relpath(REPO / "deploy/base", tree)],
                "components": [os.path.relpath(MONITORING, tree)],
            }
        )
    )
    done = subprocess.run([KUBECTL, "kustomize", str(tree)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def one(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [o for o in objs if o["kind"] == kind]
    return found


@needs_kubectl
def test_the_component_adds_a_service_monitor_and_a_rule_to_a_valid_installation(
    rendered: list[dict[str, Any]],
) -> None:
    kinds = sorted(o["kind"] for o in rendered)
    assert kinds.count("ServiceMonitor") == 2 and kinds.count("PrometheusRule") == 1
    for obj in rendered:
        if obj["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # custom resources: no schema ships with Kubernetes; their fields are checked below
        kubernetes_validate.validate(obj, "1.28", strict=True)
    assert one(rendered, "PrometheusRule")["spec"] == rules()


@needs_kubectl
def test_the_service_monitor_scrapes_the_webhook_service_over_https_verifying_its_certificate(
    rendered: list[dict[str, Any]],
) -> None:
    [monitor] = [o for o in rendered if o["kind"] == "ServiceMonitor" and o["metadata"]["name"] == "netqos-webhook"]
    service, deployment = (one(rendered, k) for k in ("Service", "Deployment"))
    namespace = service["metadata"]["namespace"]
    assert monitor["metadata"]["namespace"] == namespace
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [namespace]}
    labels = service["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert (endpoint["scheme"], endpoint["path"]) == ("https", "/metrics")
    tls = endpoint["tlsConfig"]
    assert tls["serverName"] == f"{service['metadata']['name']}.{namespace}.svc"
    secrets = {v["secret"]["secretName"] for v in deployment["spec"]["template"]["spec"]["volumes"] if "secret" in v}
    assert tls["ca"]["secret"]["name"] in secrets and tls["ca"]["secret"]["key"] == "ca.crt"
    assert "insecureSkipVerify" not in tls
