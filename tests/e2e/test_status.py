"""Fail-open and `netqos-webhook status` on the real cluster.

Pods are created while a webhook serves (they get the preference) and after it stopped (the API
server cannot reach it, `failurePolicy: Ignore` lets them through unmutated); then the real
installation goes in (`kubectl apply -k deploy/base`, `netqos-webhook register`), its pods written
Running and Ready as a kubelet would, and `status` must report the registration, the caBundle,
the coverage (the missing pods with the command that recreates them) and the placement.
"""

from __future__ import annotations

import json
import time

import pytest

from harness.server import start_server
from tests.e2e.conftest import WEBHOOK_CONFIGURATION, cli, node_affinity, register
from tests.fixtures import REPO
from webhook.names import DEFAULT_NAMESPACE, INJECTED_ANNOTATION

LABELS = {"qos": "latency-sensitive"}


def node(name: str, net: str | None) -> dict:
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    if net is not None:
        labels["net"] = net
    allocatable = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def deployment(name: str, replicas: int) -> dict:
    labels = {**LABELS, "app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "100m"}},
                        }
                    ]
                },
            },
        },
    }


def pods_of(cluster, namespace: str, count: int, selector: str, timeout: float = 30) -> list[dict]:
    """The `count` pods matching `selector` once they exist and are bound (controllers create them)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = cluster.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}")["items"]
        if len(items) == count and all(p["spec"].get("nodeName") for p in items):
            return items
        time.sleep(0.2)
    raise AssertionError(f"{count} bound pods {selector} in {namespace} not there within {timeout:.0f} s: {items}")


def run_all(cluster, pods: list[dict]) -> None:
    for pod in pods:
        cluster.write_pod_status(pod)


@pytest.fixture
def installation(cluster):
    """deploy/base applied for real; removed afterwards (its pods at once: no kubelet confirms),
    with the webhook configuration kubectl and register shared, so the next test registers afresh."""
    yield
    cluster.request("DELETE", WEBHOOK_CONFIGURATION)
    cluster.delete_namespace(DEFAULT_NAMESPACE)


def test_pods_created_while_the_webhook_is_down_are_created_without_the_preference_and_status_reports_them(
    cluster, registered, namespace, nodes, installation, tmp_path
):
    for name, net in (("high-1", "high"), ("high-2", "high"), ("slow-1", "low"), ("plain-1", None)):
        cluster.create(node(name, net))

    with start_server(tmp_path / "webhook") as server:
        register(cluster, server)
        cluster.create(deployment("api", 2), namespace)
        api = pods_of(cluster, namespace, 2, "app%3Dapi")
    # The webhook is stopped (connections refused) but still registered: fail open.
    cluster.create(deployment("batch", 2), namespace)
    debug = cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "debug", "labels": LABELS},
            "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
        },
        namespace,
    )
    batch = pods_of(cluster, namespace, 2, "app%3Dbatch")
    assert all(INJECTED_ANNOTATION in p["metadata"].get("annotations", {}) for p in api)
    assert all(node_affinity(p) == [] for p in [*batch, debug])
    cluster.wait_bound(namespace, "debug")
    run_all(cluster, cluster.get(f"/api/v1/namespaces/{namespace}/pods")["items"])
    assert {p["spec"]["nodeName"] for p in api} <= {"high-1", "high-2"}

    # The real installation: the base, then register (the Secret, and the caBundle for the Service).
    # The configuration registered with a URL goes first: applying the base's (a Service) over it
    # would leave both a url and a service, which the API server refuses.
    cluster.request("DELETE", WEBHOOK_CONFIGURATION)
    cluster.kubectl("apply", "-k", str(REPO / "deploy/base"))
    certs = tmp_path / "certs"
    cli(cluster, "register", "--config", str(REPO / "deploy/base/policy.yaml"), "--certs", str(certs))
    served = pods_of(cluster, DEFAULT_NAMESPACE, 2, "app.kubernetes.io%2Fname%3Dnetqos-webhook")
    run_all(cluster, served)
    _wait_ready(cluster)

    table = cli(cluster, "status", "-n", namespace, check=False)
    assert table.returncode == 3, table.stdout + table.stderr  # pods missing the preference
    assert f"kubectl -n {namespace} rollout restart deployment/batch" in table.stdout
    assert "    or:       netqos-webhook rebalance --missing --apply" in table.stdout  # batch's pods, not debug's
    assert table.stdout.count("netqos-webhook rebalance --missing --apply") == 1
    assert f"kubectl -n {namespace} delete pod debug" in table.stdout

    report = json.loads(cli(cluster, "status", "-n", namespace, "-o", "json", check=False).stdout)
    webhook = report["webhook"]
    assert webhook["configuration"] == "netqos-webhook"
    assert webhook["entries"] and all(
        e["ca_bundle"] and e["object_selector_matches_policy"] for e in webhook["entries"]
    )
    assert webhook["ready_endpoints"] == 2
    assert webhook["deployment"] == {"ready_replicas": 2, "replicas": 2}
    assert webhook["certificate"]["verifies_against_ca_bundle"] is True
    assert report["problems"] == [], report["problems"]
    assert report["pods"] == {
        "selected": 5,
        "injected": 2,
        "explicit": 0,
        "opted_out": 0,
        "missing": 3,
        "injected_earlier": 0,
    }
    assert sorted(p["name"] for p in report["missing"]) == sorted(["debug", *(p["metadata"]["name"] for p in batch)])
    placed = {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in cluster.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    }
    klass = {"high-1": "high", "high-2": "high", "slow-1": "low", "plain-1": "unlabelled"}
    want = {k: 0 for k in report["placement"]}
    for name in placed.values():
        want[klass[name]] += 1
    assert report["placement"] == want


def _wait_ready(cluster, timeout: float = 30) -> None:
    """Until the Deployment counts its replicas ready and the Service has ready endpoints."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        deployment = cluster.get(f"/apis/apps/v1/namespaces/{DEFAULT_NAMESPACE}/deployments/netqos-webhook")
        slices = cluster.get(f"/apis/discovery.k8s.io/v1/namespaces/{DEFAULT_NAMESPACE}/endpointslices")["items"]
        ready = sum(1 for s in slices for e in s.get("endpoints") or () if e["conditions"].get("ready"))
        if deployment.get("status", {}).get("readyReplicas") == 2 and ready == 2:
            return
        time.sleep(0.2)
    raise AssertionError(f"the webhook Deployment is not ready within {timeout:.0f} s: {deployment.get('status')}")
