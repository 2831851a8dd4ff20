"""ImageLocality: the sizes of the pod's images a node already holds, each the size the scheduler's
cache keeps for it scaled by the share of nodes that have it, clamped to 23 MB-1000 MB per
container, to 0-100. How image volumes count differs per release (`_image_state`).

Sources: kubernetes/kubernetes pkg/scheduler/framework/plugins/imagelocality/image_locality.go
(v1.34.4, v1.35.4, v1.36.3, v1.37.2), v1.36.3 pkg/scheduler/backend/cache/cache.go
(addNodeImageStates).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.names import MAX_NODE_SCORE
from webhook.scheduler.framework import Reads, ScorePlugin
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Profile, Snapshot, cache_order

NAME = "ImageLocality"
# The variants older releases run (`registry.VERSION_VARIANTS`), by the name of their table entry.
UNCOUNTED_VOLUMES = "ImageLocality (1.36)"  # image volumes in the sum, not the scale
NO_VOLUMES = "ImageLocality (before 1.36)"  # containers' images only
# ImageLocality's thresholds (image_locality.go).
_MB = 1024 * 1024
IMAGE_MIN_THRESHOLD = 23 * _MB
IMAGE_MAX_CONTAINER_THRESHOLD = 1000 * _MB


@dataclass(frozen=True)
class ImageState:
    """fwk.ImageStateSummary as ImageLocality reads it: the one size the scheduler's cache keeps
    for an image name, and how many nodes list the name (NumNodes)."""

    size: int
    nodes: int


def image_states(images: Iterable[str], nodes: Iterable[Node]) -> dict[str, ImageState]:
    """The cache's summary of each of `images` that a node lists, over `nodes`: every node of the
    cluster, not only the feasible ones (the cache holds them all, and Score divides by them all).

    kube-scheduler keeps ONE size per image name (v1.36.3 pkg/scheduler/backend/cache/cache.go
    addNodeImageStates): the first node the cache adds that lists the name creates its summary
    with that entry's sizeBytes; later nodes only join its node set, whatever size they report,
    and the summary stays until no node lists the name (removeNodeImageStates). ImageLocality
    scores every node that holds the image by that size (framework/plugins/imagelocality/
    image_locality.go sumImageScores, scaledImageScore). The first node is taken to be the oldest
    (`model.cache_order`), the informer's order being unknown here."""
    wanted = frozenset(images)
    first: dict[str, Node] = {}
    count: Counter[str] = Counter()
    for node in nodes:
        for name in wanted:
            if name not in node.images:
                continue
            count[name] += 1
            held = first.get(name)
            if held is None or cache_order(node) < cache_order(held):
                first[name] = node
    return {name: ImageState(node.images[name], count[name]) for name, node in first.items()}


def image_locality(
    images: Sequence[str], node: Node, states: Mapping[str, ImageState], total_nodes: int, containers: int
) -> int:
    """image_locality.go: the sizes of the pod's images already on the node (its containers' and
    its image volumes'), each the size the cache keeps for it (`image_states`) scaled by the share
    of nodes that have it, clamped between 23 MB and 1000 MB per container (image volumes add no
    room), to 0-100."""
    total = sum(int(states[i].size * (states[i].nodes / total_nodes)) for i in images if i in node.images)
    max_threshold = IMAGE_MAX_CONTAINER_THRESHOLD * containers
    if max_threshold <= IMAGE_MIN_THRESHOLD:  # no containers: Go divides by a negative range
        return 0
    clamped = min(max(total, IMAGE_MIN_THRESHOLD), max_threshold)
    return MAX_NODE_SCORE * (clamped - IMAGE_MIN_THRESHOLD) // (max_threshold - IMAGE_MIN_THRESHOLD)


@dataclass(frozen=True)
class _Images:
    images: tuple[str, ...]
    # image name -> the cache's summary over every node of the snapshot: the one size it keeps
    # for the name and how many nodes have it (`image_states`)
    states: Mapping[str, ImageState]
    total: int
    containers: int  # the score's scale: how many images each may bring up to 1000 MB


def _image_state(sums_volumes: bool, counts_volumes: bool) -> Callable[[PodInfo, Snapshot, Profile], _Images]:
    """ImageLocality's PreScore state as a release computes it (image_locality.go sumImageScores
    and calculatePriority at each tag): v1.37.2 sums the image volumes' sizes with the containers'
    and counts each volume in the scale; v1.36.3 sums them but scales by the containers alone;
    v1.34.4 and v1.35.4 read the containers' images only (`pod.images` lists them first).
    Each image is scored by the one size the scheduler's cache keeps for its name, summarised
    over every node of the snapshot (`snapshot.nodes`, not the feasible ones): the state depends
    on the pod's images and on those nodes alone, so `_images_key` shares it within one snapshot."""

    def prepare(pod: PodInfo, snapshot: Snapshot, profile: Profile) -> _Images:
        images = pod.images if sums_volumes else pod.images[: pod.containers]
        scale = len(pod.images) if counts_volumes else pod.containers
        return _Images(images, image_states(images, snapshot.nodes), len(snapshot.nodes), scale)

    return prepare


def _images_key(pod: PodInfo, profile: Profile) -> Hashable:
    return pod.images, pod.containers


def _image_score(state: Any, node: Node, usage: NodeUsage) -> int:
    if not state.states:
        return 0  # no node has one of its images: every node scores 0
    return image_locality(state.images, node, state.states, state.total, state.containers)


SCORE = ScorePlugin(NAME, _image_state(True, True), _image_score, None, Reads.NODE, _images_key)
SCORE_UNCOUNTED_VOLUMES = ScorePlugin(NAME, _image_state(True, False), _image_score, None, Reads.NODE, _images_key)
SCORE_NO_VOLUMES = ScorePlugin(NAME, _image_state(False, False), _image_score, None, Reads.NODE, _images_key)
