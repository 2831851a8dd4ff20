"""The Deployment of deploy/base on real kubelets: the image built from the Dockerfile runs with
every security setting in force, and the API server calls it through its Service."""

from __future__ import annotations

import ipaddress
import time

from harness import image, nodes
from tests.e2e.conftest import node_affinity
from tests.e2e.realnodes.conftest import DEPLOYMENT, fail_open, webhook_pods
from webhook.names import DEFAULT_NAMESPACE, INJECTED_ANNOTATION

WAIT = 90.0


def exec_in(cluster, pod: str, *command: str):
    return cluster.kubectl("-n", DEFAULT_NAMESPACE, "exec", pod, "-c", "webhook", "--", *command, check=False)


def test_the_local_build_keeps_the_dockerfiles_base_user_and_entrypoint(loaded):
    wanted = image.dockerfile()
    config = image.inspect()["OCIv1"]["config"]
    assert config["User"] == wanted.user == "65532:65532"
    assert config["Entrypoint"] == wanted.entrypoint == ["netqos-webhook", "serve"]
    assert config["Cmd"] == wanted.cmd
    assert all(image.is_local_base(tag) for tag in wanted.bases), "every FROM is the locally built base"


def test_the_deployment_is_ready_on_the_real_nodes_with_every_security_setting_in_force(real_cluster, installed):
    pods = [p for p in webhook_pods(real_cluster) if p["status"].get("phase") == "Running"]
    assert len(pods) == 2
    assert {p["spec"]["nodeName"] for p in pods} == {"fast-1", "slow-1"}, "one replica per node"
    for pod in pods:
        name = pod["metadata"]["name"]
        assert all(c["ready"] for c in pod["status"]["containerStatuses"])
        assert exec_in(real_cluster, name, "id", "-u").stdout.strip() == "65532"
        assert exec_in(real_cluster, name, "id", "-g").stdout.strip() == "65532"
        written = exec_in(real_cluster, name, "touch", "/written")
        assert written.returncode != 0 and "Read-only file system" in written.stderr
        assert exec_in(real_cluster, name, "touch", "/tmp/written").returncode == 0, "/tmp is the writable emptyDir"
        mounts = [line.split() for line in exec_in(real_cluster, name, "cat", "/proc/mounts").stdout.splitlines()]
        assert ["/tmp", "tmpfs"] in [m[1:3] for m in mounts], "/tmp is memory-backed"
        assert not [m for m in mounts if "serviceaccount" in m[1]], "no service account token is mounted"
        status = exec_in(real_cluster, name, "cat", "/proc/1/status").stdout
        assert "CapEff:\t0000000000000000" in status, "every capability dropped"
        assert "NoNewPrivs:\t1" in status


def test_a_labelled_pod_of_a_deployment_is_mutated_through_the_service_and_runs_on_the_fast_node(
    real_cluster, installed, real_namespace
):
    before = fail_open(real_cluster)
    app = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "app"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "app"}},
            "template": {
                "metadata": {"labels": {"app": "app", "qos": "latency-sensitive"}},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }
    real_cluster.create(app, real_namespace)
    pod = running_pod(real_cluster, real_namespace, "app=app")
    assert pod["metadata"]["annotations"][INJECTED_ANNOTATION] == "netqos"
    assert node_affinity(pod), "the preference was injected"
    assert pod["spec"]["nodeName"] == "fast-1", "the net=high node"
    assert fail_open(real_cluster) == before, "the API server reached the webhook: it never failed open"
    service = real_cluster.get(f"/api/v1/namespaces/{DEFAULT_NAMESPACE}/services/{DEPLOYMENT}")
    network = nodes.recorded(real_cluster.directory)
    assert ipaddress.ip_address(service["spec"]["clusterIP"]) in ipaddress.ip_network(network.service_cidr)


def running_pod(cluster, namespace: str, selector: str) -> dict:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        found = cluster.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}") or {}
        running = [p for p in found.get("items", []) if p["status"].get("phase") == "Running"]
        if running:
            return running[0]
        time.sleep(0.5)
    raise AssertionError(f"no running pod {selector} in {namespace} within {WAIT:.0f} s")
