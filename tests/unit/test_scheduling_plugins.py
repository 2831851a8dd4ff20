"""kube-scheduler's resource accounting, filters and score plugins, one table each. Every expected
value is worked out by hand from the Go source (the comment beside it shows the arithmetic)."""

from __future__ import annotations

import dataclasses

import pytest

from harness.pods import pod
from webhook.apidata import ShapeError
from webhook.resources import CPU, MEMORY, HostPort, parse_quantity, resource_list
from webhook.scheduler.cycle import filter_reasons, rank
from webhook.scheduler.framework import default_normalize
from webhook.scheduler.model import Node, NodeUsage, ScoringStrategy, Taint, normalized_image_name, usage_of
from webhook.scheduler.plugins.imagelocality import ImageState, image_locality
from webhook.scheduler.plugins.nodeports import REASON_NODE_PORTS, ports_fit
from webhook.scheduler.plugins.noderesources import (
    REASON_TOO_MANY_PODS,
    balanced_allocation,
    balanced_score,
    broken_linear,
    insufficient_resources,
    least_allocated,
    most_allocated,
    requested_to_capacity_ratio,
)
from webhook.scheduler.read import pod_info
from webhook.scheduler.registry import BALANCED_ALLOCATION, DEFAULT_PROFILE, NETQOS, NODE_AFFINITY

GI, MI = 2**30, 2**20


def container(cpu: str | None = None, memory: str | None = None, **extra) -> dict:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"name": "c", "image": "app:1", "resources": {"requests": requests}, **extra}


# --- quantities -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "resource, text, expected",
    [
        ("cpu", "100m", 100),
        ("cpu", "1.5", 1500),
        ("cpu", 2, 2000),
        ("cpu", "500u", 1),  # MilliValue rounds up
        ("memory", "128Mi", 128 * MI),
        ("memory", "1Gi", GI),
        ("memory", "1e3", 1000),
        ("memory", "1k", 1000),
        ("memory", "1.5Ki", 1536),
        ("memory", "0.1", 1),  # Value rounds up
        ("pods", "110", 110),
    ],
)
def test_quantities_read_as_the_scheduler_counts_them(resource, text, expected):
    assert resource_list({"r": {resource: text}}, "r", "r") == {resource: expected}


@pytest.mark.parametrize("text", ["1.2.3", "abc", "1Qi", True, None, [], "1 Gi"])
def test_a_malformed_quantity_is_a_shape_error_naming_the_field(text):
    with pytest.raises(ShapeError, match=r"^x must be a quantity"):
        parse_quantity(text, "x")


# --- the pod's request (component-helpers resource.PodRequests) ---------------------------------

REQUESTS = [
    # (spec, requests, non-zero requests)
    ({"containers": [container("100m", "100Mi"), container("200m")]}, {"cpu": 300, "memory": 100 * MI}, None),
    # an init container larger than the app containers sets the request
    ({"containers": [container("100m")], "initContainers": [container("500m")]}, {"cpu": 500}, None),
    # a sidecar (restartPolicy Always) adds to the app containers and to every later init container:
    # app 100 + sidecar 50 = 150; the init container after it needs 200 + 50 = 250
    (
        {
            "containers": [container("100m")],
            "initContainers": [container("50m", restartPolicy="Always"), container("200m")],
        },
        {"cpu": 250},
        None,
    ),
    # the same init container before the sidecar needs only its own 200
    (
        {
            "containers": [container("100m")],
            "initContainers": [container("200m"), container("50m", restartPolicy="Always")],
        },
        {"cpu": 200},
        None,
    ),
    # overhead is added last: 100 + 250
    ({"containers": [container("100m")], "overhead": {"cpu": "250m"}}, {"cpu": 350}, None),
    # pod-level requests replace the containers' sum
    ({"containers": [container("100m")], "resources": {"requests": {"cpu": "2"}}}, {"cpu": 2000}, None),
    # limits only: the API server copies them into the requests
    (
        {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]},
        {"cpu": 1000, "memory": GI},
        None,
    ),
    # no requests at all: nothing for the filter, 100m / 200Mi per container for scoring
    (
        {"containers": [container(), container()]},
        {},
        {"cpu": 200, "memory": 400 * MI},
    ),
    # a container naming cpu only gets the memory default
    ({"containers": [container("300m")]}, {"cpu": 300}, {"cpu": 300, "memory": 200 * MI}),
    # an explicit zero is not missing: it stays zero
    ({"containers": [container("0", "0")]}, {"cpu": 0, "memory": 0}, {"cpu": 0, "memory": 0}),
]


