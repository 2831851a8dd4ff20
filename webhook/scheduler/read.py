"""API objects (decoded JSON) read into the scheduler's model: `pod_info`, `usage_info` (what a
pod takes of its node, only), `node_info`. ShapeError names a bad field; paths are relative to
the object, callers prefix the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook import apidata
from webhook.affinity import PREFERRED, PreferredTerm, node_affinity_from_api
from webhook.apidata import STRING_IN_YAML, ShapeError, expect
from webhook.resources import pod_resources, resource_list
from webhook.scheduler.model import DEFAULT_SCHEDULER, Node, PodInfo, Taint, Toleration, normalized_image_name

# Volume kinds that never filter a node (the volume plugins look at the others: claims, cloud disks).
LOCAL_VOLUME_KINDS = frozenset({"name", "configMap", "secret", "emptyDir", "downwardAPI", "projected"})


def pod_info(pod: Any) -> PodInfo:
    """The scheduling view of a Pod object (API JSON data); ShapeError names a bad field."""
    expect(pod, dict, "(pod)", "a Pod object")
    meta = apidata.obj(pod, "metadata", "metadata")
    spec = apidata.obj(pod, "spec", "spec")
    base = "spec.affinity.nodeAffinity"
    affinity = apidata.obj(spec, "affinity", "spec.affinity")
    required, preferred = node_affinity_from_api(apidata.obj(affinity, "nodeAffinity", base), base)
    preferred = tuple(_checked_weight(t, f"{base}.{PREFERRED}[{i}].weight") for i, t in enumerate(preferred))
    tolerations = tuple(
        _toleration(t, f"spec.tolerations[{i}]")
        for i, t in enumerate(apidata.items(spec, "tolerations", "spec.tolerations"))
    )
    images, containers = _images_of(spec)
    owners = apidata.items(meta, "ownerReferences", "metadata.ownerReferences")
    status = apidata.obj(pod, "status", "status")
    return PodInfo(
        name=apidata.text(meta, "name", "metadata.name") or apidata.text(meta, "generateName", "metadata.generateName"),
        labels=apidata.string_map(meta, "labels", "metadata.labels", STRING_IN_YAML),
        node_selector=apidata.string_map(spec, "nodeSelector", "spec.nodeSelector", STRING_IN_YAML),
        required=required,
        preferred=preferred,
        tolerations=tolerations,
        node_name=apidata.text(spec, "nodeName", "spec.nodeName"),
        namespace=apidata.text(meta, "namespace", "metadata.namespace") or "default",
        resources=pod_resources(pod),
        images=images,
        containers=containers,
        scheduler_name=apidata.text(spec, "schedulerName", "spec.schedulerName") or DEFAULT_SCHEDULER,
        phase=apidata.text(status, "phase", "status.phase"),
        owner_kinds=tuple(
            apidata.text(expect(o, dict, f"metadata.ownerReferences[{i}]", "an object"), "kind", "kind")
            for i, o in enumerate(owners)
        ),
        uses=_uses(spec, affinity),
    )


def _uses(spec: Mapping[str, Any], affinity: Mapping[str, Any]) -> frozenset[str]:
    """Which not-evaluated plugins this pod's own fields call on."""
    uses = set()
    if affinity.get("podAffinity") or affinity.get("podAntiAffinity"):
        uses.add("InterPodAffinity")
    if spec.get("topologySpreadConstraints"):
        uses.add("PodTopologySpread")
    volumes = spec.get("volumes")
    kinds = {k for v in volumes if isinstance(v, dict) for k in v} if isinstance(volumes, list) else set()
    if kinds - LOCAL_VOLUME_KINDS:
        uses.add("volumes")
    if spec.get("resourceClaims"):
        uses.add("DynamicResources")
    return frozenset(uses)


def usage_info(pod: Any) -> PodInfo:
    """A pod as what it takes of its node (its requests and host ports: what `UsageTally.add`
    reads), reading only the fields that make them; ShapeError names a bad field."""
    expect(pod, dict, "(pod)", "a Pod object")
    return PodInfo(
        name="", labels={}, node_selector={}, required=None, preferred=(), tolerations=(), resources=pod_resources(pod)
    )


def _images_of(spec: Mapping[str, Any]) -> tuple[tuple[str, ...], int]:
    """ImageLocality's images (init containers', containers', image volumes' references,
    normalised) and how many containers scale its score (image_locality.go sumImageScores,
    calculatePriority: image volumes count in the sum, not in the scale)."""
    images = []
    for key in ("initContainers", "containers"):
        for i, container in enumerate(apidata.items(spec, key, f"spec.{key}")):
            expect(container, dict, f"spec.{key}[{i}]", "an object")
            images.append(normalized_image_name(apidata.text(container, "image", f"spec.{key}[{i}].image")))
    containers = len(images)
    for i, volume in enumerate(apidata.items(spec, "volumes", "spec.volumes")):
        expect(volume, dict, f"spec.volumes[{i}]", "an object")
        if volume.get("image") is not None:
            image = apidata.obj(volume, "image", f"spec.volumes[{i}].image")
            images.append(normalized_image_name(apidata.text(image, "reference", f"spec.volumes[{i}].image.reference")))
    return tuple(images), containers


def node_info(node: Any) -> Node:
    """A Node object (API JSON data) as scheduling reads it; ShapeError names a bad field."""
    expect(node, dict, "(node)", "a Node object")
    meta = apidata.obj(node, "metadata", "metadata")
    name = apidata.text(meta, "name", "metadata.name")
    if not name:
        raise ShapeError("metadata.name", "a non-empty string", meta.get("name"))
    spec = apidata.obj(node, "spec", "spec")
    taints = tuple(_taint(t, f"spec.taints[{i}]") for i, t in enumerate(apidata.items(spec, "taints", "spec.taints")))
    unschedulable = spec.get("unschedulable")
    if unschedulable is not None:
        expect(unschedulable, bool, "spec.unschedulable", "a boolean")
    status = apidata.obj(node, "status", "status")
    # Missing or empty, nothing is allocatable: NodeInfo's Allocatable is zero and no pod fits.
    allocatable = resource_list(status, "allocatable", "status.allocatable")
    return Node(
        name,
        apidata.string_map(meta, "labels", "metadata.labels", STRING_IN_YAML),
        taints,
        bool(unschedulable),
        allocatable,
        _images(status),
    )


def _images(status: Mapping[str, Any]) -> dict[str, int]:
    images: dict[str, int] = {}
    for i, image in enumerate(apidata.items(status, "images", "status.images")):
        path = f"status.images[{i}]"
        expect(image, dict, path, "an object")
        size = apidata.integer(image, "sizeBytes", f"{path}.sizeBytes")
        for j, name in enumerate(apidata.items(image, "names", f"{path}.names")):
            images[expect(name, str, f"{path}.names[{j}]", "a string")] = size
    return images


def _checked_weight(term: PreferredTerm, path: str) -> PreferredTerm:
    # The API server refuses other weights; the scheduler's normalisation assumes them.
    if not 1 <= term.weight <= 100:
        raise ShapeError(path, "an integer from 1 to 100 (the API server rejects other weights)", term.weight)
    return term


def _toleration(raw: Any, path: str) -> Toleration:
    expect(raw, dict, path, "an object")
    return Toleration(*(apidata.text(raw, f, f"{path}.{f}") for f in ("key", "operator", "value", "effect")))


def _taint(raw: Any, path: str) -> Taint:
    expect(raw, dict, path, "an object")
    return Taint(*(apidata.text(raw, f, f"{path}.{f}") for f in ("key", "value", "effect")))
