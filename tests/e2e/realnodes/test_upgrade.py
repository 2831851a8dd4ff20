"""Upgrading an installed webhook while pods keep being created, on a real control plane of the
session's release and real nodes: the chart and image of the baseline revision
(harness.baseline) are installed with helm and registered as that chart's NOTES say, then
`helm upgrade --wait` moves the release to the working tree's chart and image and the working
tree's `register` runs again, as docs/install.md says. Every labelled pod created before, during and
after the upgrade carries the injected preference, the API server never fails open, and the
registration (every entry's caBundle) and the Service's ready endpoints never go empty meanwhile.

It runs on whichever release the session runs; CI runs it on the default release and on the oldest
(`NETQOS_KUBERNETES=1.34 pytest tests/e2e/realnodes/test_upgrade.py`), where a long-installed
webhook is likeliest to be found."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness import baseline, image
from harness.controlplane import Cluster
from harness.pods import PAUSE, pod
from tests.e2e.conftest import cli, node_affinity
from tests.e2e.realnodes.conftest import PodCreator, fail_open
from tests.fixtures import REPO
from tests.process.test_helm_chart import helm as helm  # the fixture, by name
from webhook import __version__
from webhook.names import DEV_CERT_DIR, TLS_SECRET
from webhook.policy import evaluate
from webhook.policy_file import load_policy

NAMESPACE = "netqos-upgrade"
NAME = "netqos-webhook"  # the release, and every object the chart names (no fullnameOverride)
CHART = REPO / "deploy/helm/netqos-webhook"
POLICY = Path("deploy/base/policy.yaml")  # what the baseline's NOTES register, inside either tree
WARM_UP = 5.0  # seconds of creation before the upgrade, and after it
POLL = 0.1  # seconds between looks at the registration and the endpoints
HELM_TIMEOUT = 300
REGISTRATION = f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{NAME}"
SECRET = f"/api/v1/namespaces/{NAMESPACE}/secrets/{TLS_SECRET}"
VALIDATION = f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{NAME}"
SLICES = (
    f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices"
    f"?labelSelector=kubernetes.io%2Fservice-name%3D{NAME}"
)


@pytest.fixture(scope="module")
def cluster(real_cluster: Cluster) -> Cluster:
    """The session's real-node cluster, in place of the end-to-end tests' cluster without nodes."""
    return real_cluster


@dataclass(frozen=True)
class Sample:
    at: float  # seconds since the watch started
    ca_bundles: int  # entries of the registration with a caBundle
    entries: int  # entries of the registration (0: there is none)
    ready: int  # ready endpoints of the webhook's Service

    @property
    def gap(self) -> bool:
        return self.entries == 0 or self.ca_bundles < self.entries or self.ready == 0


class RegistrationWatch(threading.Thread):
    """Looks at the registration and the Service's EndpointSlices every `POLL` seconds until stopped."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.stopping = threading.Event()
        self.samples: list[Sample] = []
        self.started = time.monotonic()

    def run(self) -> None:
        while not self.stopping.is_set():
            config = self.cluster.get(REGISTRATION) or {}
            entries = config.get("webhooks") or []
            slices = (self.cluster.get(SLICES) or {}).get("items") or []
            ready = sum(
                1
                for piece in slices
                for endpoint in piece.get("endpoints") or []
                if (endpoint.get("conditions") or {}).get("ready")
            )
            with_ca = sum(1 for entry in entries if entry["clientConfig"].get("caBundle"))
            self.samples.append(Sample(time.monotonic() - self.started, with_ca, len(entries), ready))
            self.stopping.wait(POLL)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=30)


def expected_terms() -> list[Any]:
    """The preferred terms the webhook gives the creator's pods under the registered policy."""
    body = pod({"qos": "latency-sensitive"}, name="expected", containers=[PAUSE])
    return node_affinity(evaluate(load_policy(REPO / POLICY), body).pod)


def run_helm(helm: str, cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    command = [helm, *args, "-n", NAMESPACE, "--kubeconfig", str(cluster.kubeconfig)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=HELM_TIMEOUT + 60)
    assert done.returncode == 0, f"helm {' '.join(args[:2])} exited {done.returncode}:\n{done.stderr}"
    return done


@pytest.fixture
def baseline_tree() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="netqos-baseline-") as scratch:
        yield baseline.source(Path(scratch))


@pytest.fixture
def no_other_registration(cluster: Cluster) -> Iterator[None]:
    """The chart's configurations share their names with deploy/base's: one registered earlier in
    the session is set aside (helm adopts no object it did not make) and put back afterwards."""
    saved = [(path, cluster.get(path)) for path in (REGISTRATION, VALIDATION)]
    for path, found in saved:
        if found:
            cluster.request("DELETE", path)
    yield
    for path, found in saved:
        if found:
            cluster.request("DELETE", path)
            for field in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
                found["metadata"].pop(field, None)
            status, body = cluster.request("POST", path.rsplit("/", 1)[0], found)
            assert status == 201, body


