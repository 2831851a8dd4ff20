"""The rebalancer of deploy/overlays/rebalance on real nodes: a Job made from its CronJob runs
`netqos-webhook rebalance --apply` in the image, with the CronJob's ServiceAccount (the API server
reached through the `kubernetes` Service), and evicts a pod stranded on the net=low node; the
replacement, started by the kubelet, runs on the net=high node."""

from __future__ import annotations

import copy
import shutil
import time

from tests.e2e.realnodes.conftest import rollout
from tests.fixtures import REPO
from webhook.names import DEFAULT_NAMESPACE

WITH_REBALANCE = """apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../base
components:
- ../overlays/rebalance
"""
WAIT = 180.0


def pods_of(cluster, namespace: str) -> list[dict]:
    found = cluster.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3Dstranded") or {}
    return [p for p in found.get("items", []) if not p["metadata"].get("deletionTimestamp")]


def running_on(cluster, namespace: str) -> list[str]:
    return sorted(
        p["spec"].get("nodeName", "")
        for p in pods_of(cluster, namespace)
        if p["status"].get("phase") == "Running"
        and all(c.get("ready") for c in p["status"].get("containerStatuses", [{}]))
    )


def until(condition, what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} not within {timeout:.0f} s"
        time.sleep(1)


def test_the_cronjobs_job_evicts_a_stranded_pod_whose_replacement_runs_on_the_fast_node(
    real_cluster, installed, real_namespace, tmp_path
):
    shutil.copytree(REPO / "deploy", tmp_path / "deploy")  # kustomize reads only below its root
    (tmp_path / "deploy/with-rebalance").mkdir()
    (tmp_path / "deploy/with-rebalance/kustomization.yaml").write_text(WITH_REBALANCE)
    real_cluster.kubectl("apply", "-k", str(tmp_path / "deploy/with-rebalance"))
    rollout(real_cluster)
    app = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "stranded"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "stranded"}},
            "template": {
                "metadata": {"labels": {"app": "stranded", "qos": "latency-sensitive"}},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }
    real_cluster.kubectl("cordon", "fast-1")  # the fast node is "full" when they are created
    try:
        real_cluster.create(app, real_namespace)
        until(lambda: running_on(real_cluster, real_namespace) == ["slow-1", "slow-1"], "both on slow-1")
    finally:
        real_cluster.kubectl("uncordon", "fast-1")
    stranded = {p["metadata"]["name"] for p in pods_of(real_cluster, real_namespace)}

    cronjob = real_cluster.get(f"/apis/batch/v1/namespaces/{DEFAULT_NAMESPACE}/cronjobs/netqos-rebalance")
    template = copy.deepcopy(cronjob["spec"]["jobTemplate"])
    container = template["spec"]["template"]["spec"]["containers"][0]
    container["args"].append("--min-age=0s")  # the pods are seconds old; the CronJob waits 10 minutes
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "rebalance-now"}, "spec": template["spec"]}
    job["metadata"]["labels"] = template["metadata"].get("labels", {})
    real_cluster.create(job, DEFAULT_NAMESPACE)
    path = f"/apis/batch/v1/namespaces/{DEFAULT_NAMESPACE}/jobs/rebalance-now"
    try:
        until(lambda: (real_cluster.get(path) or {}).get("status", {}).get("succeeded") == 1, "the Job's success")
        logs = real_cluster.kubectl("-n", DEFAULT_NAMESPACE, "logs", "job/rebalance-now").stdout
        ran = real_cluster.get(f"/api/v1/namespaces/{DEFAULT_NAMESPACE}/pods?labelSelector=job-name%3Drebalance-now")[
            "items"
        ][0]
        assert ran["spec"]["serviceAccountName"] == "netqos-rebalance"
        until(lambda: running_on(real_cluster, real_namespace) == ["fast-1", "slow-1"], "the replacement")
        now = {p["metadata"]["name"] for p in pods_of(real_cluster, real_namespace)}
        assert len(stranded - now) == 1, f"exactly one pod evicted; the Job's log:\n{logs}"
        replacement = next(p for p in pods_of(real_cluster, real_namespace) if p["metadata"]["name"] not in stranded)
        assert replacement["spec"]["nodeName"] == "fast-1"
    finally:
        real_cluster.request("DELETE", path + "?propagationPolicy=Background")
        # the CronJob itself would go on evicting in the tests that follow
        real_cluster.request("DELETE", f"/apis/batch/v1/namespaces/{DEFAULT_NAMESPACE}/cronjobs/netqos-rebalance")
