"""ImageLocality as kube-scheduler scores it: kube-scheduler's own table (v1.36.3
pkg/scheduler/framework/plugins/imagelocality/image_locality_test.go TestImageLocalityPriority),
then the one size per image name its cache keeps (pkg/scheduler/backend/cache/cache.go
addNodeImageStates): the size of the first node it adds that lists the name, taken as the oldest
(creationTimestamp, then name), over every node of the cluster, whatever size each node reports;
and what explain says when nodes disagree."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import pytest

from harness.pods import pod
from webhook.apidata import ShapeError
from webhook.explain import explain
from webhook.kubeversion import KubeVersion
from webhook.policy_file import default_policy
from webhook.scheduler.cycle import rank
from webhook.scheduler.incremental import World
from webhook.scheduler.model import UNDATED, Node, UsageTally
from webhook.scheduler.plugins.imagelocality import ImageState, image_states
from webhook.scheduler.plugins.netqos import NETQOS_TARGET
from webhook.scheduler.read import node_info, pod_info
from webhook.scheduler.registry import IMAGE_LOCALITY, default_profile

MB = 1024 * 1024  # image_locality_test.go's mb
V136 = default_profile(KubeVersion(1, 36))
T0 = "2026-01-02T10:00:00Z"


def api_node(
    name: str,
    images: Sequence[tuple[list[str], int]] = (),
    created: str | None = None,
    cpu: str = "4",
    memory: str = "8Gi",
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A Node as the API server returns it, with status.images (names, sizeBytes) in order."""
    meta: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/hostname": name}}
    if created is not None:
        meta["creationTimestamp"] = created
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    status = {"allocatable": allocatable, "images": [{"names": n, "sizeBytes": s} for n, s in images]}
    return {"kind": "Node", "metadata": meta, "spec": {"unschedulable": unschedulable}, "status": status}


def containers(*images: str) -> list[dict[str, Any]]:
    return [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]


def image_scores(manifest: dict[str, Any], nodes: list[dict[str, Any]]) -> list[int]:
    ranking = rank(pod_info(manifest), [node_info(n) for n in nodes], profile=V136)
    return [n.scores[IMAGE_LOCALITY] for n in ranking.nodes]


# --- kube-scheduler's own table ----------------------------------------------------------------
# The node statuses and pods of TestImageLocalityPriority, by its names (node403002000: images of
# 40, 300 and 2000 MB); one size per image everywhere, so the cache's one size is each node's.

