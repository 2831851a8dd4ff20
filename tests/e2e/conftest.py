"""End-to-end tests against a real control plane built from its Go modules (etcd, kube-apiserver,
kube-controller-manager, and kube-scheduler with the NetQoS plugin as a second profile), built by
`harness.gobuild` and started by `harness.controlplane` as `scripts/cluster up` starts it. The real
API server calls a real `netqos-webhook serve` registered by `netqos-webhook register --url`; the
real scheduler binds.

One cluster serves the whole session. With $NETQOS_CLUSTER_DIR naming a running cluster
(`eval "$(scripts/cluster env)"`), the tests use it and leave it running; otherwise they build
the binaries when the cache lacks them (minutes, once) and start a cluster of their own.
Without a Go toolchain they skip, saying so, except under CI (CI=true), where that fails.
$NETQOS_KUBERNETES (1.34 to 1.37) names the Kubernetes release (default: the newest,
`harness.gobuild.DEFAULT_MINOR`); tests whose expectations differ between releases compare
`cluster.minor`.

Each test gets its own namespace; tests that need nodes use the `nodes` fixture, which removes
every node before and after (nodes are cluster-wide, so such tests do not share them).
"""

from __future__ import annotations

import base64
import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import controlplane, gobuild
from harness.controlplane import Cluster
from harness.server import Server, start_server
from tests.fixtures import REPO
from webhook.names import CONFIGURATION_NAME

HERE = Path(__file__).parent
WEBHOOK_CONFIGURATION = f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{CONFIGURATION_NAME}"
# register writes this one too (the policy ConfigMap's check), under the same name
POLICY_CONFIGURATION = f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{CONFIGURATION_NAME}"
_names = itertools.count(1)


def pytest_report_header() -> str:
    """Which release the session's control plane is (shown when tests/e2e is named)."""
    of = gobuild.release()
    default = gobuild.DEFAULT_MINOR
    return f"Kubernetes {of.minor} ({of.version}): ${gobuild.KUBERNETES_ENV}, else the default {default}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.controlplane)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    named = os.environ.get(controlplane.CLUSTER_DIR_ENV)
    if named and (Path(named) / controlplane.STATE_FILE).exists():
        existing = controlplane.attach(Path(named))
        if existing.nodes:
            pytest.skip(
                f"the cluster in {named} has real nodes; these tests write Nodes of their own: "
                "run them on a cluster started without --nodes (tests/e2e/realnodes run on this one)"
            )
        broken = {k: v for k, v in existing.healthy().items() if v != "ok"}
        assert not broken, f"the cluster in {named} is not healthy: {broken}; run 'scripts/cluster down' and 'up'"
        wanted = os.environ.get(gobuild.KUBERNETES_ENV)
        assert not wanted or gobuild.release(wanted).version == existing.kubernetes, (
            f"${gobuild.KUBERNETES_ENV}={wanted} but the cluster in {named} runs {existing.kubernetes}"
        )
        yield existing
        return
    go = gobuild.find_go()
    if go is None:
        reason = "no Go toolchain to build the control plane (install Go 1.26+, or set GO=/path/to/go)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}; CI must run the end-to-end tests")
        pytest.skip(reason)
    of = gobuild.release()
    built = gobuild.build(go, of=of)
    with controlplane.running(tmp_path_factory.mktemp("cluster"), built.bin_dir, of) as running:
        yield running


