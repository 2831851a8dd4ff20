"""README's certificate procedures against a real server: a renewal under the same CA, and a CA
rollover, each while reviews keep coming, with zero failed reviews.

The cluster is played by its parts: the API server trusts exactly the caBundle last registered
(it rebuilds its client when the webhook configuration changes); the kubelet swaps the Secret's
files into the pods' volume a while after the Secret changed (`KUBELET_DELAY`; minutes in a real
cluster, which only widens the window). What `register` would send comes from `register --dry-run`,
in the order it would send it.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from harness.patches import assert_patch_agrees, decoded_patch, pod_review
from harness.server import Server, ServiceConnection, start_server
from harness.volume import MountedVolume
from harness.waiting import until
from tests.fixtures import with_netqos
from webhook.certs import CertFiles

pytestmark = pytest.mark.process
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"qos": "latency-sensitive"}}, "spec": {}}
KUBELET_DELAY = 2.0  # seconds between a Secret update and its files changing in the pods


def netqos(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@dataclass
class Cluster:
    """The API server's trust and the pods' Secret volume, updated as `register` would update them."""

    volume: MountedVolume
    bundle: bytes
    timers: list[threading.Timer] = field(default_factory=list)

    def apply(self, certs: Path) -> list[str]:
        """Apply what `register --certs DIR` sends, in its order; returns the kinds in that order."""
        objects = list(yaml.safe_load_all(netqos("register", "--certs", str(certs), "--dry-run")))
        for obj in objects:
            if obj["kind"] == "MutatingWebhookConfiguration":
                bundles = {w["clientConfig"]["caBundle"] for w in obj["webhooks"]}
                assert len(bundles) == 1
                self.bundle = base64.b64decode(bundles.pop())
            elif obj["kind"] == "ValidatingWebhookConfiguration":  # the policy ConfigMap's check: same bundle
                validated = {base64.b64decode(w["clientConfig"]["caBundle"]) for w in obj["webhooks"]}
                assert validated == {self.bundle}
            else:
                files = {name: base64.b64decode(value) for name, value in obj["data"].items()}
                timer = threading.Timer(KUBELET_DELAY, self.volume.update, args=(files,))
                timer.start()
                self.timers.append(timer)
        return [o["kind"] for o in objects]

    def settle(self) -> None:
        for timer in self.timers:
            timer.join()


def initial_objects(certs: Path) -> tuple[bytes, dict[str, bytes]]:
    objects = list(yaml.safe_load_all(netqos("register", "--certs", str(certs), "--dry-run")))
    secret = next(o for o in objects if o["kind"] == "Secret")
    config = next(o for o in objects if o["kind"] == "MutatingWebhookConfiguration")
    files = {name: base64.b64decode(value) for name, value in secret["data"].items()}
    return base64.b64decode(config["webhooks"][0]["clientConfig"]["caBundle"]), files


def context(bundle: bytes) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=bundle.decode())


def serial(conn: ServiceConnection) -> int:
    assert conn.sock is not None
    return x509.load_der_x509_certificate(conn.sock.getpeercert(binary_form=True)).serial_number


class Load:
    """Reviews from four clients, a new connection every third review (handshakes during every
    change), each connection trusting the caBundle the API server holds at that moment."""

    def __init__(self, port: int, cluster: Cluster) -> None:
        self.port, self.cluster = port, cluster
        self.failures: list[str] = []
        self.answered = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._client) for _ in range(4)]

    def __enter__(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)

    def more(self, reviews: int, what: str) -> None:
        """Wait until `reviews` more reviews are answered (the load goes on through a change)."""
        start = self.answered
        until(lambda: self.answered >= start + reviews, f"{reviews} reviews answered {what}")

    def _client(self) -> None:
        sent = 0
        deadline = time.monotonic() + 60
        while not self._stop.is_set() and time.monotonic() < deadline:
            conn = ServiceConnection("127.0.0.1", self.port, context=context(self.cluster.bundle), timeout=5)
            try:
                for _ in range(3):
                    conn.request("POST", "/mutate", body=_body(sent), headers={"Content-Type": "application/json"})
                    reply = conn.getresponse()
                    reply.read()
                    assert reply.status == 200, reply.status
                    self.answered += 1
                    sent += 1
            except Exception as err:  # every failure is a failed review, counted
                self.failures.append(repr(err))
                time.sleep(0.05)
            finally:
                conn.close()


def _body(uid: int) -> bytes:
    return json.dumps(pod_review(POD, uid=f"uid-{uid}")).encode()


def assert_reviews_still_mutate(port: int, bundle: bytes, tmp_path: Path) -> None:
    """A review on a new connection after the change: the same patch, as kubectl applies it too."""
    conn = ServiceConnection("127.0.0.1", port, context=context(bundle), timeout=5)
    try:
        conn.request("POST", "/mutate", body=_body(0), headers={"Content-Type": "application/json"})
        answer = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    assert_patch_agrees(POD, decoded_patch(answer), with_netqos(POD), tmp_path)


def new_connection_serial(port: int, bundle: bytes) -> int:
    conn = ServiceConnection("127.0.0.1", port, context=context(bundle), timeout=5)
    try:
        conn.request("GET", "/healthz")
        conn.getresponse().read()
        return serial(conn)
    finally:
        conn.close()


def wait_for_serial(port: int, bundle: bytes, wanted: int) -> None:
    def served() -> bool:
        try:
            return new_connection_serial(port, bundle) == wanted
        except ssl.SSLCertVerificationError:
            return False  # still the certificate of a CA the bundle does not hold

    until(served, f"new connections getting serial {wanted}", interval=0.2)


def reloads_logged(server: Server) -> int:
    return len(_reloads(server))


def _reloads(server: Server) -> list[dict[str, object]]:
    return [r for r in server.log_records() if "serving the new certificate" in str(r.get("message", ""))]


def wait_until_every_worker_serves_the_new_certificate(server: Server, logged_before: int) -> None:
    """As README's procedures say: wait until every worker logged "serving the new certificate".
    One new connection on the new certificate proves one worker switched; each worker looks at
    the files at most once a second, from a handshake it takes, so another may still serve the
    old certificate for a moment."""

    def every_worker() -> bool:
        switched = {r.get("process") for r in _reloads(server)[logged_before:]}
        return set(server.workers()) <= switched

    until(every_worker, "every worker logging 'serving the new certificate'", interval=0.2)


@pytest.fixture
def installed(tmp_path):
    """`certs --out certs`, `register`, and a server on the Secret's files."""
    local = tmp_path / "certs"
    netqos("certs", "--out", str(local), "--host", "127.0.0.1")
    bundle, files = initial_objects(local)
    cluster = Cluster(MountedVolume(tmp_path / "secret", files), bundle)
    with start_server(tmp_path / "server", certs=CertFiles(cluster.volume.directory)) as server:
        yield local, cluster, server
    cluster.settle()