def webhook_image(cluster: Cluster) -> str:
    deployment = cluster.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{NAME}")
    assert deployment is not None
    return str(deployment["spec"]["template"]["spec"]["containers"][0]["image"])


def register_as_the_baseline_notes_say(cluster: Cluster, tree: Path) -> None:
    """`netqos-webhook register --namespace NS --config deploy/base/policy.yaml`, the baseline's
    NOTES' command (certificates.source external), run with the baseline's own CLI from its tree."""
    done = subprocess.run(
        [sys.executable, "-m", "webhook", "register", "--namespace", NAMESPACE, "--config", str(POLICY)],
        cwd=tree, env={**os.environ, **cluster.env(), "PYTHONPATH": str(tree)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_a_helm_upgrade_from_the_baseline_under_pod_creation_loses_no_preference_and_no_registration(
    cluster, loaded, helm, baseline_tree, no_other_registration, real_namespace
):
    image.load(cluster.directory, baseline.build().archive)
    watch, creator = RegistrationWatch(cluster), PodCreator(cluster, real_namespace)
    try:
        run_helm(
            helm, cluster, "install", NAME, str(baseline_tree / baseline.CHART), "--create-namespace",
            "--set", f"image.tag={baseline.IMAGE.split(':', 1)[1]}",
        )  # fmt: skip
        register_as_the_baseline_notes_say(cluster, baseline_tree)  # the pods wait for its Secret
        rollout = ("-n", NAMESPACE, "rollout", "status", f"deployment/{NAME}", f"--timeout={HELM_TIMEOUT}s")
        cluster.kubectl(*rollout, timeout=HELM_TIMEOUT + 10)
        cluster.wait_webhook(active=True, timeout=60)
        images = [webhook_image(cluster)]
        before_fail_open = fail_open(cluster)
        watch.start()
        creator.start()
        time.sleep(WARM_UP)
        created_before, upgrade_started = len(creator.created), time.monotonic()
        # as docs/install.md says: the new chart's defaults, the values given at install, the new tag
        run_helm(
            helm, cluster, "upgrade", NAME, str(CHART), "--reset-then-reuse-values",
            "--set", f"image.tag={__version__}", "--wait", "--timeout", f"{HELM_TIMEOUT}s",
        )  # fmt: skip
        upgrade_seconds = time.monotonic() - upgrade_started
        created_during = len(creator.created) - created_before
        images.append(webhook_image(cluster))
        secrets = [cluster.get(SECRET)]
        # the upgrade's last step: register again from the directory the baseline's register wrote, so
        # the policy check the chart adds gets its caBundle; the certificates stay the ones made then
        cli(cluster, "register", "--namespace", NAMESPACE, "--certs", str(baseline_tree / DEV_CERT_DIR))
        policy_check = cluster.get(VALIDATION) or {"webhooks": []}
        secrets.append(cluster.get(SECRET))
        time.sleep(WARM_UP)
    finally:
        for thread in (creator, watch):
            if thread.ident is not None:  # started
                thread.stop()
        subprocess.run(
            [helm, "uninstall", NAME, "-n", NAMESPACE, "--kubeconfig", str(cluster.kubeconfig), "--wait"],
            capture_output=True, timeout=HELM_TIMEOUT,
        )  # fmt: skip
        cluster.delete_namespace(NAMESPACE)

    created, terms, samples = creator.created, expected_terms(), watch.samples
    print(
        f"\nupgrade {baseline.REVISION} -> working tree on Kubernetes {cluster.kubernetes}: "
        f"helm upgrade --wait {upgrade_seconds:.1f} s; pods created before {created_before}, "
        f"during {created_during}, after {len(created) - created_before - created_during}; "
        f"{len(samples)} looks at the registration over {samples[-1].at:.1f} s, "
        f"ready endpoints {min(s.ready for s in samples)} to {max(s.ready for s in samples)}"
    )
    assert created_before > 20 and created_during > 20, "pods were created before and during the upgrade"
    outcome = {
        "the webhook's image, before and after": images,
        "the policy check's caBundle, after register": [
            bool(w["clientConfig"].get("caBundle")) for w in policy_check["webhooks"]
        ],
        "the Secret's certificate, after register": secrets[1]["data"] == secrets[0]["data"],
        "refused creations": creator.errors,
        "pods without the annotation": creator.unmutated(),
        "pods without the terms": [p["metadata"]["name"] for p in created if node_affinity(p) != terms],
        "looks with no registration, no caBundle or no ready endpoint": [s for s in samples if s.gap],
        "calls that failed open": fail_open(cluster) - before_fail_open,
    }
    assert outcome == {
        "the webhook's image, before and after": [baseline.IMAGE, image.IMAGE],
        "the policy check's caBundle, after register": [True],
        "the Secret's certificate, after register": True,
        "refused creations": [],
        "pods without the annotation": [],
        "pods without the terms": [],
        "looks with no registration, no caBundle or no ready endpoint": [],
        "calls that failed open": 0,
    }
