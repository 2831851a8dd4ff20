"""A pod's resources counted as kube-scheduler v1.36.3 counts them (webhook.resources.pod_resources,
read through the scheduler's model): pod-level resources with the API server's defaults, in-place
resize, rounding once per pod, hostNetwork ports, image volumes in ImageLocality, and a node
without status.allocatable. Each expectation is the Go code's, cited in webhook/resources.py.
"""

from __future__ import annotations

import pytest

from harness.pods import pod
from webhook.explain import explain
from webhook.policy_file import default_policy
from webhook.resources import HostPort
from webhook.scheduler.model import EMPTY_USAGE, Node
from webhook.scheduler.plugins.imagelocality import image_locality, image_states
from webhook.scheduler.plugins.noderesources import REASON_TOO_MANY_PODS, insufficient_resources
from webhook.scheduler.read import node_info, pod_info, usage_info

GI, MI = 2**30, 2**20


def container(name: str = "c", requests: dict | None = None, limits: dict | None = None, **extra) -> dict:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v is not None}
    return {"name": name, "image": "app:1", "resources": resources, **extra}


def resized(name: str, actuated: dict | None = None, allocated: dict | None = None) -> dict:
    """A container status after an in-place resize: what runs (actuated) and what the kubelet allocated."""
    status: dict = {"name": name, "resources": {"requests": actuated} if actuated is not None else {}}
    if allocated is not None:
        status["allocatedResources"] = allocated
    return status


REQUESTS = [
    # (what, pod, requests)
    (
        "pod-level limits only: the API server copies them into pod-level requests (defaultPodRequests)",
        pod(containers=[container()], resources={"limits": {"cpu": "2", "memory": "1Gi"}}),
        {"cpu": 2000, "memory": GI},
    ),
    (
        "pod-level limits with container requests: cpu from the containers' sum, memory from the limit",
        pod(
            containers=[container("a", {"cpu": "100m"}), container("b", {"cpu": "150m"})],
            resources={"limits": {"cpu": "1", "memory": "1Gi"}},
        ),
        {"cpu": 250, "memory": GI},
    ),
    (
        "an in-place resize up: the larger of spec, actuated and allocated (determineEffectiveRequests)",
        pod(
            containers=[container("c", {"cpu": "100m"})],
            status={"containerStatuses": [resized("c", {"cpu": "500m"}, {"cpu": "300m"})]},
        ),
        {"cpu": 500},
    ),
    (
        "an allocated resize not yet actuated counts too",
        pod(
            containers=[container("c", {"memory": "100Mi"})],
            status={"containerStatuses": [resized("c", {"memory": "100Mi"}, {"memory": "300Mi"})]},
        ),
        {"memory": 300 * MI},
    ),
    (
        "an Infeasible resize: only what runs and what is allocated, not the spec asked for",
        pod(
            containers=[container("c", {"cpu": "4"})],
            status={
                "containerStatuses": [resized("c", {"cpu": "200m"}, {"cpu": "200m"})],
                "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}],
            },
        ),
        {"cpu": 200},
    ),
    (
        "an ordinary init container's status is not read (only app containers and sidecars)",
        pod(
            containers=[container("c", {"cpu": "100m"})],
            initContainers=[container("i", {"cpu": "50m"})],
            status={"initContainerStatuses": [resized("i", {"cpu": "900m"})]},
        ),
        {"cpu": 100},
    ),
    (
        "a pod-level resize: status.resources and status.allocatedResources",
        pod(
            containers=[container()],
            resources={"requests": {"cpu": "1"}},
            status={"resources": {"requests": {"cpu": "1500m"}}, "allocatedResources": {"cpu": "2"}},
        ),
        {"cpu": 2000},
    ),
    (
        "requests are summed exactly and rounded once per pod: two 0.5m containers are 1m, not 2m",
        pod(containers=[container("a", {"cpu": "0.5m"}), container("b", {"cpu": "500u"})]),
        {"cpu": 1},
    ),
    (
        "... three half bytes are 2 bytes, not 3; the overhead joins the sum before rounding",
        pod(containers=[container(n, {"memory": "0.5"}) for n in "ab"], overhead={"memory": "500m"}),
        {"memory": 2},
    ),
]


@pytest.mark.parametrize("what, manifest, requests", REQUESTS, ids=[r[0][:60] for r in REQUESTS])
def test_the_pods_requests_are_counted_as_kube_scheduler_counts_them(what, manifest, requests):
    assert dict(pod_info(manifest).requests) == requests
    assert dict(usage_info(manifest).requests) == requests  # what it takes of its node, the same


def test_with_pod_level_requests_a_node_counts_the_cpu_default_only_where_no_level_names_cpu():
    # getNonMissingContainerRequests: the pod total names cpu (container a), so container b gets no
    # 100m in NonZeroRequested; the scorers still give it 100m for the pod being scheduled.
    manifest = pod(
        containers=[container("a", {"cpu": "100m"}), container("b")],
        resources={"requests": {"memory": "1Gi"}},
    )
    view = pod_info(manifest)
    assert (view.requests["cpu"], view.non_zero_requests["cpu"], view.scored_requests["cpu"]) == (100, 100, 200)
    assert view.non_zero_requests["memory"] == view.scored_requests["memory"] == GI


def test_without_pod_level_requests_every_container_missing_cpu_or_memory_gets_the_default():
    view = pod_info(pod(containers=[container("a", {"cpu": "100m"}), container("b")]))
    assert dict(view.non_zero_requests) == dict(view.scored_requests) == {"cpu": 200, "memory": 400 * MI}


def test_a_host_network_pods_container_ports_are_bound_on_the_node():
    # defaultHostNetworkPorts copies containerPort into a missing hostPort; GetHostPorts counts the
    # app containers and the sidecars, not an ordinary init container.
    manifest = pod(
        hostNetwork=True,
        containers=[container(ports=[{"containerPort": 8080}, {"containerPort": 53, "protocol": "UDP"}])],
        initContainers=[
            container("sidecar", restartPolicy="Always", ports=[{"containerPort": 9090}]),
            container("setup", ports=[{"containerPort": 7070}]),
        ],
    )
    assert set(pod_info(manifest).host_ports) == {
        HostPort("", "TCP", 8080),
        HostPort("", "UDP", 53),
        HostPort("", "TCP", 9090),
    }
    assert pod_info(pod(containers=[container(ports=[{"containerPort": 8080}])])).host_ports == ()


def test_image_volumes_count_in_image_locality_but_add_no_room():
    manifest = pod(
        containers=[container()],
        volumes=[{"name": "model", "image": {"reference": "models/llm"}}, {"name": "tmp", "emptyDir": {}}],
    )
    view = pod_info(manifest)
    assert (view.images, view.containers) == (("app:1", "models/llm:latest"), 1)
    node = Node("n", {}, images={"models/llm:latest": 500 * MI})
    # image_locality.go: 500 MB on the only node, scaled between 23 MB and 1000 MB x 1 container
    states = image_states(view.images, [node])
    assert image_locality(view.images, node, states, 1, view.containers) == 100 * 477 // 977


def test_a_node_without_status_allocatable_fits_no_pod():
    node = node_info({"metadata": {"name": "bare"}, "status": {}})
    assert node.allocatable == {}
    assert insufficient_resources({}, node.allocatable, EMPTY_USAGE) == (REASON_TOO_MANY_PODS,)
    report = explain(default_policy(), pod(), [node])
    assert report.ranking.feasible == ()
    assert any("no status.allocatable on bare" in note for note in report.notes)
