"""End-to-end tests on real nodes: the image built from the Dockerfile runs as the Deployment of
deploy/base on real kubelets (`scripts/cluster up --nodes 2`: fast-1 net=high, slow-1 net=low;
harness.nodes), and the API server calls it through its Service.

One cluster with nodes serves the session: the one $NETQOS_CLUSTER_DIR names when it has real
nodes (`scripts/cluster up --nodes 2`, then `scripts/image`), else one of its own. Where real nodes
cannot run (not root, no Debian packages, no Go) the tests skip saying why, except under CI
(CI=true), where that fails. The control-plane tests beside them write Nodes of their own, so they
never share this cluster."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import controlplane, gobuild, image, nodes, podcreator
from harness.controlplane import Cluster
from tests.e2e.conftest import cli
from tests.fixtures import REPO
from webhook.names import DEFAULT_NAMESPACE

HERE = Path(__file__).parent
NODES = 2
DEPLOYMENT = "netqos-webhook"
READY_TIMEOUT = 180


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.realnode)


def unavailable() -> str | None:
    if gobuild.find_go() is None:
        return "no Go toolchain to build the kubelet (install Go 1.26+, or set GO=/path/to/go)"
    return nodes.unavailable_reason() or image.unavailable_reason()


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    named = os.environ.get(controlplane.CLUSTER_DIR_ENV)
    if named and (Path(named) / controlplane.STATE_FILE).exists():
        existing = controlplane.attach(Path(named))
        if existing.nodes:
            broken = {k: v for k, v in existing.healthy().items() if v != "ok"}
            assert not broken, f"the cluster in {named} is not healthy: {broken}; 'scripts/cluster down' and 'up'"
            yield existing
            return
    reason = unavailable()
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}; CI must run the real-node tests")
        pytest.skip(reason)
    built = gobuild.build()
    # a short path: containerd's sockets live under it, and a unix socket's path has 107 bytes
    directory = Path(tempfile.mkdtemp(prefix="netqos-e2e-", dir="/tmp"))
    try:
        with controlplane.running(directory / "cluster", built.bin_dir, nodes=NODES) as running:
            yield running
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def loaded(real_cluster: Cluster) -> image.Built:
    """The project's image, built from the Dockerfile and loaded into every node."""
    built = image.build()
    image.load(real_cluster.directory, built.archive)
    return built


def rollout(cluster: Cluster, timeout: int = READY_TIMEOUT) -> None:
    cluster.kubectl(
        "-n",
        DEFAULT_NAMESPACE,
        "rollout",
        "status",
        f"deployment/{DEPLOYMENT}",
        f"--timeout={timeout}s",
        timeout=timeout + 10,
    )


@pytest.fixture(scope="session")
def installed(real_cluster: Cluster, loaded: image.Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """deploy/base applied, `register` run as the README says, the Deployment rolled out; the
    certificate directory `register` used is returned."""
    certs = tmp_path_factory.mktemp("webhook-certs")
    real_cluster.kubectl("apply", "-k", str(REPO / "deploy/base"))
    cli(real_cluster, "register", "--config", str(REPO / "deploy/base/policy.yaml"), "--certs", str(certs))
    rollout(real_cluster)
    real_cluster.wait_webhook(active=True, timeout=60)
    return certs


def fail_open(cluster: Cluster) -> float:
    """The API server's count of calls to the webhook that failed open (failurePolicy Ignore used)."""
    status, text = cluster.request("GET", "/metrics")
    assert status == 200
    total = 0.0
    for line in str(text).splitlines():
        if line.startswith("apiserver_admission_webhook_fail_open_count{") and 'name="netqos.netqos.io"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def webhook_pods(cluster: Cluster) -> list[dict]:
    found = cluster.get(
        f"/api/v1/namespaces/{DEFAULT_NAMESPACE}/pods?labelSelector="
        "app.kubernetes.io%2Fname%3Dnetqos-webhook,app.kubernetes.io%2Fcomponent%3Dwebhook"
    )
    return (found or {}).get("items", [])


@pytest.fixture
def real_namespace(real_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = "rn-" + "".join(c for c in request.node.name[:40].lower().replace("_", "-") if c.isalnum() or c == "-")
    real_cluster.create_namespace(name.rstrip("-"))
    yield name.rstrip("-")
    real_cluster.delete_namespace(name.rstrip("-"))


class PodCreator(podcreator.PodCreator):
    """Pods that select a node label no node has, so they stay Pending on the real nodes."""

    def __init__(self, cluster: Cluster, namespace: str, interval: float = 0.05) -> None:
        super().__init__(cluster, namespace, interval, node_selector={"netqos.io/e2e-nowhere": "true"})
