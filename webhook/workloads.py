"""From a workload to the Pod its controller would create, and back: pure, plain JSON data.

The webhook only ever sees Pods; people keep Deployments, StatefulSets, Jobs... in git. `pod_of`
turns a workload's pod template into the Pod the controller would send to the API server, so
`review` puts it through the `/mutate` path unchanged; `with_pod` writes the mutated Pod's
annotations and spec back into the template, for looking at.

The Pod gets what the webhook may read: the template's labels, annotations and spec, the
workload's namespace, a `generateName` (`name` for a StatefulSet's first replica) and an owner
reference to the controller that creates it, plus the labels the controller adds whose values
are known before it runs (`job-name`, `statefulset.kubernetes.io/pod-name`...). Values decided at
run time are left out: uids, `pod-template-hash` and `controller-revision-hash` (so a
Deployment's Pod is owned by a ReplicaSet named after the Deployment, without the hash suffix).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from webhook.apidata import show


@dataclass(frozen=True)
class Kind:
    """Where a pod-bearing kind keeps its template and who owns the Pods it makes."""

    group: str
    kind: str
    template: tuple[str, ...]  # path to the PodTemplateSpec
    owner_api_version: str  # the controller that creates the Pods
    owner_kind: str


KINDS = (
    Kind("apps", "Deployment", ("spec", "template"), "apps/v1", "ReplicaSet"),
    Kind("apps", "StatefulSet", ("spec", "template"), "apps/v1", "StatefulSet"),
    Kind("apps", "DaemonSet", ("spec", "template"), "apps/v1", "DaemonSet"),
    Kind("apps", "ReplicaSet", ("spec", "template"), "apps/v1", "ReplicaSet"),
    Kind("", "ReplicationController", ("spec", "template"), "v1", "ReplicationController"),
    Kind("batch", "Job", ("spec", "template"), "batch/v1", "Job"),
    Kind("batch", "CronJob", ("spec", "jobTemplate", "spec", "template"), "batch/v1", "Job"),
    Kind("", "PodTemplate", ("template",), "v1", ""),  # no controller: a template on its own
)
KIND_NAMES = tuple(k.kind for k in KINDS)


class NotAWorkload(ValueError):
    """The object is a pod-bearing kind but has no usable pod template; the message says where."""


def kind_of(obj: Any) -> Kind | None:
    """The pod-bearing kind of `obj`, by API group and kind; None for anything else."""
    if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
        return None
    api_version = obj.get("apiVersion")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else None
    return next((k for k in KINDS if k.kind == obj["kind"] and k.group == group), None)


def pod_of(workload: dict[str, Any], kind: Kind) -> dict[str, Any]:
    """The Pod the workload's controller would create, as the API server would receive it."""
    template = _template(workload, kind)
    meta = _mapping(workload.get("metadata"))
    name = _text(meta.get("name"))
    pod_meta = copy.deepcopy(_mapping(template.get("metadata")))
    pod_meta.pop("name", None)
    if kind.kind == "StatefulSet":
        pod_meta["name"] = f"{name}-0"
    else:
        pod_meta["generateName"] = f"{name}-"
    if _text(meta.get("namespace")):
        pod_meta["namespace"] = meta["namespace"]
    labels = _controller_labels(kind, name)
    if labels:
        pod_meta["labels"] = {**_mapping(pod_meta.get("labels")), **labels}
    if kind.owner_kind:
        owner = {
            "apiVersion": kind.owner_api_version,
            "kind": kind.owner_kind,
            "name": name,
            "controller": True,
            "blockOwnerDeletion": True,
        }
        pod_meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": copy.deepcopy(template.get("spec"))}


def with_pod(workload: dict[str, Any], kind: Kind, pod: dict[str, Any]) -> dict[str, Any]:
    """`workload` with the template's annotations and spec taken from `pod` (mutated from it)."""
    out = copy.deepcopy(workload)
    template = _template(out, kind)
    annotations = _mapping(pod.get("metadata")).get("annotations")
    if annotations is not None:
        template.setdefault("metadata", {})["annotations"] = copy.deepcopy(annotations)
    template["spec"] = copy.deepcopy(pod.get("spec"))
    return out


def _template(workload: dict[str, Any], kind: Kind) -> dict[str, Any]:
    node: Any = workload
    for depth, key in enumerate(kind.template):
        present = isinstance(node, dict) and key in node
        node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            where = ".".join(kind.template[: depth + 1])
            got = f"got {show(node)}" if present else "it is missing"
            raise NotAWorkload(f"{where} must be an object (the pod template); {got}")
    return _mapping(node)


def _controller_labels(kind: Kind, name: str) -> dict[str, str]:
    if kind.kind == "Job":
        return {"batch.kubernetes.io/job-name": name, "job-name": name}
    if kind.kind == "StatefulSet":
        return {"apps.kubernetes.io/pod-index": "0", "statefulset.kubernetes.io/pod-name": f"{name}-0"}
    return {}


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
