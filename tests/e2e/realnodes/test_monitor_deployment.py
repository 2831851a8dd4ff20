"""The monitor of deploy/overlays/monitor on real nodes: its Deployment runs `netqos-webhook
monitor` in the image under a kubelet, with its own read-only ServiceAccount (the API server
reached through the `kubernetes` Service). Its gauges, scraped through the API server's pod proxy,
equal what `status -A -o json` reports of the same world after churn: a Deployment's pods admitted
through the webhook's Service and running on the fast node, pods created while the webhook is
scaled to zero (admitted without the preference: failing open), a pod deleted and re-created by
its ReplicaSet, and the fast node relabelled slow."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harness import monitorview
from tests.e2e.conftest import cli
from tests.e2e.realnodes.conftest import DEPLOYMENT, rollout, webhook_pods
from tests.e2e.realnodes.test_rebalance_job import until
from tests.fixtures import REPO
from webhook.names import DEFAULT_NAMESPACE

WITH_MONITOR = """apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../base
components:
- ../overlays/monitor
"""
MONITOR = "netqos-monitor"
COMPONENT = "app.kubernetes.io/component=monitor"
AGREE = 30.0  # the monitor follows by watch; status lists afresh
LABELS = {"app": "api", "qos": "latency-sensitive"}
PAUSE = "registry.k8s.io/pause:3.10"


def running(cluster, namespace: str, selector: str) -> list[dict[str, Any]]:
    found = cluster.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}") or {}
    return [
        p
        for p in found.get("items", [])
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]


@pytest.fixture
def monitor_pod(real_cluster, installed, tmp_path) -> Iterator[dict[str, Any]]:
    """The monitor component applied beside deploy/base and rolled out: its pod. Its objects are
    deleted afterwards, so the tests after this one run without it."""
    shutil.copytree(REPO / "deploy", tmp_path / "deploy")  # kustomize reads only below its root
    (tmp_path / "deploy/with-monitor").mkdir()
    (tmp_path / "deploy/with-monitor/kustomization.yaml").write_text(WITH_MONITOR)
    real_cluster.kubectl("apply", "-k", str(tmp_path / "deploy/with-monitor"))
    try:
        real_cluster.kubectl(
            "-n", DEFAULT_NAMESPACE, "rollout", "status", f"deployment/{MONITOR}", "--timeout=180s", timeout=200
        )
        [pod] = running(real_cluster, DEFAULT_NAMESPACE, "app.kubernetes.io%2Fcomponent%3Dmonitor")
        yield pod
    finally:
        real_cluster.kubectl(
            "-n",
            DEFAULT_NAMESPACE,
            "delete",
            "deployment,service,serviceaccount,role,rolebinding",
            "-l",
            COMPONENT,
            "--wait=false",
            check=False,
        )
        real_cluster.kubectl("delete", "clusterrole,clusterrolebinding", "-l", COMPONENT, check=False)


def gauges(cluster, pod: dict[str, Any]) -> monitorview.Samples | None:
    """The monitor's metrics page through the API server's pod proxy (None before it publishes)."""
    path = f"/api/v1/namespaces/{DEFAULT_NAMESPACE}/pods/{pod['metadata']['name']}:9464/proxy/metrics"
    status, text = cluster.request("GET", path)
    return monitorview.parse(text) if status == 200 and isinstance(text, str) else None


def assert_agree(cluster, pod: dict[str, Any], timeout: float = AGREE) -> dict[str, Any]:
    """The monitor's gauges equal status's report, within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        expected = monitorview.status_says(json.loads(cli(cluster, "status", "-A", "-o", "json", check=False).stdout))
        samples = gauges(cluster, pod)
        got = monitorview.gauges_say(samples) if samples is not None else None
        if got == expected or time.monotonic() > deadline:
            assert got == expected
            return got
        time.sleep(1)


def scale_webhook(cluster, replicas: int) -> None:
    cluster.kubectl("-n", DEFAULT_NAMESPACE, "scale", f"deployment/{DEPLOYMENT}", f"--replicas={replicas}")
    if replicas:
        rollout(cluster)
        cluster.wait_webhook(active=True, timeout=60)
    else:
        until(lambda: not webhook_pods(cluster), "the webhook's pods gone")


def labelled_pod(name: str) -> dict[str, Any]:
    container = {"name": "app", "image": PAUSE, "resources": {"requests": {"cpu": "50m"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": LABELS},
        "spec": {"containers": [container]},
    }


def test_the_monitors_deployment_agrees_with_status_after_churn_on_real_nodes(
    real_cluster, monitor_pod, real_namespace
):
    spec = monitor_pod["spec"]
    assert spec["serviceAccountName"] == MONITOR and spec["nodeName"] in {"fast-1", "slow-1"}
    samples = gauges(real_cluster, monitor_pod)
    assert samples is not None and () in samples["netqos_monitor_lag_seconds"], "it publishes from inside the cluster"
    assert_agree(real_cluster, monitor_pod)

    api = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "api"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "api"}},
            "template": {"metadata": {"labels": LABELS}, "spec": labelled_pod("x")["spec"]},
        },
    }
    real_cluster.create(api, real_namespace)
    until(lambda: len(running(real_cluster, real_namespace, "app%3Dapi")) == 3, "the Deployment's three pods")
    admitted = assert_agree(real_cluster, monitor_pod)
    assert admitted["states"].get("injected", 0) >= 3 and not admitted["missing"].get(real_namespace), admitted

    # the webhook down but registered: pods are admitted without the preference (it fails open)
    scale_webhook(real_cluster, 0)
    try:
        for i in range(2):
            real_cluster.create(labelled_pod(f"late-{i}"), real_namespace)
        until(lambda: len(running(real_cluster, real_namespace, "app%3Dapi")) == 5, "the two pods made without it")
    finally:
        scale_webhook(real_cluster, 2)
    assert assert_agree(real_cluster, monitor_pod)["missing"].get(real_namespace) == 2

    first = next(p for p in running(real_cluster, real_namespace, "app%3Dapi") if p["metadata"].get("generateName"))
    real_cluster.request("DELETE", f"/api/v1/namespaces/{real_namespace}/pods/{first['metadata']['name']}")
    until(lambda: len(running(real_cluster, real_namespace, "app%3Dapi")) == 5, "the ReplicaSet's new pod")
    real_cluster.kubectl("label", "node", "fast-1", "net=low", "--overwrite")
    try:
        relabelled = assert_agree(real_cluster, monitor_pod)
        assert relabelled["classes"].get("slow", 0) >= 3 and not relabelled["classes"].get("fast"), relabelled
    finally:
        real_cluster.kubectl("label", "node", "fast-1", "net=high", "--overwrite")
    on_fast = [p for p in running(real_cluster, real_namespace, "app%3Dapi") if p["spec"]["nodeName"] == "fast-1"]
    assert assert_agree(real_cluster, monitor_pod)["classes"].get("fast", 0) >= len(on_fast) > 0
