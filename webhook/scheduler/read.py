"""API objects (decoded JSON) read into the scheduler's model: `pod_info`, `usage_info` (what a
pod takes of its node and what other pods' plugins see of it), `node_info`, `namespace_info` (the
labels pod affinity's namespaceSelectors match), and `Selectors` (the Services and controllers
whose selectors make PodTopologySpread's default constraints).
ShapeError names a bad field; paths are relative to the object, callers prefix the file.

Sources (kubernetes v1.36): staging/src/k8s.io/kube-scheduler/framework/types.go (AffinityTerm,
the namespaces of a term), pkg/scheduler/framework/plugins/helper/spread.go (DefaultSelector,
GetPodServices), pkg/scheduler/framework/plugins/podtopologyspread/common.go (a constraint's
defaults).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook import apidata
from webhook.affinity import (
    NODE_SELECTOR_OPERATORS,
    PREFERRED,
    REQUIRED,
    PreferredTerm,
    Requirement,
    node_affinity_from_api,
)
from webhook.apidata import STRING_IN_YAML, InvalidValue, ShapeError, expect
from webhook.resources import pod_resources, resource_list
from webhook.scheduler.model import (
    DEFAULT_SCHEDULER,
    UNDATED,
    AffinityTerm,
    Node,
    PodAffinity,
    PodInfo,
    SpreadConstraint,
    Taint,
    Toleration,
    WeightedAffinityTerm,
    normalized_image_name,
)
from webhook.selector import LabelSelector, label_selector_from_api
from webhook.validation import is_qualified_name

# Volume kinds that never filter a node (the volume plugins look at the others: claims, cloud disks);
# an image volume only scores, in ImageLocality.
LOCAL_VOLUME_KINDS = frozenset({"name", "configMap", "secret", "emptyDir", "downwardAPI", "projected", "image"})


# The controllers whose selector DefaultSelector merges (apiVersion, kind).
SPREAD_CONTROLLERS = (("v1", "ReplicationController"), ("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet"))


@dataclass(frozen=True)
class Selectors:
    """What helper.DefaultSelector reads: per namespace the selectors of its Services (those with
    one: a Service without a selector selects nothing), and the selectors of the controllers
    that may own a pod, by (namespace, kind, name)."""

    services: Mapping[str, tuple[Mapping[str, str], ...]] = field(default_factory=dict)
    controllers: Mapping[tuple[str, str, str], LabelSelector] = field(default_factory=dict)


NO_SELECTORS = Selectors()


def selectors_from_api(services: Iterable[Any], controllers: Iterable[Any] = ()) -> Selectors:
    """Services and ReplicationControllers / ReplicaSets / StatefulSets (API JSON) as `Selectors`;
    an object that cannot be read is left out (the scheduler's lister would not hold it either)."""
    by_namespace: dict[str, list[Mapping[str, str]]] = {}
    for obj in services:
        try:
            meta, spec = apidata.obj(obj, "metadata", "metadata"), apidata.obj(obj, "spec", "spec")
            if spec.get("selector") is None:
                continue
            labels = apidata.string_map(spec, "selector", "spec.selector")
            namespace = apidata.text(meta, "namespace", "metadata.namespace") or "default"
        except ShapeError:
            continue
        by_namespace.setdefault(namespace, []).append(labels)
    owners: dict[tuple[str, str, str], LabelSelector] = {}
    for obj in controllers:
        try:
            key, selector = _controller_selector(obj)
        except ShapeError:
            continue
        owners[key] = selector
    return Selectors({ns: tuple(s) for ns, s in by_namespace.items()}, owners)


def _controller_selector(obj: Any) -> tuple[tuple[str, str, str], LabelSelector]:
    expect(obj, dict, "(object)", "an object")
    meta, spec = apidata.obj(obj, "metadata", "metadata"), apidata.obj(obj, "spec", "spec")
    kind = apidata.text(obj, "kind", "kind")
    key = (apidata.text(meta, "namespace", "metadata.namespace") or "default", kind, apidata.text(meta, "name", "name"))
    if kind == "ReplicationController":  # a map of labels
        return key, LabelSelector(tuple(apidata.string_map(spec, "selector", "spec.selector").items()))
    return key, label_selector_from_api(spec.get("selector"), "spec.selector")


def default_spread_selector(pod: Mapping[str, Any], selectors: Selectors) -> LabelSelector | None:
    """helper.DefaultSelector of a Pod object: `spread_selector` of its namespace, labels and
    controller (when it is a ReplicationController, ReplicaSet or StatefulSet)."""
    meta = apidata.obj(pod, "metadata", "metadata")
    owner = _controller_ref(meta)
    return spread_selector(
        apidata.text(meta, "namespace", "metadata.namespace") or "default",
        apidata.string_map(meta, "labels", "metadata.labels", STRING_IN_YAML),
        owner[1:] if owner is not None and owner[:2] in SPREAD_CONTROLLERS else None,
        selectors,
    )


def spread_selector(
    namespace: str, labels: Mapping[str, str], controller: tuple[str, str] | None, selectors: Selectors
) -> LabelSelector | None:
    """helper.DefaultSelector: the selectors of the pod's Services merged, then its `controller`'s
    (kind, name) added; None when that selects nothing (no default constraints then)."""
    merged: dict[str, str] = {}
    for selector in selectors.services.get(namespace, ()):
        if all(labels.get(k) == v for k, v in selector.items()):
            merged.update(selector)
    added = LabelSelector()  # a ReplicaSet's or StatefulSet's selector, ANDed
    found = selectors.controllers.get((namespace, *controller)) if controller is not None else None
    if found is not None and controller is not None and controller[0] == "ReplicationController":
        merged.update(found.match_labels)
    elif found is not None:
        added = found
    result = LabelSelector((*merged.items(), *added.match_labels), added.match_expressions)
    return None if result.is_empty() else result


def _controller_ref(meta: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """metav1.GetControllerOf: (apiVersion, kind, name) of the owner reference marked controller."""
    for ref in apidata.items(meta, "ownerReferences", "metadata.ownerReferences"):
        if isinstance(ref, dict) and ref.get("controller") is True:
            return str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""), str(ref.get("name") or "")
    return None


def pod_info(pod: Any, selectors: Selectors = NO_SELECTORS) -> PodInfo:
    """The scheduling view of a Pod object (API JSON data); ShapeError names a bad field.
    `selectors`: the Services and controllers PodTopologySpread's default constraints read."""
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
        spread=_spread(spec),
        default_spread=default_spread_selector(pod, selectors),
        pod_affinity=_pod_affinity(affinity, apidata.text(meta, "namespace", "metadata.namespace") or "default"),
        terminating=meta.get("deletionTimestamp") is not None,
        node_features=declared_features_needed(spec),
    )


