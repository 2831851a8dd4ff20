"""Keys that let pods of one template share work, and the one cap on how many are remembered.

A cluster has many pods and few pod templates: what a pod takes of its node, the filters' verdict
and the plugins' scores depend on a few of its fields, so callers compute them once per key.
Two kinds of key:
- on the pod's API object (`spec_key` and its uses): taken before the pod is read, so the reading
  too is shared; containers go in reduced to the fields that matter;
- on the scheduler's view (`node_filter_key`, `filter_key`, `scheduling_key`): built from the
  plugin tables' own `key`s, so a plugin added to the table is keyed without another edit here.
`Memo` remembers at most `TEMPLATES` keys; past that it computes again instead of growing.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Generic, TypeVar

import orjson

from webhook import apidata
from webhook.affinity import REQUIRED
from webhook.apidata import MAPPING
from webhook.resources import RESIZE_PENDING
from webhook.scheduler import read, registry
from webhook.scheduler.model import NodeUsage, PodInfo, Profile, UsageTally

TEMPLATES = 4096  # distinct pod specs any cache of the scheduler wing remembers

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# What a pod takes of its node (`read.usage_info`): per container its name (its status is found by
# it), resources, ports and restart policy (a sidecar's requests add up), the overhead, the
# pod-level resources and hostNetwork (container ports bound on the node); and from the status, what
# an in-place resize counts (`resize_status`).
USAGE_CONTAINER_FIELDS = ("name", "resources", "ports", "restartPolicy")
USAGE_SPEC_FIELDS = ("overhead", "resources", "hostNetwork")
RESIZE_STATUS_FIELDS = ("name", "resources", "allocatedResources")


def spec_key(
    spec: Mapping[str, Any], fields: Iterable[str], container_fields: Iterable[str] | None = None, *extra: Any
) -> bytes:
    """The key of a pod spec's `fields` (and `extra` values), with its containers and init
    containers reduced to `container_fields` (None: left out). Keys compare as the JSON does,
    object keys sorted; a field of the wrong shape goes in as it is (the reader refuses it)."""
    parts: list[Any] = list(extra)
    if container_fields is not None:
        wanted = tuple(container_fields)
        parts += [_containers(spec.get(key), wanted) for key in ("containers", "initContainers")]
    parts += [spec.get(f) for f in fields]
    return orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)


def _containers(containers: Any, fields: tuple[str, ...]) -> Any:
    if not isinstance(containers, list):
        return containers
    return [[c.get(f) for f in fields] if isinstance(c, MAPPING) else c for c in containers]


def usage_template_key(pod: Mapping[str, Any]) -> bytes:
    """The fields of a pod but its labels that make what it takes of its node and what other pods'
    plugins see of it (`read.usage_info`): its spec's resources and ports and its status's resize
    fields, its namespace, whether it is terminating, and its pod (anti)affinity. The labels are
    left out: the pods of a StatefulSet each carry their own (`statefulset.kubernetes.io/pod-name`,
    `apps.kubernetes.io/pod-index`), so a key holding them would never be shared (`UsageViews`)."""
    meta, spec = pod.get("metadata"), pod.get("spec")
    meta = meta if isinstance(meta, MAPPING) else {}
    spec = spec if isinstance(spec, MAPPING) else {}
    affinity = spec.get("affinity")
    terms = [affinity.get(k) for k in ("podAffinity", "podAntiAffinity")] if isinstance(affinity, MAPPING) else affinity
    return spec_key(
        spec,
        USAGE_SPEC_FIELDS,
        USAGE_CONTAINER_FIELDS,
        resize_status(pod.get("status")),
        meta.get("namespace"),
        meta.get("deletionTimestamp") is not None,
        terms,
    )


def usage_key(pod: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """`usage_template_key` and the labels: the whole of what `read.usage_info` reads."""
    meta = pod.get("metadata")
    labels = meta.get("labels") if isinstance(meta, MAPPING) else None
    return usage_template_key(pod), orjson.dumps(labels, option=orjson.OPT_SORT_KEYS)


def resize_status(status: Any) -> Any:
    """What `resources.pod_resources` reads of a pod's status: each container status's name,
    resources and allocatedResources, the pod's, and the PodResizePending conditions."""
    if not isinstance(status, MAPPING):
        return status
    containers = [_containers(status.get(key), RESIZE_STATUS_FIELDS) for key in RESIZE_STATUS_LISTS]
    conditions = status.get("conditions")
    if isinstance(conditions, list):
        conditions = [c for c in conditions if not isinstance(c, MAPPING) or c.get("type") == RESIZE_PENDING]
    return [containers, status.get("resources"), status.get("allocatedResources"), conditions]