def served_serial(local: Path) -> int:
    return x509.load_pem_x509_certificate(CertFiles(local).cert.read_bytes()).serial_number


def test_renewal_under_the_same_ca_keeps_the_ca_bundle_and_fails_no_review(installed, tmp_path):
    local, cluster, server = installed
    bundle_before, serial_before = cluster.bundle, served_serial(local)
    with Load(server.port, cluster) as load:
        load.more(10, "before the renewal")
        logged = reloads_logged(server)
        netqos("certs", "--out", str(local), "--renew-before", "400")  # README: 30, from a daily job
        assert cluster.apply(local) == ["Secret", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
        assert cluster.bundle == bundle_before, "a renewal never changes the caBundle"
        wait_for_serial(server.port, bundle_before, served_serial(local))
        wait_until_every_worker_serves_the_new_certificate(server, logged)
        load.more(31, "after the new certificate is served")
    assert served_serial(local) != serial_before
    assert load.failures == [] and load.answered > 30
    for _ in range(4):  # new connections, whichever worker takes them, verify against the old bundle
        assert new_connection_serial(server.port, bundle_before) == served_serial(local)
    assert_reviews_still_mutate(server.port, bundle_before, tmp_path)


@pytest.mark.parametrize(
    "replace, failures_expected",
    [
        ("--new-ca", False),  # the rollover: the caBundle trusts both CAs while the pods switch
        ("--force", True),  # the control: a new CA alone leaves the old certificate unverifiable
    ],
)
def test_a_ca_rollover_with_both_cas_in_the_bundle_fails_no_review(installed, tmp_path, replace, failures_expected):
    local, cluster, server = installed
    old_ca = CertFiles(local).ca_cert.read_bytes()
    with Load(server.port, cluster) as load:
        load.more(10, "before the new CA")
        logged = reloads_logged(server)
        netqos("certs", "--out", str(local), replace)
        cluster.apply(local)
        wait_for_serial(server.port, cluster.bundle, served_serial(local))
        wait_until_every_worker_serves_the_new_certificate(server, logged)
        if replace == "--new-ca":  # once every pod serves the new certificate: trust the new CA alone
            CertFiles(local).ca_bundle.unlink()
            cluster.apply(local)
        cluster.settle()  # the kubelet has put the last Secret's files in the pods
        load.more(31, "after the last change reached the pods")
    assert bool(load.failures) == failures_expected, load.failures[:3]
    assert load.answered > 30
    assert cluster.bundle == CertFiles(local).ca_cert.read_bytes() != old_ca
    with pytest.raises(ssl.SSLCertVerificationError):
        new_connection_serial(server.port, old_ca)  # the old CA no longer verifies the webhook
    assert_reviews_still_mutate(server.port, cluster.bundle, tmp_path)
