"""The ValidatingWebhookConfiguration by which the webhook checks its own policy ConfigMap, as
shipped: deploy/base's file is the generator's object (webhook/policy_review.py), kustomize and
the chart render it, with the caBundle or the CA injector of each way of making certificates.
(The chart's default rendering equalling deploy/base is tests/process/test_helm_chart.py's.)"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures import REPO
from tests.process.test_deploy import KUBECTL, dev_overlay_copy, kustomize
from tests.process.test_helm_chart import helm, render  # noqa: F401 (helm: a fixture)
from webhook.certs import generate
from webhook.policy_review import validating_configuration

pytestmark = pytest.mark.process

SHIPPED = REPO / "deploy/base/webhook-configuration/validatingwebhookconfiguration.yaml"
INJECT = "cert-manager.io/inject-ca-from"


def _validating(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == "ValidatingWebhookConfiguration"]


def test_the_shipped_file_is_the_generators_object() -> None:
    assert yaml.safe_load(SHIPPED.read_text()) == validating_configuration()


def test_it_fails_open_and_is_called_only_for_the_policy_configmap_being_written() -> None:
    (entry,) = validating_configuration()["webhooks"]
    assert entry["failurePolicy"] == "Ignore"
    assert entry["clientConfig"]["service"]["path"] == "/validate-policy"
    assert entry["rules"][0]["operations"] == ["CREATE", "UPDATE"] and entry["rules"][0]["resources"] == ["configmaps"]
    assert entry["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "netqos-system"}}
    assert [c["expression"] for c in entry["matchConditions"]] == [
        "object != null && object.metadata.name.startsWith('netqos-webhook-policy')"
    ]


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed: cannot render deploy/ with 'kubectl kustomize'")
def test_kustomize_renders_it_in_the_base_and_cert_manager_injects_its_ca(tmp_path: Path) -> None:
    base = kustomize(REPO / "deploy/base")
    assert _validating(base) == [validating_configuration()]
    config_map = next(o for o in base if o["kind"] == "ConfigMap")
    assert config_map["metadata"]["name"].startswith("netqos-webhook-policy-")  # what the matchCondition names
    (injected,) = _validating(kustomize(REPO / "deploy/overlays/cert-manager"))
    assert injected["metadata"]["annotations"] == {INJECT: "netqos-system/netqos-webhook-tls"}
    assert not _validating(kustomize(dev_overlay_copy(tmp_path)[0]))  # no Service to call there


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, "no caBundle"),
        ({"certificates": {"source": "certManager"}}, "injected"),
        ({"certificates": {"source": "secret", "secret": {"name": "my-tls"}}}, "caBundle"),
        ({"policy": {"existingConfigMap": {"name": "my-policy"}}}, "absent"),
        ({"fullnameOverride": "qos-webhook"}, "renamed"),
    ],
    ids=["external", "cert-manager", "secret", "existing ConfigMap", "fullname"],
)
def test_the_chart_renders_it_with_each_source_of_certificates(
    helm: str,  # noqa: F811
    tmp_path: Path,
    values: dict[str, Any],
    expected: str,
) -> None:
    ca = generate(tmp_path / "certs").ca_cert.read_text()
    if values.get("certificates", {}).get("source") == "secret":
        values["certificates"]["secret"]["caBundle"] = ca
    found = _validating(render(helm, tmp_path, values))
    if expected == "absent":
        assert found == []
        return
    (config,) = found
    (entry,) = config["webhooks"]
    client = entry["clientConfig"]
    if expected == "no caBundle":
        assert "caBundle" not in client and "annotations" not in config["metadata"]
    elif expected == "injected":
        assert config["metadata"]["annotations"] == {INJECT: "netqos-system/netqos-webhook-tls"}
    elif expected == "caBundle":
        assert base64.b64decode(client["caBundle"]).decode() == ca
    else:
        assert config["metadata"]["name"] == client["service"]["name"] == "qos-webhook"
        assert "startsWith('qos-webhook-policy')" in entry["matchConditions"][0]["expression"]