RESIZE_STATUS_LISTS = ("containerStatuses", "initContainerStatuses")


def pod_filter_key(pod: Mapping[str, Any]) -> bytes:
    """The pod fields PreFilter and Filter read (`cycle.filter_reasons`): node selector,
    required node affinity, tolerations; the requests of containers, init containers, overhead and
    pod-level resources; host ports; the node features the pod needs declared. Containers go in
    whole but for their volume mounts, a superset of what is read, so the key cannot go stale when
    the filters read another container field, and pods of one template still share it on a real
    API server, which mounts each pod's service account token from a volume of its own random name
    (kube-api-access-xxxxx); of a mount, only NodeDeclaredFeatures reads whether it has
    bindMountOptions, which the features needed hold. spec.nodeName is left out: the pod is judged
    as if unbound."""
    spec = pod.get("spec") or {}
    if not isinstance(spec, MAPPING):
        return orjson.dumps([spec])
    affinity = spec.get("affinity") or {}
    node_affinity = (affinity.get("nodeAffinity") if isinstance(affinity, MAPPING) else affinity) or {}
    required = node_affinity.get(REQUIRED) if isinstance(node_affinity, MAPPING) else node_affinity
    fields = ("nodeSelector", "tolerations", "overhead", "resources", "hostNetwork")
    containers = [_unmounted(spec.get(key)) for key in ("containers", "initContainers")]
    # what NodeDeclaredFeatures reads, mounts and ephemeral containers included: the features needed
    features = sorted(read.declared_features_needed(spec))
    return spec_key(spec, fields, None, required, resize_status(pod.get("status")), features, *containers)


def _unmounted(containers: Any) -> Any:
    if not isinstance(containers, list):
        return containers  # the reader refuses it; the key need only be a key
    return [{k: v for k, v in c.items() if k != "volumeMounts"} if isinstance(c, MAPPING) else c for c in containers]


def node_filter_key(pod: PodInfo, profile: Profile = registry.DEFAULT_PROFILE) -> Hashable:
    """What the PreFilters that narrow the nodes and the Filter plugins that read the node alone
    read of the pod, each by its table entry: profiles that run other plugins key apart."""
    prefilters = tuple((p.entry, p.key(pod)) for p in registry.node_name_prefilters(profile))
    return prefilters, tuple((p.entry, p.key(pod)) for p in registry.node_filters(profile))


def filter_key(pod: PodInfo, profile: Profile = registry.DEFAULT_PROFILE) -> Hashable:
    """What PreFilter and every Filter plugin that needs no snapshot read of the pod."""
    usage = tuple(p.key(pod) for p in registry.usage_filters(profile))
    return node_filter_key(pod, profile), usage, tuple(p.key(pod) for p in registry.late_node_filters(profile))


def scheduling_key(
    pod: PodInfo, profile: Profile = registry.DEFAULT_PROFILE, label_keys: frozenset[str] | None = None
) -> Hashable:
    """What the whole cycle reads of the pod (filters and the profile's scores), and which
    plugins it uses that are not evaluated: pods with one key are ranked alike. When a plugin
    lets other pods' selectors read the pod's labels (InterPodAffinity), its labels count too:
    those of `label_keys` only, when the caller knows every key those selectors read."""
    cluster = tuple(p.key(pod) for p in registry.cluster_filters(profile))
    scored = tuple((p.name, p.key(pod, profile)) for p, _ in registry.score_plugins(profile))
    labels: tuple[tuple[str, str], ...] = ()
    if registry.reads_labels(profile):
        labels = tuple(sorted((k, v) for k, v in pod.labels.items() if label_keys is None or k in label_keys))
    return filter_key(pod, profile), cluster, scored, pod.uses, labels


