"""Spreading beside the preference, on the real kube-scheduler: the example Deployment's three
replicas on one net=high node and one net=low node land two and one (PodTopologySpread's system
default constraints over the ReplicaSet's pods outweigh the preference for the third), as
docs/scheduling.md says."""

from __future__ import annotations

import yaml

from tests.e2e.test_status import node, pods_of
from tests.fixtures import REPO

EXAMPLE = REPO / "deploy/examples/latency-sensitive-deployment.yaml"


def test_the_example_deployments_third_replica_is_spread_off_the_only_fast_node(
    cluster, registered, namespace: str, nodes
) -> None:
    cluster.create(node("fast-1", "high"))
    cluster.create(node("slow-1", "low"))
    deployment = yaml.safe_load(EXAMPLE.read_text())
    deployment["spec"]["replicas"] = 1  # one at a time: each replica is scheduled seeing the ones before
    cluster.create(deployment, namespace)
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/latency-demo"
    for replicas in (1, 2, 3):
        if replicas > 1:
            code, body = cluster.request(
                "PATCH", path, {"spec": {"replicas": replicas}}, "application/merge-patch+json"
            )
            assert code == 200, body
        placed = pods_of(cluster, namespace, replicas, "app%3Dlatency-demo")
    assert sorted(p["spec"]["nodeName"] for p in placed) == ["fast-1", "fast-1", "slow-1"]