@pytest.mark.parametrize("spec, requests, non_zero", REQUESTS)
def test_the_pod_request_is_computed_as_kube_scheduler_does(spec, requests, non_zero):
    view = pod_info(pod(**spec))
    assert dict(view.requests) == requests
    if non_zero is not None:
        assert dict(view.non_zero_requests) == non_zero


def test_node_usage_sums_the_requests_and_non_zero_requests_of_its_pods():
    pods = [pod_info(pod(containers=[container("500m", "1Gi")])), pod_info(pod(containers=[container()]))]
    usage = usage_of(pods)
    assert (dict(usage.requested), dict(usage.non_zero_requested), usage.pods) == (
        {"cpu": 500, "memory": GI},
        {"cpu": 600, "memory": GI + 200 * MI},
        2,
    )


# --- NodeResourcesFit's filter ----------------------------------------------------------------

FIT = [
    # (pod request, allocatable, usage, reasons)
    ({"cpu": 200}, {"cpu": 1000, "memory": GI, "pods": 3}, NodeUsage({"cpu": 800}, {}, 2), ()),  # exactly fits
    ({"cpu": 201}, {"cpu": 1000, "memory": GI, "pods": 3}, NodeUsage({"cpu": 800}, {}, 2), ("Insufficient cpu",)),
    (
        {"cpu": 200, "memory": GI},
        {"cpu": 1000, "memory": GI, "pods": 2},
        NodeUsage({"cpu": 900, "memory": 1}, {}, 2),
        (REASON_TOO_MANY_PODS, "Insufficient cpu", "Insufficient memory"),
    ),
    # zero allocatable: no pod slot, no cpu
    ({"cpu": 100}, {}, NodeUsage(), (REASON_TOO_MANY_PODS, "Insufficient cpu")),
    # requests over allocatable on an empty node
    (
        {"ephemeral-storage": 2 * GI},
        {"ephemeral-storage": GI, "pods": 10},
        NodeUsage(),
        ("Insufficient ephemeral-storage",),
    ),
    # a pod without requests only needs a pod slot, even on a node whose cpu is all taken
    ({}, {"cpu": 1000, "pods": 10}, NodeUsage({"cpu": 5000}, {}, 1), ()),
    # extended resources and hugepages
    ({"example.com/gpu": 1}, {"pods": 10}, NodeUsage(), ("Insufficient example.com/gpu",)),
    ({"hugepages-2Mi": 4 * MI}, {"pods": 10, "hugepages-2Mi": 2 * MI}, NodeUsage(), ("Insufficient hugepages-2Mi",)),
    ({"example.com/gpu": 0}, {"pods": 10}, NodeUsage(), ()),  # a zero request is skipped
    # a node without status.allocatable is not checked
    ({"cpu": 10**9}, None, NodeUsage(), ()),
]


@pytest.mark.parametrize("request_, allocatable, usage, reasons", FIT)
def test_resource_fit_names_every_insufficient_resource(request_, allocatable, usage, reasons):
    assert insufficient_resources(request_, allocatable, usage) == reasons