def cli(cluster: Cluster, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`netqos-webhook ARGS` as a user runs it, with the cluster's kubeconfig in the environment."""
    result = subprocess.run(
        [sys.executable, "-m", "webhook", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **cluster.env()},
        cwd=REPO,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"netqos-webhook {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
    return result


def register(cluster: Cluster, server: Server, certs: Path | None = None) -> None:
    """`netqos-webhook register --url` for a server on loopback (only the webhook configuration,
    its caBundle from `certs`, by default the server's certificate directory). --force: the tests
    point the one registration at servers of their own, each under a CA of its own, which register
    otherwise refuses to replace."""
    url = f"https://127.0.0.1:{server.port}/mutate"
    cli(cluster, "register", "--url", url, "--certs", str(certs or server.certs.directory), "--force")
    cluster.wait_webhook(active=True)


@pytest.fixture(scope="session")
def webhook(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`netqos-webhook serve` on loopback (the default policy), registered with the cluster."""
    with start_server(tmp_path_factory.mktemp("webhook")) as server:
        register(cluster, server)
        yield server
        unregister(cluster)


def unregister(cluster: Cluster) -> None:
    """Remove what `register` wrote to the cluster's scope (a later install, e.g. helm's, would
    otherwise find objects it does not own and refuse them)."""
    for path in (WEBHOOK_CONFIGURATION, POLICY_CONFIGURATION):
        cluster.request("DELETE", path)


def registered_to(cluster: Cluster, server: Server) -> bool:
    """Does the webhook configuration send every call to `server`, trusting its CA?"""
    config = cluster.get(WEBHOOK_CONFIGURATION)
    url = f"https://127.0.0.1:{server.port}/mutate"
    bundle = base64.b64encode(server.certs.ca_cert.read_bytes()).decode()
    clients = [w.get("clientConfig", {}) for w in (config or {}).get("webhooks", [])]
    return bool(clients) and all(c.get("url") == url and c.get("caBundle") == bundle for c in clients)


@pytest.fixture
def registered(cluster: Cluster, webhook: Server) -> Iterator[Server]:
    """The session's webhook, registered again if a test changed the registration."""
    if not registered_to(cluster, webhook):
        register(cluster, webhook)
    yield webhook
    if not registered_to(cluster, webhook):  # whatever the test did, the next finds it in place
        register(cluster, webhook)


@pytest.fixture
def unregistered(cluster: Cluster, webhook: Server) -> Iterator[None]:
    """No webhook configuration while the test runs; the session's is restored afterwards."""
    unregister(cluster)
    cluster.wait_webhook(active=False)
    yield
    register(cluster, webhook)


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"e2e-{next(_names)}-{request.node.name[:30].lower().replace('_', '-').strip('-')}"
    name = "".join(c for c in name if c.isalnum() or c == "-").rstrip("-")
    cluster.create_namespace(name)
    yield name
    cluster.delete_namespace(name)


@pytest.fixture
def nodes(cluster: Cluster) -> Iterator[None]:
    cluster.delete_nodes()
    yield
    cluster.delete_nodes()


def manifest(path: str) -> Any:
    return yaml.safe_load((REPO / path).read_text())


def experiment_nodes(cluster: Cluster) -> None:
    """The two nodes of the NetQoS scheduler plugin's experiment, from deploy/examples/nodes.yaml:
    `minikube` (net=low) and `fake-node-1` (net=high, tainted unreachable as no kubelet reports)."""
    for node in manifest("deploy/examples/nodes.yaml")["items"]:
        node["metadata"].pop("creationTimestamp", None)
        cluster.create(node)


def node_affinity(pod: dict[str, Any]) -> list[Any]:
    """The pod's preferred node-affinity terms ([] when it has none)."""
    affinity = (pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}
    terms: list[Any] = affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    return terms


def served(cluster: Cluster, obj: dict[str, Any]) -> bool:
    """Whether the cluster serves the object's kind (a custom resource's CRD may be missing)."""
    version = obj["apiVersion"]
    found = cluster.get(f"/api/{version}" if "/" not in version else f"/apis/{version}")
    return found is not None and any(r["kind"] == obj["kind"] for r in found["resources"])


def assert_accepted_by_server_dry_run(cluster: Cluster, objects: list[dict[str, Any]]) -> None:
    """`kubectl apply --server-side --dry-run=server` of the objects succeeds, one line each."""
    applied = cluster.kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "--field-manager=e2e",
        "-f",
        "-",
        input=yaml.safe_dump_all(objects),
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    lines = applied.stdout.splitlines()
    assert len(lines) == len(objects), applied.stdout
    assert all(line.endswith("serverside-applied (server dry run)") for line in lines), applied.stdout
