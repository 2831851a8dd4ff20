"""The one builder of Pod manifests for tests, scripts and benchmarks: a Pod as a user writes it
(apiVersion, kind, metadata, spec), holding exactly the fields asked for, so a test states what
its pod has and nothing else is there to change the decision or the score.

`harness.kubeapi.pod` adds what the API server adds (uid, creationTimestamp, status).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.affinity import PREFERRED, REQUIRED

PAUSE = {"name": "app", "image": "registry.k8s.io/pause:3.10"}  # a container with no requests


def pod(
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    *,
    name: str | None = "p",
    namespace: str | None = None,
    containers: Sequence[Mapping[str, Any]] | None = None,
    preferred: Sequence[Any] | None = None,
    required: Sequence[Any] | None = None,
    status: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Pod named `name` (None: no name, e.g. with `meta={"generateName": ...}`). `labels`,
    `annotations`, `namespace` and `containers` appear only when given; `preferred` and `required`
    are node affinity terms (`required`: the nodeSelectorTerms); `status` is the object's status;
    `meta` more metadata fields; any other keyword is a spec field (nodeName, tolerations, ...),
    left out when it is None."""
    metadata: dict[str, Any] = {} if name is None else {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels is not None:
        metadata["labels"] = dict(labels)
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    metadata.update(meta or {})
    body: dict[str, Any] = {}
    if containers is not None:
        body["containers"] = [dict(c) for c in containers]
    body.update((key, value) for key, value in spec.items() if value is not None)
    if preferred is not None or required is not None:  # beside any affinity given in `spec`
        affinity = dict(body.get("affinity") or {})
        node_affinity = dict(affinity.get("nodeAffinity") or {})
        if preferred is not None:
            node_affinity[PREFERRED] = list(preferred)
        if required is not None:
            node_affinity[REQUIRED] = {"nodeSelectorTerms": list(required)}
        affinity["nodeAffinity"] = node_affinity
        body["affinity"] = affinity
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}
    if status is not None:
        out["status"] = dict(status)
    return out