@pytest.mark.parametrize(
    "wanted, used, fits",
    [
        (HostPort("", "TCP", 80), HostPort("10.0.0.1", "TCP", 80), False),  # 0.0.0.0 overlaps every address
        (HostPort("10.0.0.1", "TCP", 80), HostPort("", "TCP", 80), False),
        (HostPort("10.0.0.1", "TCP", 80), HostPort("10.0.0.2", "TCP", 80), True),
        (HostPort("", "UDP", 80), HostPort("", "TCP", 80), True),
        (HostPort("", "TCP", 81), HostPort("", "TCP", 80), True),
    ],
)
def test_host_ports_conflict_as_host_port_info_checks_them(wanted, used, fits):
    assert ports_fit([wanted], [used]) is fits


def test_a_host_port_in_use_filters_the_node_after_node_affinity():
    spec = {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}
    view = pod_info(pod(**spec))
    used = usage_of([view])
    assert filter_reasons(view, Node("n", {}), used) == (REASON_NODE_PORTS,)
    # a sidecar's host port counts too (util.GetHostPorts)
    sidecar = {"initContainers": [{"name": "s", "restartPolicy": "Always", "ports": [{"hostPort": 8080}]}]}
    assert filter_reasons(pod_info(pod(**sidecar)), Node("n", {}), used) == (REASON_NODE_PORTS,)


# --- score plugins ----------------------------------------------------------------------------

# 3000m of 4000m and 5Gi of 8Gi requested (the pod included)
REQUESTED, ALLOCATABLE, WEIGHTS = [3000, 5 * GI], [4000, 8 * GI], [1, 1]


@pytest.mark.parametrize(
    "requested, allocatable, weights, expected",
    [
        (REQUESTED, ALLOCATABLE, WEIGHTS, 31),  # cpu 1000*100//4000 = 25, memory 3Gi*100//8Gi = 37; 62//2
        ([5000, 5 * GI], ALLOCATABLE, WEIGHTS, 18),  # cpu over allocatable scores 0; (0 + 37)//2
        ([100, GI], [0, 4 * GI], WEIGHTS, 75),  # zero allocatable cpu is left out: memory 75 alone
        ([0, 0], [0, 0], WEIGHTS, 0),  # nothing to weigh
        (REQUESTED, ALLOCATABLE, [3, 1], 28),  # (25*3 + 37)//4 = 112//4
    ],
)
def test_least_allocated(requested, allocatable, weights, expected):
    assert least_allocated(requested, allocatable, weights) == expected


@pytest.mark.parametrize(
    "requested, allocatable, expected",
    [
        (REQUESTED, ALLOCATABLE, 68),  # 3000*100//4000 = 75, 5Gi*100//8Gi = 62; 137//2
        ([5000, 5 * GI], ALLOCATABLE, 81),  # over allocatable counts as full: (100 + 62)//2
        ([100, GI], [0, 4 * GI], 25),
    ],
)
def test_most_allocated(requested, allocatable, expected):
    assert most_allocated(requested, allocatable, WEIGHTS) == expected


@pytest.mark.parametrize(
    "shape, p, expected",
    [
        (((0, 0), (100, 100)), 75, 75),
        (((0, 0), (30, 100)), 10, 33),  # 100*10/30 = 33.3
        (((0, 100), (30, 0)), 10, 67),  # 100 + (-1000/30): Go truncates to -33, Python's // would give -34
        (((10, 50), (20, 80)), 5, 50),  # below the first point: its score
        (((10, 50), (20, 80)), 90, 80),  # beyond the last point: its score
    ],
)
def test_the_broken_linear_shape_divides_as_go_does(shape, p, expected):
    assert broken_linear(shape, p) == expected


@pytest.mark.parametrize(
    "shape, expected",
    [
        (((0, 0), (100, 10)), 69),  # cpu 75, memory 62 (62.5 truncated): 137/2 = 68.5, rounded half away from 0
        (((0, 10), (100, 0)), 32),  # cpu 100-75 = 25, memory 100-62 = 38: 63/2 = 31.5 -> 32
        (((0, 0), (50, 0), (100, 10)), 37),  # cpu 50 + 100*25/50 = 50, memory 100*12/50 = 24: 74/2
    ],
)
def test_requested_to_capacity_ratio(shape, expected):
    assert requested_to_capacity_ratio(REQUESTED, ALLOCATABLE, WEIGHTS, shape) == expected


