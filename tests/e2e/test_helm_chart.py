"""The Helm chart against the real API server: what `helm template` renders for the default values
and for every option of tests/process/test_helm_chart.py is accepted by `kubectl apply
--server-side --dry-run=server` (decoding, defaulting, validation and admission, nothing stored);
and a real `helm install`, `register`, `helm upgrade`, `helm uninstall` goes as the chart's README
says: the namespace from --create-namespace, the caBundle `register` writes kept by an upgrade,
everything gone after the uninstall.

Kinds whose API the cluster does not serve (the CRDs of cert-manager and the Prometheus operator)
are left out of the dry run, and must be exactly those.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import assert_accepted_by_server_dry_run, cli, served
from tests.process.test_helm_chart import CHART, NAMESPACE, OPTIONS, RELEASE, with_ca
from tests.process.test_helm_chart import helm as helm  # the fixture, by name
from webhook.certs import generate
from webhook.names import CONFIGURATION_NAME

NOT_SERVED = {"cert-manager.io/v1", "monitoring.coreos.com/v1"}


@pytest.fixture(scope="module")
def chart_namespace(cluster: Any) -> Any:
    """The release's namespace (a dry run does not create it, and namespaced objects need it)."""
    cluster.create_namespace(NAMESPACE)
    yield NAMESPACE
    cluster.delete_namespace(NAMESPACE)


@pytest.fixture(scope="module")
def ca_pem(tmp_path_factory: pytest.TempPathFactory) -> str:
    return generate(tmp_path_factory.mktemp("certs")).ca_cert.read_text()


@pytest.mark.parametrize("option", OPTIONS)
def test_every_rendered_object_is_accepted_by_a_server_side_dry_run(
    cluster: Any, chart_namespace: str, helm: str, ca_pem: str, tmp_path: Path, option: str
) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(with_ca(OPTIONS[option], ca_pem)))
    done = subprocess.run(
        [helm, "template", RELEASE, str(CHART), "-n", chart_namespace, "-f", str(values)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    rendered = [d for d in yaml.safe_load_all(done.stdout) if d]
    kept = [d for d in rendered if served(cluster, d)]
    assert {d["apiVersion"] for d in rendered if d not in kept} <= NOT_SERVED
    # The session's own registration (`register --url`) is a webhook configuration of the same
    # name: applied over it, the dry run would judge the merge of the two. Judge the chart's alone.
    for obj in kept:
        if obj["kind"] == "MutatingWebhookConfiguration":
            obj["metadata"]["name"] += "-dry-run"
    assert_accepted_by_server_dry_run(cluster, kept)


def run_helm(helm: str, cluster: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [helm, "--kubeconfig", str(cluster.kubeconfig), *args], capture_output=True, text=True, timeout=180
    )


def test_install_register_upgrade_uninstall(cluster: Any, unregistered: None, helm: str, tmp_path: Path) -> None:
    """The README's path for certificates.source external. The configuration has the default name,
    so the session's own registration is removed meanwhile (the `unregistered` fixture)."""
    namespace = "netqos-helm"
    installed = run_helm(helm, cluster, "install", RELEASE, str(CHART), "-n", namespace, "--create-namespace")
    assert installed.returncode == 0, installed.stderr
    assert "netqos-webhook register --namespace netqos-helm" in installed.stdout  # NOTES.txt
    deployment = cluster.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{RELEASE}")
    assert deployment is not None and deployment["spec"]["replicas"] == 2
    path = f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{CONFIGURATION_NAME}"
    config = cluster.get(path)
    assert config is not None and all("caBundle" not in w["clientConfig"] for w in config["webhooks"])
    assert {w["clientConfig"]["service"]["namespace"] for w in config["webhooks"]} == {namespace}

    certs = tmp_path / "certs"
    cli(cluster, "register", "--namespace", namespace, "--certs", str(certs), "--config", "deploy/base/policy.yaml")
    bundle = [w["clientConfig"]["caBundle"] for w in cluster.get(path)["webhooks"]]
    assert all(bundle)
    assert cluster.get(f"/api/v1/namespaces/{namespace}/secrets/{RELEASE}-tls") is not None

    upgraded = run_helm(helm, cluster, "upgrade", RELEASE, str(CHART), "-n", namespace, "--set", "replicas=3")
    assert upgraded.returncode == 0, upgraded.stderr
    assert cluster.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{RELEASE}")["spec"]["replicas"] == 3
    assert [w["clientConfig"]["caBundle"] for w in cluster.get(path)["webhooks"]] == bundle  # kept

    removed = run_helm(helm, cluster, "uninstall", RELEASE, "-n", namespace, "--wait")
    assert removed.returncode == 0, removed.stderr
    assert cluster.get(path) is None
    assert cluster.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{RELEASE}") is None
    cluster.delete_namespace(namespace)


def test_namespace_create_is_refused_in_a_namespace_that_exists(cluster: Any, helm: str) -> None:
    """Why namespace.create is off by default (the chart's README, "The namespace"): a namespace
    made beforehand (by a platform team, a GitOps tool, kubectl) cannot be adopted by the release,
    while the default installs into it."""
    namespace = "netqos-precreated"
    cluster.create_namespace(namespace)
    try:
        adopt = ["--set", "namespace.create=true", "--set", "fullnameOverride=ns-check"]
        refused = run_helm(helm, cluster, "install", "ns-check", str(CHART), "-n", namespace, *adopt)
        assert refused.returncode != 0
        assert f'Namespace "{namespace}" in namespace "" exists and cannot be imported' in refused.stderr
        installed = run_helm(
            helm, cluster, "install", "ns-check", str(CHART), "-n", namespace, "--set", "fullnameOverride=ns-check"
        )
        assert installed.returncode == 0, installed.stderr
        removed = run_helm(helm, cluster, "uninstall", "ns-check", "-n", namespace, "--wait")
        assert removed.returncode == 0, removed.stderr
    finally:
        cluster.delete_namespace(namespace)
