"""The Helm chart on real nodes: `helm install` with a certificate of one's own
(`certificates.source=secret`), under another name and namespace than deploy/base's; its
Deployment becomes ready on the kubelets and the API server calls it through its Service."""

from __future__ import annotations

import subprocess

from tests.e2e.conftest import WEBHOOK_CONFIGURATION, cli
from tests.e2e.realnodes.conftest import PodCreator
from tests.fixtures import REPO
from tests.process.test_helm_chart import helm as helm  # the fixture, by name

NAME = "netqos-helm"
CHART = REPO / "deploy/helm/netqos-webhook"


def test_helm_install_serves_through_its_service_on_the_real_nodes(
    real_cluster, installed, real_namespace, helm, tmp_path
):
    certs = tmp_path / "certs"
    cli(real_cluster, "certs", "--out", str(certs), "--service", NAME, "--namespace", NAME)
    real_cluster.create_namespace(NAME)
    real_cluster.kubectl(
        "-n", NAME, "create", "secret", "tls", f"{NAME}-tls",
        f"--cert={certs / 'tls.crt'}", f"--key={certs / 'tls.key'}",
    )  # fmt: skip
    env = real_cluster.env()
    command = [
        helm, "install", NAME, str(CHART), "-n", NAME, "--kubeconfig", env["KUBECONFIG"],
        "--set", f"fullnameOverride={NAME}", "--set", "certificates.source=secret",
        "--set-file", f"certificates.secret.caBundle={certs / 'ca.crt'}", "--wait", "--timeout", "180s",
    ]  # fmt: skip
    try:
        real_cluster.request("DELETE", WEBHOOK_CONFIGURATION)  # deploy/base's: only the chart's is called
        done = subprocess.run(command, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr
        ready = real_cluster.get(f"/apis/apps/v1/namespaces/{NAME}/deployments/{NAME}")["status"]
        assert ready.get("readyReplicas") == 2
        real_cluster.wait_webhook(active=True, timeout=60)
        creator = PodCreator(real_cluster, real_namespace, interval=0.2)
        creator.start()
        creator.stopping.wait(3)
        creator.stop()
        assert creator.created and not creator.errors and not creator.unmutated()
        service = real_cluster.get(f"/api/v1/namespaces/{NAME}/services/{NAME}")
        config = real_cluster.get(f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{NAME}")
        assert config["webhooks"][0]["clientConfig"]["service"]["name"] == service["metadata"]["name"]
    finally:
        subprocess.run(
            [helm, "uninstall", NAME, "-n", NAME, "--kubeconfig", env["KUBECONFIG"], "--wait"],
            capture_output=True,
            timeout=180,
        )
        real_cluster.delete_namespace(NAME)
        cli(real_cluster, "register", "--config", str(REPO / "deploy/base/policy.yaml"), "--certs", str(installed))
        real_cluster.wait_webhook(active=True, timeout=60)