@pytest.mark.parametrize(
    "requested, allocatable, expected",
    [
        ([1000, 2 * GI], [4000, 4 * GI], 87),  # shares 0.25 and 0.5: std 0.125, 87.5 truncated
        ([8000, 2 * GI], [4000, 4 * GI], 75),  # cpu capped at 1: std (1 - 0.5)/2 = 0.25
        ([1000, GI], [4000, 4 * GI], 100),  # equal shares
        ([1000, 2 * GI], [0, 4 * GI], 100),  # one share: no deviation
        ([200, 5, 8], [1000, 10, 10], 75),  # shares 0.2, 0.5, 0.8: std sqrt(0.06) = 0.2449
    ],
)
def test_balanced_allocation(requested, allocatable, expected):
    assert balanced_allocation(requested, allocatable) == expected


MB = 1000**2


@pytest.mark.parametrize(
    "images, node_images, states, total_nodes, expected",
    [
        # 500 MB on 2 of 4 nodes: 250,000,000 scaled; (250000000 - 23 MiB) * 100 // (1000 MiB - 23 MiB) = 22
        (("app:1",), {"app:1": 500 * MB}, {"app:1": ImageState(500 * MB, 2)}, 4, 22),
        (("app:1",), {"app:1": 10 * MB}, {"app:1": ImageState(10 * MB, 1)}, 1, 0),  # under the 23 MiB threshold
        (("app:1",), {"app:1": 2000 * MB}, {"app:1": ImageState(2000 * MB, 1)}, 1, 100),  # over 1000 MiB
        # two containers of one 1000 MB image on every node: 2e9 of 2 x 1000 MiB = 95
        (("app:1", "app:1"), {"app:1": 1000 * MB}, {"app:1": ImageState(1000 * MB, 1)}, 1, 95),
        # the node reports 2000 MB, the cache keeps 500 MB (another node's): scored as 500 MB, 22
        (("app:1",), {"app:1": 2000 * MB}, {"app:1": ImageState(500 * MB, 2)}, 4, 22),
        (("app:1",), {}, {"app:1": ImageState(500 * MB, 2)}, 3, 0),  # not on the node
        ((), {}, {}, 3, 0),  # no containers
    ],
)
def test_image_locality(images, node_images, states, total_nodes, expected):
    assert image_locality(images, Node("n", {}, images=node_images), states, total_nodes, len(images)) == expected


@pytest.mark.parametrize(
    "name, normalized",
    [
        ("nginx", "nginx:latest"),
        ("registry:5000/app", "registry:5000/app:latest"),
        ("app:1.0", "app:1.0"),
        ("registry:5000/app:1.0", "registry:5000/app:1.0"),
    ],
)
def test_image_names_without_a_tag_get_latest(name, normalized):
    assert normalized_image_name(name) == normalized


@pytest.mark.parametrize(
    "raw, reverse, expected",
    [
        ([0, 1, 2], True, [100, 50, 0]),  # TaintToleration: fewer untolerated taints score higher
        ([0, 0], True, [100, 100]),  # no PreferNoSchedule taint anywhere: every node 100
        ([10, 100, 0], False, [10, 100, 0]),
        ([0, 0], False, [0, 0]),
        ([3, 7], False, [42, 100]),  # 300//7
    ],
)
def test_default_normalize_score(raw, reverse, expected):
    assert default_normalize(raw, reverse) == expected


# --- whole cycles -----------------------------------------------------------------------------

EMPTY = {"cpu": 4000, "memory": 8 * GI, "pods": 110}
LATENCY_SENSITIVE = {"qos": "latency-sensitive"}
PREFER_NOT = Taint("maintenance", "soon", "PreferNoSchedule")