def _spread(spec: Mapping[str, Any]) -> tuple[SpreadConstraint, ...]:
    key, path = "topologySpreadConstraints", "spec.topologySpreadConstraints"
    return tuple(spread_constraint(raw, f"{path}[{i}]") for i, raw in enumerate(apidata.items(spec, key, path)))


def spread_constraint(raw: Any, path: str) -> SpreadConstraint:
    """A v1.TopologySpreadConstraint (a pod's, or PodTopologySpreadArgs' defaultConstraints) with
    the defaults PodTopologySpread fills in (common.go filterTopologySpreadConstraints)."""
    expect(raw, dict, path, "an object")
    selector = raw.get("labelSelector")
    min_domains = raw.get("minDomains")
    return SpreadConstraint(
        max_skew=apidata.integer(raw, "maxSkew", f"{path}.maxSkew"),
        topology_key=apidata.text(raw, "topologyKey", f"{path}.topologyKey"),
        when_unsatisfiable=apidata.text(raw, "whenUnsatisfiable", f"{path}.whenUnsatisfiable"),
        selector=None if selector is None else label_selector_from_api(selector, f"{path}.labelSelector"),
        min_domains=1 if min_domains is None else apidata.integer(raw, "minDomains", f"{path}.minDomains"),
        node_affinity_policy=apidata.text(raw, "nodeAffinityPolicy", f"{path}.nodeAffinityPolicy") or "Honor",
        node_taints_policy=apidata.text(raw, "nodeTaintsPolicy", f"{path}.nodeTaintsPolicy") or "Ignore",
        match_label_keys=tuple(
            expect(k, str, f"{path}.matchLabelKeys[{j}]", "a label key")
            for j, k in enumerate(apidata.items(raw, "matchLabelKeys", f"{path}.matchLabelKeys"))
        ),
    )