N403002000 = [
    (["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40 * MB),
    (["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MB),
    (["gcr.io/2000:latest"], 2000 * MB),
]
N25010 = [(["gcr.io/250:latest"], 250 * MB), (["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MB)]
N60040900 = [(["gcr.io/600:latest"], 600 * MB), (["gcr.io/40:latest"], 40 * MB), (["gcr.io/900:latest"], 900 * MB)]
N300600900 = [(["gcr.io/300:latest"], 300 * MB), (["gcr.io/600:latest"], 600 * MB), (["gcr.io/900:latest"], 900 * MB)]
N400030 = [(["gcr.io/4000:latest"], 4000 * MB), (["gcr.io/30:latest"], 30 * MB)]
N203040 = [(["gcr.io/20:latest"], 20 * MB), (["gcr.io/30:latest"], 30 * MB), (["gcr.io/40:latest"], 40 * MB)]
IMAGE_VOLUME = {"volumes": [{"name": "imageVolume", "image": {"reference": "gcr.io/300"}}]}


@pytest.mark.parametrize(
    "spec, statuses, expected",
    [
        pytest.param(
            {"containers": containers("gcr.io/40", "gcr.io/250")},
            [N403002000, N25010],
            [0, 5],
            id="two images spread on two nodes, prefer the larger image one",
        ),
        pytest.param(
            {"containers": containers("gcr.io/40", "gcr.io/300")},
            [N403002000, N25010],
            [7, 0],
            id="two images on one node, prefer this node",
        ),
        pytest.param(
            {"containers": containers("gcr.io/10", "gcr.io/4000")},
            [N400030, N25010],
            [100, 0],
            id="if exceed limit, use limit",
        ),
        pytest.param(
            {"containers": containers("gcr.io/10", "gcr.io/4000")},
            [N400030, N25010, []],
            [66, 0, 0],
            id="if exceed limit, use limit (with node which has no images present)",
        ),
        pytest.param(
            {"containers": containers("gcr.io/300", "gcr.io/600", "gcr.io/900")},
            [N60040900, N300600900, []],
            [32, 36, 0],
            id="pod with multiple large images, node2 is preferred",
        ),
        pytest.param(
            {"containers": containers("gcr.io/30", "gcr.io/40")},
            [N203040, N400030],
            [1, 0],
            id="pod with multiple small images",
        ),
        pytest.param(
            {"containers": containers("gcr.io/30"), **IMAGE_VOLUME},
            [N300600900, N400030],
            [12, 0],
            id="pod with ImageVolume",
        ),
        pytest.param(
            {"containers": containers("gcr.io/30"), "initContainers": [{"name": "i", "image": "gcr.io/300"}]},
            [N403002000, N203040],
            [6, 0],
            id="include InitContainers: two images spread on two nodes, prefer the larger image one",
        ),
    ],
)
def test_kube_schedulers_own_table(spec, statuses, expected):
    nodes = [api_node(f"node{i}", images) for i, images in enumerate(statuses, start=1)]
    assert image_scores(pod(**spec), nodes) == expected


# --- one size per image name: the first node's the cache adds ----------------------------------

APP = "registry.example/app:1"


def at(seconds: int) -> str:
    return f"2026-01-02T10:00:{seconds:02}Z"


@pytest.mark.parametrize(
    "nodes, expected",
    [
        # the oldest node's size, though its name sorts after the other's
        ([("a", at(5), 900), ("b", at(0), 100)], ImageState(100 * MB, 2)),
        # created within one second: the cache's initial list, by name
        ([("a", at(0), 900), ("b", at(0), 100)], ImageState(900 * MB, 2)),
        # a node without creationTimestamp (a test's, a hand-written file's) comes first, by name
        ([("b", at(0), 100), ("c", None, 300), ("d", None, 500)], ImageState(300 * MB, 3)),
        # a node without the image counts for nothing, however old
        ([("a", at(0), None), ("b", at(5), 100)], ImageState(100 * MB, 1)),
    ],
)
def test_the_cache_keeps_the_size_of_the_oldest_node_listing_the_image(nodes, expected):
    read = [node_info(api_node(n, [([APP], s * MB)] if s else [], created=c)) for n, c, s in nodes]
    assert image_states([APP, "other:1"], read) == {APP: expected}


def test_no_state_for_an_image_no_node_lists():
    assert image_states([APP], [node_info(api_node("a", [(["other:1"], 100 * MB)]))]) == {}


# The nodes of tests/e2e/test_image_sizes.py: img-b holds the image at 100 MB, img-a at 900 MB,
# img-c none but has twice the CPU and memory.
def e2e_nodes(b: str, a: str, unschedulable_b: bool = False) -> list[dict[str, Any]]:
    return [
        api_node("img-a", [([APP], 900 * MB)], a),
        api_node("img-b", [([APP], 100 * MB)], b, unschedulable=unschedulable_b),
        api_node("img-c", [], at(9), cpu="8", memory="16Gi"),
    ]


PROBE = pod(containers=[{"name": "app", "image": APP, "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}])


@pytest.mark.parametrize(
    "nodes, image, predicted",
    [
        # img-b first: 100 MB x 2/3 of the nodes on both holders, 4; img-c leads by Fit and Balanced
        (e2e_nodes(b=at(0), a=at(5)), {"img-a": 4, "img-b": 4, "img-c": 0}, ("img-c",)),
        # img-a first: 900 MB x 2/3 = 600 MB on both holders, 59; they tie ahead of img-c
        (e2e_nodes(b=at(5), a=at(0)), {"img-a": 59, "img-b": 59, "img-c": 0}, ("img-a", "img-b")),
        # one second: img-a by name
        (e2e_nodes(b=at(0), a=at(0)), {"img-a": 59, "img-b": 59, "img-c": 0}, ("img-a", "img-b")),
    ],
)
def test_every_node_holding_the_image_scores_by_the_size_the_cache_keeps(nodes, image, predicted):
    ranking = rank(pod_info(PROBE), [node_info(n) for n in nodes], profile=V136)
    assert {n.name: n.scores[IMAGE_LOCALITY] for n in ranking.nodes} == image
    assert ranking.predicted == predicted


def test_the_size_kept_is_the_oldest_nodes_even_when_that_node_is_infeasible():
    # img-b (100 MB, oldest) is unschedulable: img-a is still scored by 100 MB x 2/3, 4, not 59
    nodes = [node_info(n) for n in e2e_nodes(b=at(0), a=at(5), unschedulable_b=True)]
    ranking = rank(pod_info(PROBE), nodes, profile=V136)
    assert {n.name: n.scores.get(IMAGE_LOCALITY) for n in ranking.nodes} == {"img-a": 4, "img-b": None, "img-c": 0}


def test_rebalances_what_if_placement_scores_the_size_the_cache_keeps_too():
    nodes = [node_info(n) for n in e2e_nodes(b=at(0), a=at(5))]
    world = World(nodes, {n.name: UsageTally() for n in nodes}, V136, NETQOS_TARGET)
    other = pod(containers=[{"name": "app", "image": "other:1", "resources": {"requests": {"cpu": "1"}}}])
    for manifest in (PROBE, other, PROBE):  # the static scores of one image list are shared
        view = pod_info(manifest)
        assert world.predictor(view).predicted() == sorted(rank(view, world.nodes, profile=V136).predicted)
    assert world.predictor(pod_info(PROBE)).predicted() == ["img-c"]


# --- reading the nodes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "created, expected",
    [
        (T0, dt.datetime(2026, 1, 2, 10, tzinfo=dt.UTC)),
        ("2026-01-02T11:00:00+01:00", dt.datetime(2026, 1, 2, 10, tzinfo=dt.UTC)),
        (None, UNDATED),
        ("", UNDATED),
    ],
)
def test_a_node_is_dated_by_its_creation_timestamp(created, expected):
    assert node_info(api_node("a", created=created)).created == expected


@pytest.mark.parametrize("created", ["yesterday", "2026-01-02T10:00:00", "2026-01-02"])
def test_a_creation_timestamp_that_is_not_rfc3339_is_refused(created):
    with pytest.raises(ShapeError, match="metadata.creationTimestamp must be an RFC 3339 time"):
        node_info(api_node("a", created=created))


def test_a_name_listed_twice_on_a_node_keeps_its_first_entrys_size():
    read = node_info(api_node("a", [([APP], 100 * MB), (["other:1", APP], 900 * MB)]))
    assert read.images == {APP: 100 * MB, "other:1": 900 * MB}


def test_a_node_built_without_a_date_sorts_first():
    assert Node("n", {}).created == UNDATED


# --- explain -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "nodes, sizes",
    [
        # img-b's 100 MB kept; img-a's 900 MB would make the holders win: the size decides
        (
            e2e_nodes(b=at(0), a=at(5)),
            [(APP, 100 * MB, "img-b", [(100 * MB, ["img-b"]), (900 * MB, ["img-a"])], True)],
        ),
        # img-a's 900 MB kept; 100 MB would hand img-c the pod
        (
            e2e_nodes(b=at(5), a=at(0)),
            [(APP, 900 * MB, "img-a", [(900 * MB, ["img-a"]), (100 * MB, ["img-b"])], True)],
        ),
        # one size everywhere: nothing to say
        ([api_node("img-a", [([APP], 100 * MB)], at(0)), api_node("img-b", [([APP], 100 * MB)], at(5))], []),
    ],
)
def test_explain_names_the_size_it_takes_when_nodes_disagree(nodes, sizes):
    report = explain(default_policy(), PROBE, [node_info(n) for n in nodes])
    found = [(s.image, s.size, s.node, [(z, list(n)) for z, n in s.reported], s.decides) for s in report.image_sizes]
    assert found == sizes
    noted = [n for n in report.notes if "at different sizes" in n]
    assert len(noted) == len(sizes)
    for (_, size, node, _, decides), note in zip(sizes, noted, strict=True):
        assert f"taken as {node}'s {size // MB} MiB, the oldest such node" in note
        assert ("the prediction turns on it" in note) == decides


def test_explain_says_the_size_does_not_decide_when_no_other_size_changes_the_prediction():
    # img-c holds the image too, at 300 MB: every node holds it, whichever size is kept
    nodes = [
        api_node("img-a", [([APP], 900 * MB)], at(5)),
        api_node("img-b", [([APP], 100 * MB)], at(0)),
        api_node("img-c", [([APP], 300 * MB)], at(9), cpu="8", memory="16Gi"),
    ]
    report = explain(default_policy(), PROBE, [node_info(n) for n in nodes])
    assert [(s.node, s.decides) for s in report.image_sizes] == [("img-b", False)]
    assert report.ranking.predicted == ("img-c",)
