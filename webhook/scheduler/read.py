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
from webhook.resources import Container, container_from_api, resource_list
from webhook.scheduler.model import DEFAULT_SCHEDULER, Node, PodInfo, Taint, Toleration

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
    containers, init_containers, overhead, pod_level_requests = _resource_fields(spec)
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
        containers=containers,
        init_containers=init_containers,
        overhead=overhead,
        pod_level_requests=pod_level_requests,
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
    containers, init_containers, overhead, pod_level_requests = _resource_fields(apidata.obj(pod, "spec", "spec"))
    return PodInfo(
        name="",
        labels={},
        node_selector={},
        required=None,
        preferred=(),
        tolerations=(),
        containers=containers,
        init_containers=init_containers,
        overhead=overhead,
        pod_level_requests=pod_level_requests,
    )


def _resource_fields(
    spec: Mapping[str, Any],
) -> tuple[tuple[Container, ...], tuple[Container, ...], dict[str, int], dict[str, int]]:
    """What makes a pod's requests: its containers, init containers, overhead and pod-level requests."""
    containers = tuple(
        container_from_api(c, f"spec.containers[{i}]", init=False)
        for i, c in enumerate(apidata.items(spec, "containers", "spec.containers"))
    )
    init_containers = tuple(
        container_from_api(c, f"spec.initContainers[{i}]", init=True)
        for i, c in enumerate(apidata.items(spec, "initContainers", "spec.initContainers"))
    )
    pod_resources = apidata.obj(spec, "resources", "spec.resources")
    return (
        containers,
        init_containers,
        resource_list(spec, "overhead", "spec.overhead"),
        resource_list(pod_resources, "requests", "spec.resources.requests"),
    )


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
    allocatable = resource_list(status, "allocatable", "status.allocatable") if "allocatable" in status else None
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