def _pod_affinity(affinity: Mapping[str, Any], namespace: str) -> PodAffinity:
    def terms(kind: str) -> tuple[tuple[AffinityTerm, ...], tuple[WeightedAffinityTerm, ...]]:
        base = f"spec.affinity.{kind}"
        raw = apidata.obj(affinity, kind, base)
        required = tuple(
            _affinity_term(t, f"{base}.{REQUIRED}[{i}]", namespace)
            for i, t in enumerate(apidata.items(raw, REQUIRED, f"{base}.{REQUIRED}"))
        )
        preferred = []
        for i, t in enumerate(apidata.items(raw, PREFERRED, f"{base}.{PREFERRED}")):
            path = f"{base}.{PREFERRED}[{i}]"
            expect(t, dict, path, "an object with weight and podAffinityTerm")
            term = _affinity_term(t.get("podAffinityTerm"), f"{path}.podAffinityTerm", namespace)
            preferred.append(WeightedAffinityTerm(apidata.integer(t, "weight", f"{path}.weight"), term))
        return required, tuple(preferred)

    required, preferred = terms("podAffinity")
    required_anti, preferred_anti = terms("podAntiAffinity")
    return PodAffinity(required, required_anti, preferred, preferred_anti)


def _affinity_term(raw: Any, path: str, namespace: str) -> AffinityTerm:
    """A PodAffinityTerm as kube-scheduler reads it: its labelSelector alone. Its matchLabelKeys
    and mismatchLabelKeys are merged into that selector by the API server when the pod is created
    (a stored pod carries them merged; `webhook.admitted.on_create` merges them into a pod made
    from a template), and kube-scheduler never reads them."""
    expect(raw, dict, path, "a PodAffinityTerm")
    selector, ns_selector = raw.get("labelSelector"), raw.get("namespaceSelector")
    names = frozenset(
        expect(n, str, f"{path}.namespaces[{i}]", "a namespace name")
        for i, n in enumerate(apidata.items(raw, "namespaces", f"{path}.namespaces"))
    )
    if not names and ns_selector is None:
        names = frozenset({namespace})
    return AffinityTerm(
        selector=None if selector is None else label_selector_from_api(selector, f"{path}.labelSelector"),
        topology_key=apidata.text(raw, "topologyKey", f"{path}.topologyKey"),
        namespaces=names,
        namespace_selector=None
        if ns_selector is None
        else label_selector_from_api(ns_selector, f"{path}.namespaceSelector"),
    )


def _uses(spec: Mapping[str, Any], affinity: Mapping[str, Any]) -> frozenset[str]:
    """Which not-evaluated plugins this pod's own fields call on."""
    uses = set()
    volumes = spec.get("volumes")
    kinds = {k for v in volumes if isinstance(v, dict) for k in v} if isinstance(volumes, list) else set()
    if kinds - LOCAL_VOLUME_KINDS:
        uses.add("volumes")
    if spec.get("resourceClaims"):
        uses.add("DynamicResources")
    return frozenset(uses)


