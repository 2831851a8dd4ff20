"""ImageLocality when nodes report one image at different sizes, against the real kube-scheduler.

The scheduler's cache keeps one size per image name, that of the first node it adds that lists
it, and scores every node holding the image by that size (docs/scheduling.md, ImageLocality).
Three Nodes are created one after another while the scheduler runs, so its cache adds them in
creation order:

- img-b first, holding the image at 100 MiB; then, a second later, img-a holding it at 900 MiB
  (its name sorts first, so creation order, not name order, decides the size kept);
- img-c, holding no image, with twice the CPU and memory.

Kept at 100 MiB, the image is worth 4 points on both holders, less than img-c's lead in
NodeResourcesFit and NodeResourcesBalancedAllocation (totals 663 and 656 in the default
profile): the scheduler binds img-c. Scored by each node's own size, img-a would get 59 and win;
kept at img-a's 900 MiB (name order), img-a and img-b would tie. `explain` must predict img-c
under both profiles and name the size it takes.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
import yaml

from harness.controlplane import NETQOS_SCHEDULER
from tests.e2e.conftest import cli
from webhook.names import OPT_OUT_ANNOTATION

MI = 2**20


def node(name: str, cpu: str, memory: str, image: str, image_size: int | None) -> dict[str, Any]:
    """A Node with its status as a kubelet writes it: net=high, allocatable, Ready, `image` at
    `image_size` (None: no image)."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    status: dict[str, Any] = {
        "allocatable": allocatable,
        "capacity": allocatable,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }
    if image_size is not None:
        status["images"] = [{"names": [image], "sizeBytes": image_size}]
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "net": "high"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "status": status}


def nodes_listing(image: str) -> list[dict[str, Any]]:
    """The nodes, in the order they are created."""
    return [
        node("img-b", "4", "8Gi", image, 100 * MI),
        node("img-a", "4", "8Gi", image, 900 * MI),
        node("img-c", "8", "16Gi", image, None),
    ]


def probe(namespace: str, image: str) -> dict[str, Any]:
    container = {"name": "app", "image": image, "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": namespace, "labels": {"qos": "latency-sensitive"}},
        "spec": {"containers": [container]},
    }


def as_written_for(scheduler: str, pod: dict[str, Any]) -> dict[str, Any]:
    """The pod for `scheduler`: for the NetQoS profile as written (the webhook told to leave it),
    as explain's NetQoS prediction takes it."""
    if scheduler == NETQOS_SCHEDULER:
        pod["metadata"]["annotations"] = {OPT_OUT_ANNOTATION: "false"}
        pod["spec"]["schedulerName"] = NETQOS_SCHEDULER
    return pod


def create_one_after_another(cluster, objects: list[dict[str, Any]]) -> None:
    """Each node once the scheduler's cache holds the ones before it, img-a in a later second
    than img-b (creationTimestamp has whole seconds)."""
    for count, obj in enumerate(objects, start=1):
        created = cluster.create(obj)
        wait_cache_nodes(cluster, count)
        if count == 1:
            stamp = created["metadata"]["creationTimestamp"]
            while time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) <= stamp:
                time.sleep(0.1)


def wait_cache_nodes(cluster, nodes: int, timeout: float = 90) -> None:
    """Until the scheduler's cache holds `nodes` nodes (a deleted node stays there while pods
    bound to it do, until the pod garbage collector removes them) and no assumed pod."""
    deadline = time.monotonic() + timeout
    while (have := cluster.scheduler_cache()).get("nodes") != nodes or have.get("assumed_pods"):
        assert time.monotonic() < deadline, f"the scheduler's cache holds {have}, not {nodes} nodes"
        time.sleep(0.1)


@pytest.mark.parametrize(
    "scheduler, prediction", [("default-scheduler", "predicted"), (NETQOS_SCHEDULER, "netqos_predicted")]
)
def test_the_size_of_the_node_the_cache_added_first_scores_every_node_holding_the_image(
    cluster, registered, nodes, namespace, tmp_path, scheduler, prediction
):
    image = f"registry.example/image-sizes-{uuid.uuid4().hex[:8]}:1"  # no other test's node lists it
    wait_cache_nodes(cluster, 0)
    create_one_after_another(cluster, nodes_listing(image))
    path = tmp_path / "probe.yaml"
    path.write_text(yaml.safe_dump(probe(namespace, image)))

    report = json.loads(cli(cluster, "explain", "--pod", str(path), "-o", "json").stdout)
    cluster.create(as_written_for(scheduler, probe(namespace, image)), namespace)
    try:
        bound = cluster.wait_bound(namespace, "probe")
    finally:  # no kubelet confirms a graceful deletion: the next test's cache would keep img-c
        cluster.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/probe", {"gracePeriodSeconds": 0})

    assert (bound, report[prediction]) == ("img-c", ["img-c"])
    assert {n["name"]: n["scores"]["ImageLocality"] for n in report["nodes"]} == {"img-a": 4, "img-b": 4, "img-c": 0}
    sizes = report["image_sizes"]
    assert [(s["image"], s["size_bytes"], s["node"], s["decides_prediction"]) for s in sizes] == [
        (image, 100 * MI, "img-b", True)
    ]
    assert [r["size_bytes"] for r in sizes[0]["reported"]] == [100 * MI, 900 * MI]
