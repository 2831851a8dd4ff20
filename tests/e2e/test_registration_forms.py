"""The two documented ways of calling the webhook, one after the other, on the real API server:
the in-cluster Service (`kubectl apply -k deploy/base`, then `register`) and a URL (`register
--url`, `scripts/demo.sh --dev`). `url` and `service` are exclusive in a clientConfig, and
server-side apply cannot remove what another manager owns: register switches the entries it is
told to call the other way, in both directions, and kubectl's own apply of the base then works."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from harness.controlplane import Cluster
from harness.server import Server, free_port
from harness.waiting import until
from tests.e2e.conftest import WEBHOOK_CONFIGURATION, cli, manifest, node_affinity, register
from tests.fixtures import REPO

BASE = str(REPO / "deploy" / "base")
NAMESPACE = "netqos-system"


def client_configs(cluster: Cluster) -> list[dict]:
    config = cluster.get(WEBHOOK_CONFIGURATION) or {}
    return [w["clientConfig"] for w in config.get("webhooks", [])]


def apply_base(cluster: Cluster) -> None:
    applied = cluster.kubectl("apply", "-k", BASE, check=False)
    assert applied.returncode == 0, applied.stderr


@pytest.fixture
def base_installed(cluster: Cluster, webhook: Server) -> Iterator[None]:
    """deploy/base applied by kubectl over no registration (its Service form, kubectl's fields);
    afterwards the session's registration is back and the base's namespace is gone."""
    cluster.request("DELETE", WEBHOOK_CONFIGURATION)
    until(lambda: cluster.get(f"/api/v1/namespaces/{NAMESPACE}") is None, f"an earlier {NAMESPACE} gone", 90)
    apply_base(cluster)
    assert [sorted(c) for c in client_configs(cluster)] == [["service"]]
    yield
    register(cluster, webhook)
    cluster.delete_namespace(NAMESPACE)


def test_register_url_over_the_base_and_register_back_to_the_service(cluster, webhook, base_installed, namespace):
    url = f"https://127.0.0.1:{webhook.port}/mutate"
    done = cli(cluster, "register", "--url", url, "--certs", str(webhook.certs.directory))
    assert "switched netqos.netqos.io to clientConfig.url" in done.stderr + done.stdout
    assert [c.get("url") for c in client_configs(cluster)] == [url]
    assert all("service" not in c for c in client_configs(cluster))
    cluster.wait_webhook(active=True)
    pod = manifest("deploy/examples/test-pod.yaml")
    created = cluster.create(pod, namespace)
    assert node_affinity(created), "the API server called the webhook at the URL"

    # back: register without --url, then the base applies cleanly again; the in-cluster Service
    # serves under a CA of its own, which replaces the loopback server's in the caBundle (--force)
    done = cli(cluster, "register", "--certs", str(webhook.certs.directory.parent / "service-certs"), "--force")
    assert "switched netqos.netqos.io to clientConfig.service" in done.stderr + done.stdout
    assert [sorted(c) for c in client_configs(cluster)] == [["caBundle", "service"]]
    apply_base(cluster)
    assert [sorted(c) for c in client_configs(cluster)] == [["caBundle", "service"]]


@pytest.mark.skipif(shutil.which("curl") is None, reason="scripts/demo.sh --dev needs curl")
def test_demo_dev_runs_on_a_cluster_with_the_base_installed(cluster, base_installed, nodes, tmp_path: Path):
    """scripts/demo.sh --dev as a user runs it, its server on loopback: the pod is bound to the
    fake node, and --cleanup leaves the node it did not create as it was."""
    real = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "worker-1", "labels": {"kubernetes.io/hostname": "worker-1"}},
        "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    cluster.create(real)
    url = f"https://127.0.0.1:{free_port()}/mutate"
    env = {**os.environ, **cluster.env(), "TMPDIR": str(tmp_path), "NETQOS_WEBHOOK": str(_netqos())}
    demo = [str(REPO / "scripts" / "demo.sh"), "--dev", "--url", url]
    try:
        done = subprocess.run(demo, capture_output=True, text=True, timeout=180, env=env)
        assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr}"
        assert "qos-demo-pod is bound to fake-node-1 (net=high), not worker-1 (net=low)" in done.stdout
        assert [c.get("url") for c in client_configs(cluster)] == [url]
    finally:
        cleanup = subprocess.run([*demo[:1], "--cleanup"], capture_output=True, text=True, timeout=180, env=env)
    assert cleanup.returncode == 0, cleanup.stderr
    worker = cluster.get("/api/v1/nodes/worker-1") or {}
    assert worker["metadata"]["labels"] == real["metadata"]["labels"], "the demo left its marks on worker-1"
    assert cluster.get("/api/v1/nodes/fake-node-1") is None
    assert "stopped the local webhook" in cleanup.stdout


def _netqos() -> Path:
    """The netqos-webhook of the interpreter running the tests (the repository's .venv)."""
    import sys

    found = Path(sys.executable).parent / "netqos-webhook"
    assert found.exists(), f"no {found}"
    return found


def test_a_kubeconfig_skipping_tls_verification_is_used_as_quietly_as_kubectl_uses_it(cluster, tmp_path: Path):
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    for entry in config["clusters"]:
        entry["cluster"].pop("certificate-authority-data", None)
        entry["cluster"].pop("certificate-authority", None)
        entry["cluster"]["insecure-skip-tls-verify"] = True
    insecure = tmp_path / "kubeconfig"
    insecure.write_text(yaml.safe_dump(config))
    pod = str(REPO / "deploy" / "examples" / "test-pod.yaml")
    done = cli(cluster, "explain", "--pod", pod, "--kubeconfig", str(insecure), check=False)
    assert "Warning" not in done.stderr and "Unverified HTTPS request" not in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) <= 1, done.stderr  # at most the one line of an empty cluster
