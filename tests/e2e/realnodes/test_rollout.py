"""Disruptions of the webhook's Deployment on real nodes while pods keep being created: no
created pod misses the preference, and the API server never fails open (its
`apiserver_admission_webhook_fail_open_count` for the webhook does not move): the
Deployment's maxUnavailable 0, readiness probe and preStop sleep, and the PodDisruptionBudget,
at work under a real kubelet, kube-proxy and the Service."""

from __future__ import annotations

import time

from tests.e2e.realnodes.conftest import DEPLOYMENT, PodCreator, fail_open, rollout, webhook_pods
from webhook.names import DEFAULT_NAMESPACE

WARM_UP = 3.0  # seconds of creation before the disruption, so it happens mid-stream


def test_a_rolling_update_under_continuous_pod_creation_loses_no_mutation(real_cluster, installed, real_namespace):
    before = fail_open(real_cluster)
    old = {p["metadata"]["name"] for p in webhook_pods(real_cluster)}
    creator = PodCreator(real_cluster, real_namespace)
    creator.start()
    try:
        time.sleep(WARM_UP)
        real_cluster.kubectl("-n", DEFAULT_NAMESPACE, "rollout", "restart", f"deployment/{DEPLOYMENT}")
        rollout(real_cluster)
        time.sleep(WARM_UP)
    finally:
        creator.stop()
    now = {p["metadata"]["name"] for p in webhook_pods(real_cluster) if not p["metadata"].get("deletionTimestamp")}
    assert not now & old, "every replica was replaced"
    mutated = len(creator.created) - len(creator.unmutated())
    print(f"rolling update: {len(creator.created)} pods created, {mutated} mutated")
    assert not creator.errors
    assert len(creator.created) > 50
    assert creator.unmutated() == []
    assert fail_open(real_cluster) == before


def test_deleting_one_replica_during_creation_leaves_the_other_serving_every_call(
    real_cluster, installed, real_namespace
):
    before = fail_open(real_cluster)
    # a replica still terminating from an earlier rollout may be gone before the delete reaches it
    serving = [p for p in webhook_pods(real_cluster) if not p["metadata"].get("deletionTimestamp")]
    victim = serving[0]["metadata"]["name"]
    creator = PodCreator(real_cluster, real_namespace)
    creator.start()
    try:
        time.sleep(WARM_UP)
        real_cluster.kubectl("-n", DEFAULT_NAMESPACE, "delete", "pod", victim, "--wait=true", timeout=90)
        time.sleep(WARM_UP)
    finally:
        creator.stop()
    rollout(real_cluster)
    assert victim not in {p["metadata"]["name"] for p in webhook_pods(real_cluster)}
    assert not creator.errors and len(creator.created) > 20
    assert creator.unmutated() == []
    assert fail_open(real_cluster) == before


def test_the_disruption_budget_refuses_the_eviction_that_would_leave_no_replica(real_cluster, installed):
    nodes = ("fast-1", "slow-1")
    for node in nodes:  # no replacement can start anywhere
        real_cluster.kubectl("cordon", node)
    try:
        pods = sorted(p["metadata"]["name"] for p in webhook_pods(real_cluster))
        assert len(pods) == 2
        answers = []
        for pod in pods:
            eviction = {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": pod, "namespace": DEFAULT_NAMESPACE},
            }
            path = f"/api/v1/namespaces/{DEFAULT_NAMESPACE}/pods/{pod}/eviction"
            answers.append(real_cluster.request("POST", path, eviction))
        assert answers[0][0] == 201, answers[0]
        assert answers[1][0] == 429, answers[1]
        assert "disruption budget" in str(answers[1][1])
        alive = {
            p["metadata"]["name"] for p in webhook_pods(real_cluster) if not p["metadata"].get("deletionTimestamp")
        }
        assert pods[1] in alive and pods[0] not in alive
    finally:
        for node in nodes:
            real_cluster.kubectl("uncordon", node)
    rollout(real_cluster)


REFUSED_POLICY = """apiVersion: netqos.io/v1alpha1
kind: NetQoSPolicy
rules:
- name: netqos
  podSelector:
    matchLabels:
      qos: latency-sensitive
  nodeScore:
    key: "not a label key!"
    scores: []
"""
STALLED = 40.0  # seconds the refused rollout is watched: several probe periods and restarts


def ready(pods: list[dict]) -> set[str]:
    return {
        p["metadata"]["name"]
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
        and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
    }


def test_a_rollout_to_a_policy_the_webhook_refuses_never_replaces_a_ready_replica(
    real_cluster, installed, real_namespace
):
    before = fail_open(real_cluster)
    ready_before = ready(webhook_pods(real_cluster))
    assert len(ready_before) == 2
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "netqos-webhook-policy-refused"},
        "data": {"policy.yaml": REFUSED_POLICY},
    }
    real_cluster.create(configmap, DEFAULT_NAMESPACE)
    path = f"/apis/apps/v1/namespaces/{DEFAULT_NAMESPACE}/deployments/{DEPLOYMENT}"
    volumes = real_cluster.get(path)["spec"]["template"]["spec"]["volumes"]
    for volume in volumes:
        if "configMap" in volume:
            volume["configMap"]["name"] = "netqos-webhook-policy-refused"
    patch = {"spec": {"template": {"spec": {"volumes": volumes}}}}
    creator = PodCreator(real_cluster, real_namespace, interval=0.2)
    creator.start()
    try:
        status, body = real_cluster.request("PATCH", path, patch, "application/strategic-merge-patch+json")
        assert status == 200, body
        time.sleep(STALLED)
        deployment = real_cluster.get(path)
        pods = [p for p in webhook_pods(real_cluster) if not p["metadata"].get("deletionTimestamp")]
        assert ready(pods) == ready_before, "both old replicas still serve; no new one became ready"
        assert deployment["status"].get("availableReplicas") == 2
        assert deployment["status"].get("updatedReplicas") == 1, "one surge pod, stuck"
        assert len(pods) == 3
    finally:
        creator.stop()
        real_cluster.kubectl("-n", DEFAULT_NAMESPACE, "rollout", "undo", f"deployment/{DEPLOYMENT}")
        rollout(real_cluster)
        real_cluster.request(
            "DELETE", f"/api/v1/namespaces/{DEFAULT_NAMESPACE}/configmaps/netqos-webhook-policy-refused"
        )
    assert not creator.errors and creator.created and not creator.unmutated()
    assert fail_open(real_cluster) == before
