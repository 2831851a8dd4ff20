"""The experiment of the NetQoS scheduler plugin, on a real control plane: the two nodes, the test
pod applied with kubectl, the webhook called by the real API server, the pod bound by the real
kube-scheduler; and the NetQoS plugin itself, in the scheduler's `netqos-scheduler` profile."""

from __future__ import annotations

import json

import pytest
import yaml

from harness.controlplane import NETQOS_SCHEDULER
from tests.e2e.conftest import cli, experiment_nodes, manifest, node_affinity
from tests.fixtures import REPO

TEST_POD = "deploy/examples/test-pod.yaml"


def reviewed(cluster, path: str) -> dict:
    """The pod as `netqos-webhook review` says the webhook makes it (what the stored pod must be)."""
    return yaml.safe_load(cli(cluster, "review", path, "-o", "pod").stdout)


def test_the_labelled_pod_applied_with_kubectl_is_mutated_by_the_real_api_server_and_bound_to_the_fast_node(
    cluster, registered, namespace, nodes
):
    experiment_nodes(cluster)
    applied = cluster.kubectl("apply", "-n", namespace, "-f", str(REPO / TEST_POD))
    assert "qos-demo-pod created" in applied.stdout

    stored = cluster.pod(namespace, "qos-demo-pod")
    want = reviewed(cluster, TEST_POD)
    assert node_affinity(want), "the default policy injects preferred terms into the test pod"
    assert node_affinity(stored) == node_affinity(want)
    assert (
        stored["metadata"]["annotations"]["netqos.io/injected"] == want["metadata"]["annotations"]["netqos.io/injected"]
    )
    assert cluster.wait_bound(namespace, "qos-demo-pod") == "fake-node-1"


def test_the_netqos_profile_binds_the_unmutated_pod_to_the_fast_node_too(cluster, unregistered, namespace, nodes):
    experiment_nodes(cluster)
    pod = manifest(TEST_POD)
    pod["spec"]["schedulerName"] = NETQOS_SCHEDULER
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pod))
    stored = cluster.pod(namespace, "qos-demo-pod")
    assert node_affinity(stored) == [], "no webhook is registered: the pod is stored as written"
    assert cluster.wait_bound(namespace, "qos-demo-pod") == "fake-node-1"


@pytest.mark.parametrize("scheduler", ["default-scheduler", NETQOS_SCHEDULER])
def test_with_the_fast_node_full_both_schedulers_still_run_the_pod_on_the_slow_node(
    cluster, request, namespace, nodes, scheduler
):
    # the stock scheduler with the webhook's terms; the NetQoS profile without the webhook
    request.getfixturevalue("registered" if scheduler == "default-scheduler" else "unregistered")
    experiment_nodes(cluster)
    # What fills fake-node-1: a pod bound there directly, requesting all its CPU.
    filler = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "filler"},
        "spec": {
            "nodeName": "fake-node-1",
            "containers": [
                {"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "4"}}}
            ],
            "tolerations": [{"operator": "Exists"}],
        },
    }
    cluster.write_pod_status(cluster.create(filler, namespace))
    pod = manifest(TEST_POD)
    pod["spec"]["schedulerName"] = scheduler
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pod))
    assert bool(node_affinity(cluster.pod(namespace, "qos-demo-pod"))) == (scheduler == "default-scheduler")
    assert cluster.wait_bound(namespace, "qos-demo-pod") == "minikube"
