"""Lists on the real API server: page by page, and read again from the first page when etcd is
compacted between two pages (the continue token expires: 410)."""

from __future__ import annotations

from harness.controlplane import Cluster
from webhook import cluster as kube


def bound_pod(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": "no-such-node", "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
    }


def test_a_list_whose_continue_token_expired_is_read_again_from_its_first_page(cluster: Cluster, namespace: str):
    for i in range(12):
        cluster.create(bound_pod(f"pod-{i:02}"), namespace)
    attempts: list[list[str]] = []

    def read(reader: kube.Reader) -> list[str]:
        names: list[str] = []
        attempts.append(names)
        for pod in reader.list("Pod", namespace):
            names.append(pod["metadata"]["name"])
            if len(attempts) == 1 and len(names) == 5:  # the first page read: change the world, compact
                cluster.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/pod-00?gracePeriodSeconds=0")
                cluster.create(bound_pod("pod-99"), namespace)
                cluster.compact_etcd(f"/api/v1/namespaces/{namespace}/pods")
        return names

    with kube.Reader(kube.connect(str(cluster.kubeconfig)), page_size=5) as reader:
        names = reader.restarting(lambda: read(reader))
        assert reader.restarts == 1
        assert reader.requests == 1 + 1 + 3  # a page, the expired continue, three pages again
    assert attempts[0] == [f"pod-{i:02}" for i in range(5)]
    assert names == [f"pod-{i:02}" for i in range(1, 12)] + ["pod-99"]  # the new snapshot alone
