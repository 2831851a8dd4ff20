"""register never replaces a CA it does not hold: run from a directory without the CA the real
cluster's registration trusts, it refuses (exit 2, naming the registration and the CA's
fingerprint), generates nothing and leaves the caBundle as it was; pods are still mutated."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509

from harness.controlplane import Cluster
from harness.server import Server
from tests.e2e.conftest import WEBHOOK_CONFIGURATION, cli, manifest, node_affinity
from webhook.certs import fingerprint


def test_register_without_the_trusted_ca_refuses_and_changes_nothing(
    cluster: Cluster, registered: Server, namespace: str, tmp_path: Path
) -> None:
    before = cluster.get(WEBHOOK_CONFIGURATION)
    elsewhere = tmp_path / "certs"
    done = cli(
        cluster,
        "register",
        "--url",
        f"https://127.0.0.1:{registered.port}/mutate",
        "--certs",
        str(elsewhere),
        check=False,
    )
    trusted = x509.load_pem_x509_certificate(registered.certs.ca_cert.read_bytes())
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(
        f"netqos-webhook register: MutatingWebhookConfiguration netqos-webhook (its caBundle) holds the CA "
        f"SHA-256 {fingerprint(trusted)}"
    )
    assert len(done.stderr.splitlines()) == 1 and not elsewhere.exists()
    after = cluster.get(WEBHOOK_CONFIGURATION)
    assert [w["clientConfig"] for w in after["webhooks"]] == [w["clientConfig"] for w in before["webhooks"]]
    assert node_affinity(cluster.create(manifest("deploy/examples/test-pod.yaml"), namespace))