class Memo(Generic[K, V]):
    """Values by key, remembered for at most `cap` keys: past it, values are computed each time
    (a cluster of more templates costs time, never memory)."""

    def __init__(self, cap: int = TEMPLATES) -> None:
        self.cap = cap
        self._values: dict[K, V] = {}

    def get(self, key: K, compute: Callable[[], V]) -> V:
        found = self._values.get(key)
        if found is None:
            found = compute()
            if len(self._values) < self.cap:
                self._values[key] = found
        return found

    def __len__(self) -> int:
        return len(self._values)


class UsageViews:
    """Pods as the pods scheduled after them see them (`read.usage_info`), each template read once.

    Two levels, each at most `TEMPLATES` keys: the whole view by `usage_key`, shared as one object
    by the pods of a Deployment's ReplicaSet (their labels are alike); and under it the view of a
    template by `usage_template_key`, labels left out, so the pods of a StatefulSet, whose labels
    differ pod by pod, read only their labels and share the rest: the resources (every container's
    quantities parsed), the ports and the pod (anti)affinity terms."""

    def __init__(self) -> None:
        self._views: Memo[tuple[bytes, bytes], PodInfo] = Memo()
        self._templates: Memo[bytes, PodInfo] = Memo()

    def get(self, pod: Mapping[str, Any]) -> PodInfo:
        """`read.usage_info(pod)`, shared; ShapeError names a field of the wrong shape."""
        template, labels = usage_key(pod)
        return self._views.get((template, labels), lambda: self._read(pod, template))

    def _read(self, pod: Mapping[str, Any], template: bytes) -> PodInfo:
        """The pod's view: its labels on the template's, or, the first of its template, read whole."""
        whole: list[PodInfo] = []

        def first() -> PodInfo:
            whole.append(read.usage_info(pod))
            return whole[0]

        found = self._templates.get(template, first)
        return found if whole else read.usage_info(pod, found)


class UsageFold:
    """Each node's usage (NodeInfo.Requested, UsedPorts, and what other pods' plugins read of its
    pods) by the pods bound to it and not finished, folded from API pods one at a time: memory
    holds one tally per node, never the pods. What a pod takes depends only on the fields
    `usage_key` names, so the pods of one template are read once (`UsageViews`: a StatefulSet's
    pods read their labels alone) and a pod costs a key and a tally update.

    `nodes`: only these nodes' pods count (None: every node's). `leave_out`: (namespace, name) of
    a pod not to count, the one being scheduled as if anew."""

    def __init__(self, nodes: Iterable[str] | None = None, leave_out: tuple[str, str] | None = None) -> None:
        self._only = frozenset(nodes) if nodes is not None else None
        self._tallies: dict[str, UsageTally] = {name: UsageTally() for name in self._only or ()}
        self._views = UsageViews()
        self._leave_out = leave_out

    def add(self, pod: Mapping[str, Any]) -> None:
        """Count `pod` in on its node, unless it is bound to none, finished, or left out.
        ShapeError names a field of the wrong shape."""
        spec, status = apidata.obj(pod, "spec", "spec"), apidata.obj(pod, "status", "status")
        node = apidata.text(spec, "nodeName", "spec.nodeName")
        if not node or apidata.text(status, "phase", "status.phase") in ("Succeeded", "Failed"):
            return
        if self._only is not None and node not in self._only:
            return
        if self._leave_out is not None:
            meta = apidata.obj(pod, "metadata", "metadata")
            name = apidata.text(meta, "name", "metadata.name") or apidata.text(meta, "generateName", "")
            if (apidata.text(meta, "namespace", "metadata.namespace") or "default", name) == self._leave_out:
                return
        view = self._views.get(pod)
        tally = self._tallies.get(node)
        if tally is None:
            tally = self._tallies[node] = UsageTally()
        tally.add(view)

    def usage(self) -> dict[str, NodeUsage]:
        return {name: tally.usage() for name, tally in self._tallies.items()}
