"""Certificate renewal and a CA rollover while the real API server keeps creating pods through the
webhook: zero failed admissions, i.e. every pod created during the procedure carries the
preference (a failed call would have let it through unmutated: `failurePolicy: Ignore`).

The server reads its certificate from a directory updated as the kubelet updates a mounted
Secret (harness.volume), and only after `register`, as the README's procedure orders it:
`certs` writes the files, `register` updates the caBundle, then the pods see the new Secret."""

from __future__ import annotations

import time

from harness.podcreator import PodCreator
from harness.server import start_server
from harness.volume import MountedVolume
from tests.e2e.conftest import cli, register
from webhook.certs import CertFiles

LOOPBACK = "127.0.0.1"
INTERVAL = 0.05  # seconds between pod creations
CA_PROPAGATION = 2.0  # the API server's informer sees a changed caBundle within milliseconds on loopback


def switched(server, count: int, timeout: float = 30) -> None:
    """Until the workers have logged `count` certificate switches in total. A worker looks at its
    files when a new connection arrives (at most once a second), so this keeps connecting."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logged = [r for r in server.log_records() if "serving the new certificate" in str(r.get("message", ""))]
        if len(logged) >= count:
            return
        try:
            server.request("GET", "/healthz")
        except OSError:  # a worker still on the previous certificate, which this client no longer trusts
            pass
        time.sleep(0.2)
    raise AssertionError(f"the server did not switch certificates within {timeout:.0f} s:\n{server.log_tail()}")


def test_renewal_and_ca_rollover_while_pods_are_created_fail_no_admission(cluster, registered, namespace, tmp_path):
    files = CertFiles(tmp_path / "certs")
    cli(cluster, "certs", "--out", str(files.directory), "--host", LOOPBACK)

    def contents() -> dict[str, bytes]:  # what register puts into the Secret
        return {
            "ca.crt": files.ca_cert.read_bytes(),
            "tls.crt": files.cert.read_bytes(),
            "tls.key": files.key.read_bytes(),
        }

    secret = MountedVolume(tmp_path / "secret", contents())
    workers = 2

    def publish() -> None:  # the kubelet updating the Secret volume
        secret.update(contents())

    with start_server(tmp_path / "server", certs=CertFiles(secret.directory), workers=workers) as server:
        register(cluster, server, files.directory)
        creator = PodCreator(cluster, namespace, INTERVAL, prefix="rotation")
        creator.start()
        try:
            time.sleep(1)
            # 1. renewal under the same CA: the caBundle does not change
            cli(cluster, "certs", "--out", str(files.directory), "--renew-before", "400", "--host", LOOPBACK)
            register(cluster, server, files.directory)
            publish()
            switched(server, workers)
            time.sleep(1)
            # 2. CA rollover: caBundle = new + old CA, then the new certificate, then the new CA alone
            cli(cluster, "certs", "--out", str(files.directory), "--new-ca", "--host", LOOPBACK)
            register(cluster, server, files.directory)
            time.sleep(CA_PROPAGATION)
            publish()
            switched(server, 2 * workers)
            time.sleep(1)
            files.ca_bundle.unlink()
            register(cluster, server, files.directory)
            time.sleep(CA_PROPAGATION)
        finally:
            creator.stop()

    assert creator.errors == []
    assert len(creator.created) >= 50, "pods kept being created throughout"
    unmutated = creator.unmutated()
    assert unmutated == [], f"{len(unmutated)} of {len(creator.created)} pods were admitted without the webhook"