def test_identical_nodes_tie_and_all_are_predicted():
    nodes = [Node(n, {"net": "high"}, allocatable=EMPTY) for n in ("a", "b", "c")]
    ranking = rank(pod_info(pod(containers=[container("1", "1Gi")])), nodes)
    assert ranking.predicted == ("a", "b", "c")
    assert len({n.total for n in ranking.nodes}) == 1


def test_one_feasible_node_is_predicted_without_scoring():
    nodes = [Node("a", {}, allocatable=EMPTY), Node("b", {}, allocatable={**EMPTY, "cpu": 500})]
    ranking = rank(pod_info(pod(containers=[container("1")])), nodes)
    assert ranking.scoring_skipped and ranking.predicted == ("a",)
    assert ranking.nodes[1].reasons == ("Insufficient cpu",) and ranking.nodes[1].total is None


def test_totals_weigh_each_plugin_of_the_default_profile():
    # a: empty, tainted PreferNoSchedule; b: half its cpu taken. Pod: 1 cpu, 1Gi, net=high preferred.
    nodes = [Node("a", {"net": "high"}, (PREFER_NOT,), allocatable=EMPTY), Node("b", {}, allocatable=EMPTY)]
    usage = {"b": NodeUsage({"cpu": 2000, "memory": 0}, {"cpu": 2000, "memory": 0}, 1)}
    spec = {
        "containers": [container("1", "1Gi")],
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "preference": {"matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]},
                    }
                ]
            }
        },
    }
    a, b = rank(pod_info(pod(**spec)), nodes, usage).nodes
    # a: taint 1 of max 1 -> 0; affinity 100; fit cpu 3000*100//4000 = 75, memory 7Gi*100//8Gi = 87 -> 81;
    #    balanced: shares with the pod 0.25, 0.125 -> std 0.0625 -> 93, without 0, 0 -> 100,
    #    so 50 + (50 + 93 - 100) // 2 = 71 (the change in balance, kube-scheduler 1.36); no images -> 0
    assert dict(a.scores) == {
        "TaintToleration": 0,
        "NodeAffinity": 100,
        "NodeResourcesFit": 81,
        "NodeResourcesBalancedAllocation": 71,
        "ImageLocality": 0,
    }
    assert a.total == 0 * 3 + 100 * 2 + 81 + 71 + 0
    # b: taint 100; affinity 0; fit cpu 1000*100//4000 = 25, memory 87 -> 56; balanced with the pod
    #    0.75, 0.125 -> 68, without 0.5, 0 -> 75: 50 + (50 + 68 - 75) // 2 = 71
    assert dict(b.scores) == {
        "TaintToleration": 100,
        "NodeAffinity": 0,
        "NodeResourcesFit": 56,
        "NodeResourcesBalancedAllocation": 71,
        "ImageLocality": 0,
    }
    assert b.total == 300 + 56 + 71


def test_a_best_effort_pod_skips_balanced_allocation():
    ranking = rank(pod_info(pod(containers=[container()])), [Node("a", {}, allocatable=EMPTY)] * 1)
    assert BALANCED_ALLOCATION in ranking.skipped
    assert BALANCED_ALLOCATION not in ranking.nodes[0].scores


@pytest.mark.parametrize("weight", [1, 3])
def test_the_netqos_scheduler_adds_the_plugins_raw_score_at_its_weight(weight):
    nodes = [
        Node(n, labels, allocatable=EMPTY) for n, labels in (("h", {"net": "high"}), ("u", {}), ("l", {"net": "low"}))
    ]
    view = pod_info(pod(LATENCY_SENSITIVE, containers=[container("1", "1Gi")]))
    plain = rank(view, nodes, None, DEFAULT_PROFILE)
    netqos = rank(view, nodes, None, DEFAULT_PROFILE.with_plugin(NETQOS, weight))
    assert [n.scores[NETQOS] for n in netqos.nodes] == [100, 10, 0]
    assert [q.total - p.total for p, q in zip(plain.nodes, netqos.nodes, strict=True)] == [
        100 * weight,
        10 * weight,
        0,
    ]
    assert NETQOS not in plain.weights and NODE_AFFINITY in plain.weights