def usage_info(pod: Any, template: PodInfo | None = None) -> PodInfo:
    """A pod as the pods scheduled after it see it (what `UsageTally.add` reads): its requests
    and host ports, its namespace, labels and pod (anti-)affinity terms, whether it is
    terminating; reading only the fields that make them (`keys.usage_template_key` and the
    labels). `template`: the view of a pod that differs from this one in its labels alone
    (`keys.UsageViews`), of which only the labels are then read. ShapeError names a bad field."""
    expect(pod, dict, "(pod)", "a Pod object")
    meta, spec = apidata.obj(pod, "metadata", "metadata"), apidata.obj(pod, "spec", "spec")
    labels = apidata.string_map(meta, "labels", "metadata.labels", STRING_IN_YAML)
    if template is not None:
        return dataclasses.replace(template, labels=labels)
    namespace = apidata.text(meta, "namespace", "metadata.namespace") or "default"
    return PodInfo(
        name="",
        labels=labels,
        node_selector={},
        required=None,
        preferred=(),
        tolerations=(),
        namespace=namespace,
        resources=pod_resources(pod),
        pod_affinity=_pod_affinity(apidata.obj(spec, "affinity", "spec.affinity"), namespace),
        terminating=meta.get("deletionTimestamp") is not None,
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


def namespace_info(namespace: Any) -> tuple[str, dict[str, str]]:
    """A Namespace object's name and labels, what InterPodAffinity's namespace lister holds of it
    (interpodaffinity/plugin.go GetNamespaceLabelsSnapshot, mergeAffinityTermNamespacesIfNotEmpty);
    ShapeError names a bad field."""
    expect(namespace, dict, "(namespace)", "a Namespace object")
    meta = apidata.obj(namespace, "metadata", "metadata")
    return apidata.text(meta, "name", "metadata.name"), dict(apidata.string_map(meta, "labels", "metadata.labels"))


def namespaces_from_api(items: Iterable[Any]) -> dict[str, dict[str, str]]:
    """Each Namespace's labels by name (`namespace_info`), as `Snapshot.namespaces` holds them."""
    return dict(namespace_info(item) for item in items)


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
        frozenset(
            expect(f, str, f"status.declaredFeatures[{i}]", "a string")
            for i, f in enumerate(apidata.items(status, "declaredFeatures", "status.declaredFeatures"))
        ),
        _created(meta),
    )


def _created(meta: Mapping[str, Any]) -> dt.datetime:
    """metadata.creationTimestamp (RFC 3339, as metav1.Time reads it); UNDATED when absent."""
    text = apidata.text(meta, "creationTimestamp", "metadata.creationTimestamp")
    if not text:
        return UNDATED
    expected = "an RFC 3339 time such as 2026-01-02T03:04:05Z"
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ShapeError("metadata.creationTimestamp", expected, text) from None
    if when.tzinfo is None:  # Go's time.RFC3339 requires the offset
        raise ShapeError("metadata.creationTimestamp", expected, text)
    return when


# The node features a pod's spec needs declared, by name (k8s.io/component-helpers
# nodedeclaredfeatures/features, InferForScheduling of each; v0.36.3 and v0.37.2).
RESTART_ALL_CONTAINERS = "RestartAllContainersOnContainerExits"
USER_NAMESPACES_HOST_NETWORK = "UserNamespacesHostNetworkSupport"
VOLUME_BIND_MOUNT_OPTIONS = "VolumeBindMountOptions"  # 1.37 only


def declared_features_needed(spec: Mapping[str, Any]) -> frozenset[str]:
    """The features NodeDeclaredFeatures requires of a node for this pod: a container or init
    container restart rule whose action is RestartAllContainers; hostNetwork with hostUsers false;
    a volume mount of any container (ephemeral ones too) with bindMountOptions."""
    needed = set()
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in (c for c in apidata.items(spec, key, f"spec.{key}") if isinstance(c, dict)):
            rules = c.get("restartPolicyRules")
            if key != "ephemeralContainers" and isinstance(rules, list):
                if any(isinstance(r, dict) and r.get("action") == "RestartAllContainers" for r in rules):
                    needed.add(RESTART_ALL_CONTAINERS)
            mounts = c.get("volumeMounts")
            if isinstance(mounts, list) and any(isinstance(m, dict) and m.get("bindMountOptions") for m in mounts):
                needed.add(VOLUME_BIND_MOUNT_OPTIONS)
    if spec.get("hostNetwork") is True and spec.get("hostUsers") is False:
        needed.add(USER_NAMESPACES_HOST_NETWORK)
    return frozenset(needed)