def test_pods_that_finished_take_nothing():
    from webhook.scheduler.model import usage_by_node

    spec = {"nodeName": "a", "containers": [container("4")]}
    pods = [pod_info(pod(status={"phase": phase}, **spec)) for phase in ("Succeeded", "Failed", "Running", "")]
    usage = usage_by_node(pods)
    assert usage["a"].pods == 2 and usage["a"].requested["cpu"] == 8000


def test_a_strategy_of_the_profile_changes_the_fit_score():
    nodes = [Node("a", {}, allocatable=EMPTY)]
    usage = {"a": NodeUsage({"cpu": 2000, "memory": 0}, {"cpu": 2000, "memory": 0}, 1)}
    view = pod_info(pod(containers=[container("1", "2Gi")]))
    most = dataclasses.replace(DEFAULT_PROFILE, scoring_strategy=ScoringStrategy("MostAllocated"))
    # cpu 3000 of 4000 -> 75, memory 2Gi of 8Gi -> 25
    assert rank(view, nodes, usage, most).nodes[0].scores["NodeResourcesFit"] == 50
    assert rank(view, nodes, usage).nodes[0].scores["NodeResourcesFit"] == 50  # least: 25 and 75


def test_a_nodes_usage_counts_only_the_running_pods_bound_to_that_node():
    from webhook.scheduler.cycle import filter_reasons
    from webhook.scheduler.model import PodInfo, usage_by_node

    def node_filter_reasons(new: PodInfo, node: Node, pods: list[PodInfo]) -> tuple[str, ...]:
        return filter_reasons(new, node, usage_by_node(pods).get(node.name, NodeUsage()))

    node = Node("a", {}, allocatable={"cpu": 1000, "memory": GI, "pods": 10})
    new = pod_info(pod(containers=[container("600m")]))

    def bound(name: str, node_name: str, phase: str = "Running") -> object:
        spec = {"nodeName": node_name, "containers": [container("500m")]}
        return pod_info({"metadata": {"name": name}, "spec": spec, "status": {"phase": phase}})

    assert node_filter_reasons(new, node, [bound("x", "b"), bound("y", "a", "Succeeded")]) == ()
    assert node_filter_reasons(new, node, [bound("x", "a")]) == ("Insufficient cpu",)


@pytest.mark.parametrize(
    "allocatable, used, pod_request, score",
    [
        # Two nodes of a 41-node cluster where kube-scheduler 1.36 bound the pod to the first: its
        # balance goes from 82 to 95 (50 + (50 + 95 - 82) // 2 = 81); the second's was already 99
        # and ends at 98 (74). The pre-1.36 score (the balance with the pod alone) preferred the second.
        ({CPU: 16000, MEMORY: 8 * GI}, {CPU: 5481, MEMORY: 0}, {CPU: 100, MEMORY: 2 * GI}, 81),
        ({CPU: 16000, MEMORY: 64 * GI}, {CPU: 4762, MEMORY: 19507 * MI}, {CPU: 100, MEMORY: 2 * GI}, 74),
        # an empty node: 100 without the pod, 93 with it
        ({CPU: 4000, MEMORY: 8 * GI}, {CPU: 0, MEMORY: 0}, {CPU: 1000, MEMORY: GI}, 71),
        # a pod that restores the balance of a lopsided node
        ({CPU: 4000, MEMORY: 8 * GI}, {CPU: 2000, MEMORY: 0}, {CPU: 0, MEMORY: 4 * GI}, 87),
    ],
)
def test_balanced_allocation_scores_the_change_in_balance_the_pod_makes(allocatable, used, pod_request, score):
    node = Node("n", {}, allocatable={**allocatable, "pods": 110})
    assert balanced_score(pod_request, node, NodeUsage(used, used, 1), ((CPU, 1), (MEMORY, 1))) == score