def _images(status: Mapping[str, Any]) -> dict[str, int]:
    """Each name in status.images with the size of the first entry that lists it, the one the
    scheduler's cache would keep from this node (cache.go addNodeImageStates)."""
    images: dict[str, int] = {}
    for i, image in enumerate(apidata.items(status, "images", "status.images")):
        path = f"status.images[{i}]"
        expect(image, dict, path, "an object")
        size = apidata.integer(image, "sizeBytes", f"{path}.sizeBytes")
        for j, name in enumerate(apidata.items(image, "names", f"{path}.names")):
            images.setdefault(expect(name, str, f"{path}.names[{j}]", "a string"), size)
    return images


def _checked_weight(term: PreferredTerm, path: str) -> PreferredTerm:
    # The API server refuses other weights; the scheduler's normalisation assumes them.
    if not 1 <= term.weight <= 100:
        raise InvalidValue(path, "an integer from 1 to 100 (the API server rejects other weights)", term.weight)
    return term


def pod_problem(pod: Any) -> str | None:
    """Why the API server would refuse to create `pod`, as far as the fields netqos-webhook reads
    go, or None: its apiVersion and kind (`apidata.pod_type_problem`), the type and range of every
    field scheduling reads (`pod_info`: the field's path and its value), and each node-affinity
    requirement as ValidateNodeSelectorRequirement checks it (k8s.io/kubernetes
    pkg/apis/core/validation/validation.go: a known operator, the number of values it takes, a
    qualified-name key). `explain` and `review` turn a pod away by it alike."""
    if not isinstance(pod, dict):
        return f"the pod is {apidata.describe(pod)}, not a Pod object"
    problem = apidata.pod_type_problem(pod)
    if problem:
        return problem
    try:
        pod_info(pod)
    except ShapeError as err:
        return f"{err}; fix the field"
    problem = _node_selector_problem(pod)
    return None if problem is None else f"{problem}; fix the field"


def _node_selector_problem(pod: Mapping[str, Any]) -> str | None:
    """The first node-affinity requirement the API server refuses (shapes already checked)."""
    base = "spec.affinity.nodeAffinity"
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    required, preferred = node_affinity_from_api(affinity, base)
    terms = [(f"{base}.{REQUIRED}.nodeSelectorTerms[{i}]", t) for i, t in enumerate(required or ())]
    terms += [(f"{base}.{PREFERRED}[{i}].preference", t.term) for i, t in enumerate(preferred)]
    for path, term in terms:
        for j, requirement in enumerate(term.expressions):
            problem = _requirement_problem(requirement, f"{path}.matchExpressions[{j}]")
            if problem:
                return problem
    return None


def _requirement_problem(req: Requirement, path: str) -> str | None:
    """ValidateNodeSelectorRequirement's checks, with its field paths: what the API server
    refuses, which is less than what the scheduler cannot parse (`Requirement.problem`; a
    preferred term's values are not checked to be label values, a Gt value not to be an integer)."""
    op, count = req.operator, len(req.values)
    if op not in NODE_SELECTOR_OPERATORS:
        return (
            f"{path}.operator must be one of {', '.join(NODE_SELECTOR_OPERATORS)} (not a valid selector operator), "
            f"got {apidata.show(op)}"
        )
    if op in ("In", "NotIn") and count == 0:
        return f"{path}.values must be given for operator {op}"
    if op in ("Exists", "DoesNotExist") and count:
        return f"{path}.values must be left out for operator {op}, got {apidata.show(list(req.values))}"
    if op in ("Gt", "Lt") and count != 1:
        return f"{path}.values must be a single value for operator {op}, got {apidata.show(list(req.values))}"
    errors = is_qualified_name(req.key)
    if errors:
        return f"{path}.key must be a label key, got {apidata.show(req.key)}: {'; '.join(errors)}"
    return None


def _toleration(raw: Any, path: str) -> Toleration:
    expect(raw, dict, path, "an object")
    return Toleration(*(apidata.text(raw, f, f"{path}.{f}") for f in ("key", "operator", "value", "effect")))


def _taint(raw: Any, path: str) -> Taint:
    expect(raw, dict, path, "an object")
    return Taint(*(apidata.text(raw, f, f"{path}.{f}") for f in ("key", "value", "effect")))
