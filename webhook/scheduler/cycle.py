"""One kube-scheduler cycle for one pod over a list of nodes and the pods already on them: the
default profile's Filter plugins, its Score plugins normalised and weighted, the total and the
predicted node(s); beside it, the NetQoS plugin's score. Pure: API data in, dataclasses out.

Filtering follows the default profile. NodeAffinity's PreFilter narrows the candidates when every
required term names nodes (`matchFields metadata.name In`). Then each node goes through the Filter
plugins in their configured order, and the first plugin that rejects it gives the node's reasons
(the framework stops there): NodeUnschedulable, NodeName, TaintToleration, NodeAffinity,
NodePorts, NodeResourcesFit. Volumes, inter-pod affinity and topology spread come after these
and are not evaluated (`NOT_EVALUATED`): a node we call feasible may still be rejected by them.

Scoring, per feasible node, with each plugin's own normalisation, then times its weight:
TaintToleration (PreferNoSchedule taints not tolerated, normalised in reverse), NodeAffinity
(sum of the matching preferred terms' weights, normalised to the best node), NodeResourcesFit
(LeastAllocated by default; MostAllocated or RequestedToCapacityRatio by configuration),
NodeResourcesBalancedAllocation and ImageLocality (already 0-100). The NetQoS plugin's score is
its table: for a `qos=latency-sensitive` pod 100 on `net=high`, 0 on `net=low`, 10 elsewhere; 0 for
every other pod; it has no NormalizeScore.

Sources (kubernetes/kubernetes, release v1.34): pkg/scheduler/framework/plugins/{nodeaffinity,
nodename,nodeunschedulable,nodeports,tainttoleration,imagelocality/image_locality.go,
noderesources/{fit.go,least_allocated.go,most_allocated.go,requested_to_capacity_ratio.go,
balanced_allocation.go,resource_allocation.go},helper/{normalize_score.go,shape_score.go}},
pkg/scheduler/framework/types.go (NodeInfo, HostPortInfo, FitError), pkg/scheduler/schedule_one.go,
pkg/scheduler/util/pod_resources.go (non-zero requests), pkg/scheduler/apis/config/v1/
default_plugins.go (order and weights), staging/src/k8s.io/component-helpers/scheduling/corev1/
{helpers.go,nodeaffinity/nodeaffinity.go}, staging/src/k8s.io/component-helpers/resource/helpers.go
(PodRequests), staging/src/k8s.io/api/core/v1/toleration.go.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

from webhook import apidata
from webhook.affinity import (
    NODE_NAME_FIELD,
    PREFERRED,
    NodeSelectorTerm,
    PreferredTerm,
    node_affinity_from_api,
    node_selector_matches,
    preferred_score,
    preferred_terms_problem,
)
from webhook.apidata import STRING_IN_YAML, ShapeError, expect
from webhook.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    NON_ZERO_DEFAULTS,
    PODS,
    Container,
    HostPort,
    container_from_api,
    is_scalar,
    pod_requests,
    resource_list,
)

# Reasons, verbatim from kube-scheduler (the Filter statuses that make up "0/N nodes are available").
REASON_UNSCHEDULABLE = "node(s) were unschedulable"  # nodeunschedulable.ErrReasonUnschedulable
REASON_NODE_NAME = "node(s) didn't match the requested node name"  # nodename.ErrReason
REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"  # nodeaffinity.ErrReasonPod
REASON_ENFORCED_AFFINITY = "node(s) didn't match scheduler-enforced node affinity"  # nodeaffinity.errReasonEnforced
REASON_NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"  # nodeports.ErrReason
REASON_TOO_MANY_PODS = "Too many pods"  # noderesources: InsufficientResource for pods
# Nodes left out by NodeAffinity's PreFilter (schedule_one.go, SetAbsentNodesStatus).
REASON_NOT_IN_PREFILTER = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
# NodeAffinity's PreFilter when the required terms name disjoint sets of nodes.
REASON_TERMS_CONFLICT = "pod affinity terms conflict"

MAX_NODE_SCORE = 100  # framework.MaxNodeScore
NETQOS_POD_LABEL = ("qos", "latency-sensitive")
NETQOS_NODE_LABEL = "net"
# NodeUnschedulable lets a pod onto a cordoned node if it tolerates this taint.
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
FILTER_EFFECTS = ("NoSchedule", "NoExecute")  # helper.DoNotScheduleTaintsFilterFunc
MIN_FEASIBLE_NODES_TO_FIND = 100  # below this many nodes the scheduler evaluates every node
MIN_FEASIBLE_NODES_PERCENTAGE = 5

# Score plugins, by kube-scheduler's names; the default profile's weights (default_plugins.go).
TAINT_TOLERATION = "TaintToleration"
NODE_AFFINITY = "NodeAffinity"
NODE_RESOURCES_FIT = "NodeResourcesFit"
BALANCED_ALLOCATION = "NodeResourcesBalancedAllocation"
IMAGE_LOCALITY = "ImageLocality"
NETQOS = "NetQoS"
EVALUATED_SCORE_PLUGINS = (TAINT_TOLERATION, NODE_AFFINITY, NODE_RESOURCES_FIT, BALANCED_ALLOCATION, IMAGE_LOCALITY)
DEFAULT_WEIGHTS: Mapping[str, int] = MappingProxyType(
    {
        TAINT_TOLERATION: 3,
        NODE_AFFINITY: 2,
        NODE_RESOURCES_FIT: 1,
        BALANCED_ALLOCATION: 1,
        IMAGE_LOCALITY: 1,
    }
)
# Plugins of the default profile whose Filter or Score is not evaluated here.
NOT_EVALUATED = (
    "PodTopologySpread",
    "InterPodAffinity",
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    "DynamicResources",
)

# ImageLocality's thresholds (image_locality.go).
_MB = 1024 * 1024
IMAGE_MIN_THRESHOLD = 23 * _MB
IMAGE_MAX_CONTAINER_THRESHOLD = 1000 * _MB
# RequestedToCapacityRatio: shape scores are 0-10 (config.MaxCustomPriorityScore), scaled to 0-100.
MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100


def untolerated_taint_reason(taint: Taint) -> str:
    """TaintToleration's reason, naming the first untolerated taint.

    This is the wording of kube-scheduler up to v1.34. From v1.35 (kubernetes/kubernetes#134740,
    backported to v1.34 patch releases) the scheduler writes "node(s) had untolerated taint(s)"
    and logs the taint instead, to keep taint values out of pod status; explain reads nodes the
    user can read anyway, so it names the taint.
    """
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:  # as kubectl prints it: key=value:Effect
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = ""  # empty means Equal
    value: str = ""
    effect: str = ""  # empty means every effect

    def tolerates(self, taint: Taint) -> bool:
        """v1.Toleration.ToleratesTaint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False  # an empty key (with Exists) matches every key
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        # Lt/Gt exist only behind the alpha gate TaintTolerationComparisonOperators (v1.35); with
        # the gate off the API server refuses them, and an unknown operator tolerates nothing.
        return self.operator == "Exists"


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    # status.allocatable in scheduler units (cpu in millicores); None when the object has no
    # status.allocatable at all: resource fit is then not evaluated for the node.
    allocatable: Mapping[str, int] | None = None
    images: Mapping[str, int] = field(default_factory=dict)  # every name in status.images -> size in bytes


@dataclass(frozen=True)
class PodView:
    """The pod fields scheduling reads."""

    name: str
    labels: Mapping[str, str]
    node_selector: Mapping[str, str]
    required: tuple[NodeSelectorTerm, ...] | None  # None: no requiredDuringScheduling...
    preferred: tuple[PreferredTerm, ...]
    tolerations: tuple[Toleration, ...]
    node_name: str = ""
    namespace: str = "default"
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    overhead: Mapping[str, int] = field(default_factory=dict)
    pod_level_requests: Mapping[str, int] = field(default_factory=dict)
    scheduler_name: str = "default-scheduler"
    phase: str = ""
    owner_kinds: tuple[str, ...] = ()
    uses: frozenset[str] = frozenset()  # features whose plugins are not evaluated (see `not_evaluated_uses`)

    @cached_property
    def requests(self) -> Mapping[str, int]:
        """PodRequests: what NodeResourcesFit's Filter and the node's Requested count."""
        return pod_requests(self.containers, self.init_containers, self.overhead, self.pod_level_requests)

    @cached_property
    def non_zero_requests(self) -> Mapping[str, int]:
        """PodRequests with 100m / 200Mi for containers without cpu / memory (scoring's view)."""
        return pod_requests(
            self.containers, self.init_containers, self.overhead, self.pod_level_requests, NON_ZERO_DEFAULTS
        )

    @cached_property
    def scalar_requests(self) -> tuple[str, ...]:
        """The extended resources and hugepages the pod requests, sorted (Fit's reason order)."""
        return tuple(sorted(name for name in self.requests if is_scalar(name)))

    @cached_property
    def host_ports(self) -> tuple[HostPort, ...]:
        """The host ports of the app containers and the sidecars (util.GetHostPorts)."""
        sidecars = (c for c in self.init_containers if c.sidecar)
        return tuple(p for c in (*self.containers, *sidecars) for p in c.host_ports)

    @cached_property
    def images(self) -> tuple[str, ...]:
        """Every container's image, init containers first, as ImageLocality names them."""
        return tuple(normalized_image_name(c.image) for c in (*self.init_containers, *self.containers))


@dataclass(frozen=True)
class NodeUsage:
    """What the pods already on a node take (NodeInfo.Requested, NonZeroRequested, Pods, UsedPorts)."""

    requested: Mapping[str, int] = field(default_factory=dict)
    non_zero_requested: Mapping[str, int] = field(default_factory=dict)
    pods: int = 0
    host_ports: tuple[HostPort, ...] = ()


EMPTY_USAGE = NodeUsage()


class UsageTally:
    """A NodeUsage built one pod at a time, so a caller streaming many pods need not hold them."""

    def __init__(self) -> None:
        self.requested: dict[str, int] = {}
        self.non_zero: dict[str, int] = {}
        self.pods = 0
        self.ports: list[HostPort] = []

    def add(self, pod: PodView) -> None:
        """Count `pod` (bound to the node) in."""
        self.pods += 1
        for name, value in pod.requests.items():
            self.requested[name] = self.requested.get(name, 0) + value
        for name in (CPU, MEMORY):
            self.non_zero[name] = self.non_zero.get(name, 0) + pod.non_zero_requests.get(name, 0)
        self.ports.extend(pod.host_ports)

    def remove(self, pod: PodView) -> None:
        """Count `pod` (counted in before) out: it leaves the node."""
        self.pods -= 1
        for name, value in pod.requests.items():
            self.requested[name] = self.requested.get(name, 0) - value
        for name in (CPU, MEMORY):
            self.non_zero[name] = self.non_zero.get(name, 0) - pod.non_zero_requests.get(name, 0)
        for port in pod.host_ports:
            self.ports.remove(port)

    def usage(self) -> NodeUsage:
        return NodeUsage(dict(self.requested), dict(self.non_zero), self.pods, tuple(self.ports))


def usage_of(pods: Iterable[PodView]) -> NodeUsage:
    """The usage of a node by `pods` (all bound to it)."""
    tally = UsageTally()
    for pod in pods:
        tally.add(pod)
    return tally.usage()


def usage_by_node(pods: Iterable[PodView]) -> dict[str, NodeUsage]:
    """Each node's usage by the pods bound to it and not finished (Succeeded or Failed)."""
    by_node: dict[str, list[PodView]] = {}
    for pod in pods:
        if pod.node_name and pod.phase not in ("Succeeded", "Failed"):
            by_node.setdefault(pod.node_name, []).append(pod)
    return {name: usage_of(on_node) for name, on_node in by_node.items()}


# ---------------------------------------------------------------------------------------------
# The profile: which score plugins run, with which weights and arguments


@dataclass(frozen=True)
class ScoringStrategy:
    """NodeResourcesFitArgs.scoringStrategy."""

    type: str = "LeastAllocated"  # or MostAllocated, RequestedToCapacityRatio
    resources: tuple[tuple[str, int], ...] = ((CPU, 1), (MEMORY, 1))
    shape: tuple[tuple[int, int], ...] = ()  # (utilization, score 0-10) for RequestedToCapacityRatio


@dataclass(frozen=True)
class Profile:
    """A KubeSchedulerProfile, as far as it is evaluated here."""

    scheduler_name: str = "default-scheduler"
    weights: Mapping[str, int] = field(default_factory=lambda: DEFAULT_WEIGHTS)
    scoring_strategy: ScoringStrategy = ScoringStrategy()
    balanced_resources: tuple[tuple[str, int], ...] = ((CPU, 1), (MEMORY, 1))
    added_required: tuple[NodeSelectorTerm, ...] | None = None  # NodeAffinityArgs.addedAffinity
    added_preferred: tuple[PreferredTerm, ...] = ()
    not_evaluated: tuple[str, ...] = NOT_EVALUATED  # enabled plugins whose effect is not modelled

    def with_netqos(self, weight: int) -> Profile:
        """The same profile with the NetQoS plugin's Score at `weight` (the NetQoS scheduler)."""
        return Profile(
            self.scheduler_name,
            MappingProxyType({**self.weights, NETQOS: weight}),
            self.scoring_strategy,
            self.balanced_resources,
            self.added_required,
            self.added_preferred,
            self.not_evaluated,
        )


DEFAULT_PROFILE = Profile()


# ---------------------------------------------------------------------------------------------
# Reading API data. Field paths in errors are relative to the object; callers prefix the file.


def pod_view(pod: Any) -> PodView:
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
    return PodView(
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
        scheduler_name=apidata.text(spec, "schedulerName", "spec.schedulerName") or "default-scheduler",
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
    # volumes the volume plugins look at (claims, cloud disks, ...); local ones never filter a node
    if kinds - {"name", "configMap", "secret", "emptyDir", "downwardAPI", "projected"}:
        uses.add("volumes")
    if spec.get("resourceClaims"):
        uses.add("DynamicResources")
    return frozenset(uses)


def resource_view(pod: Any) -> PodView:
    """A pod as what it takes of its node (its requests and host ports: what `UsageTally.add`
    reads), reading only the fields that make them; ShapeError names a bad field."""
    expect(pod, dict, "(pod)", "a Pod object")
    containers, init_containers, overhead, pod_level_requests = _resource_fields(apidata.obj(pod, "spec", "spec"))
    return PodView(
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


def node_from_api(node: Any) -> Node:
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


def normalized_image_name(name: str) -> str:
    """imagelocality.normalizedImageName: a name without a tag gets `:latest`."""
    return name if name.rfind(":") > name.rfind("/") else f"{name}:latest"


# ---------------------------------------------------------------------------------------------
# Filtering


def prefilter_node_names(pod: PodView) -> frozenset[str] | None:
    """NodeAffinity.PreFilter: the only candidate nodes, or None when every node is a candidate.

    Only when every required term has a `metadata.name In` field requirement: the names of one
    term are intersected, those of the terms united. An empty result is a conflict.
    """
    if not pod.required:
        return None
    names: set[str] = set()
    for term in pod.required:
        term_names: set[str] | None = None
        for req in term.fields:
            if req.key == NODE_NAME_FIELD and req.operator == "In":
                term_names = set(req.values) if term_names is None else term_names & set(req.values)
        if term_names is None:
            return None  # this term can match any node, and terms are ORed
        names |= term_names
    return frozenset(names)


def filter_reasons(
    pod: PodView, node: Node, usage: NodeUsage = EMPTY_USAGE, profile: Profile = DEFAULT_PROFILE
) -> tuple[str, ...]:
    """Why `node` cannot take `pod` given what the pods already on it use: the reasons of the
    first Filter plugin that rejects it, in default-profile order; () when every plugin passes."""
    return node_only_reasons(pod, node, profile) or usage_reasons(pod, node, usage)


def node_only_reasons(pod: PodView, node: Node, profile: Profile = DEFAULT_PROFILE) -> tuple[str, ...]:
    """The Filter plugins that read the pod and the node alone, which the default profile runs
    first: NodeUnschedulable, NodeName, TaintToleration, NodeAffinity. Their verdict depends on the
    pod's node name, tolerations, node selector and required affinity only, so pods that share
    those share it, whatever the pods on the node."""
    if node.unschedulable and not _tolerates(pod, Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")):
        return (REASON_UNSCHEDULABLE,)
    if pod.node_name and pod.node_name != node.name:
        return (REASON_NODE_NAME,)
    taint = first_untolerated_taint(pod.tolerations, node.taints)
    if taint is not None:
        return (untolerated_taint_reason(taint),)
    if profile.added_required is not None and not node_selector_matches(profile.added_required, node.labels, node.name):
        return (REASON_ENFORCED_AFFINITY,)
    if not required_affinity_matches(pod, node):
        return (REASON_NODE_AFFINITY,)
    return ()


def usage_reasons(pod: PodView, node: Node, usage: NodeUsage) -> tuple[str, ...]:
    """The Filter plugins that read what the pods already on the node take, which the default
    profile runs next: NodePorts, then NodeResourcesFit. They read the pod's host ports and
    requests only."""
    if not ports_fit(pod.host_ports, usage.host_ports):
        return (REASON_NODE_PORTS,)
    return insufficient_resources(pod.requests, node.allocatable, usage, pod.scalar_requests)


def node_filter_reasons(
    pod: PodView, node: Node, pods: Iterable[PodView], profile: Profile = DEFAULT_PROFILE
) -> tuple[str, ...]:
    """`filter_reasons` of `node` for `pod`, given the cluster's pods: those bound to the node
    and not finished take its resources and ports (the others are ignored)."""
    others = (p for p in pods if (p.namespace, p.name) != (pod.namespace, pod.name))
    return filter_reasons(pod, node, usage_by_node(others).get(node.name, EMPTY_USAGE), profile)


def filter_reason(pod: PodView, node: Node, usage: NodeUsage = EMPTY_USAGE) -> str | None:
    """The first reason of `filter_reasons`, or None when the node passes."""
    reasons = filter_reasons(pod, node, usage)
    return reasons[0] if reasons else None


def first_untolerated_taint(tolerations: Sequence[Toleration], taints: Sequence[Taint]) -> Taint | None:
    """FindMatchingUntoleratedTaint over the NoSchedule and NoExecute taints, in node order."""
    for taint in taints:
        if taint.effect in FILTER_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def required_affinity_matches(pod: PodView, node: Node) -> bool:
    """RequiredNodeAffinity.Match: spec.nodeSelector AND the required node affinity terms."""
    for key, value in pod.node_selector.items():
        if key not in node.labels or node.labels[key] != value:
            return False
    if pod.required is None:
        return True
    return node_selector_matches(pod.required, node.labels, node.name)


def ports_fit(wanted: Sequence[HostPort], used: Sequence[HostPort]) -> bool:
    """NodePorts.Filter: no wanted host port conflicts with one in use on the node."""
    return not any(w.conflicts(u) for w in wanted for u in used)


def insufficient_resources(
    request: Mapping[str, int],
    allocatable: Mapping[str, int] | None,
    usage: NodeUsage,
    scalars: Sequence[str] | None = None,
) -> tuple[str, ...]:
    """NodeResourcesFit.Filter (fitsRequest): every resource the node lacks, with its reason.

    A node without status.allocatable (allocatable None) is not checked. `scalars`: the scalar
    resources of `request`, sorted, when the caller has them already.
    """
    if allocatable is None:
        return ()
    reasons = []
    if usage.pods + 1 > allocatable.get(PODS, 0):
        reasons.append(REASON_TOO_MANY_PODS)
    if scalars is None:
        scalars = sorted(name for name in request if is_scalar(name))
    if not any(request.get(name, 0) for name in (CPU, MEMORY, EPHEMERAL_STORAGE)) and not scalars:
        return tuple(reasons)
    for name in (CPU, MEMORY, EPHEMERAL_STORAGE, *scalars):
        wanted = request.get(name, 0)
        if wanted > 0 and wanted > allocatable.get(name, 0) - usage.requested.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return tuple(reasons)


def _tolerates(pod: PodView, taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in pod.tolerations)


# ---------------------------------------------------------------------------------------------
# Score plugins: each returns the node's score before normalisation


def netqos_score(pod_labels: Mapping[str, str], node_labels: Mapping[str, str]) -> int:
    """The NetQoS plugin's score table (see docs/scheduling.md for the plugin's fall-through)."""
    key, value = NETQOS_POD_LABEL
    if pod_labels.get(key) != value:
        return 0
    net = node_labels.get(NETQOS_NODE_LABEL)
    if net == "high":
        return MAX_NODE_SCORE
    if net == "low":
        return 0
    return 10


def intolerable_prefer_no_schedule(tolerations: Sequence[Toleration], taints: Sequence[Taint]) -> int:
    """TaintToleration.Score: how many PreferNoSchedule taints no toleration tolerates."""
    return sum(1 for t in taints if t.effect == "PreferNoSchedule" and not any(tol.tolerates(t) for tol in tolerations))


def least_allocated(requested: Sequence[int], allocatable: Sequence[int], weights: Sequence[int]) -> int:
    """least_allocated.go leastResourceScorer: free share x 100, weighted mean over resources."""
    score = weight_sum = 0
    for req, alloc, weight in zip(requested, allocatable, weights, strict=True):
        if alloc == 0:
            continue
        score += (0 if req > alloc else (alloc - req) * MAX_NODE_SCORE // alloc) * weight
        weight_sum += weight
    return score // weight_sum if weight_sum else 0


def most_allocated(requested: Sequence[int], allocatable: Sequence[int], weights: Sequence[int]) -> int:
    """most_allocated.go mostResourceScorer: used share x 100 (capped at full), weighted mean."""
    score = weight_sum = 0
    for req, alloc, weight in zip(requested, allocatable, weights, strict=True):
        if alloc == 0:
            continue
        score += min(req, alloc) * MAX_NODE_SCORE // alloc * weight
        weight_sum += weight
    return score // weight_sum if weight_sum else 0


def broken_linear(shape: Sequence[tuple[int, int]], p: int) -> int:
    """helper.BuildBrokenLinearFunction over (utilization, score) points, in Go's integer division."""
    for i, (utilization, score) in enumerate(shape):
        if p <= utilization:
            if i == 0:
                return score
            u0, s0 = shape[i - 1]
            return s0 + _go_div((score - s0) * (p - u0), utilization - u0)
    return shape[-1][1]


def requested_to_capacity_ratio(
    requested: Sequence[int], allocatable: Sequence[int], weights: Sequence[int], shape: Sequence[tuple[int, int]]
) -> int:
    """requested_to_capacity_ratio.go: the shape at each resource's utilisation, weighted, rounded."""
    scaled = [(u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in shape]
    score = weight_sum = 0
    for req, alloc, weight in zip(requested, allocatable, weights, strict=True):
        if alloc == 0:
            continue
        if req > alloc:
            resource_score = broken_linear(scaled, MAX_UTILIZATION)
        else:
            resource_score = broken_linear(scaled, req * MAX_UTILIZATION // alloc)
        if resource_score > 0:
            score += resource_score * weight
            weight_sum += weight
    return _go_round(score / weight_sum) if weight_sum else 0


def balanced_allocation(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """balanced_allocation.go balancedResourceScorer: (1 - standard deviation of the used shares) x 100."""
    fractions = [min(req / alloc, 1.0) for req, alloc in zip(requested, allocatable, strict=True) if alloc != 0]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def image_locality(images: Sequence[str], node: Node, nodes_with: Mapping[str, int], total_nodes: int) -> int:
    """image_locality.go: the sizes of the pod's images already on the node, each scaled by the
    share of nodes that have it, clamped between 23 MB and 1000 MB per container, to 0-100."""
    total = sum(int(node.images[i] * (nodes_with[i] / total_nodes)) for i in images if i in node.images)
    max_threshold = IMAGE_MAX_CONTAINER_THRESHOLD * len(images)
    if max_threshold <= IMAGE_MIN_THRESHOLD:  # no containers: Go divides by a negative range
        return 0
    clamped = min(max(total, IMAGE_MIN_THRESHOLD), max_threshold)
    return MAX_NODE_SCORE * (clamped - IMAGE_MIN_THRESHOLD) // (max_threshold - IMAGE_MIN_THRESHOLD)


def default_normalize(scores: Sequence[int], reverse: bool = False) -> list[int]:
    """helper.DefaultNormalizeScore(MaxNodeScore, reverse) over non-negative scores."""
    top = max(scores, default=0)
    if top == 0:
        return [MAX_NODE_SCORE if reverse else 0] * len(scores)
    normalized = [MAX_NODE_SCORE * score // top for score in scores]
    return [MAX_NODE_SCORE - n for n in normalized] if reverse else normalized


def normalize(raw_scores: Sequence[int]) -> list[int]:
    """NodeAffinity's normalisation: DefaultNormalizeScore(MaxNodeScore, reverse=false)."""
    return default_normalize(raw_scores)


def _go_div(a: int, b: int) -> int:
    """Go's integer division, which truncates toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _go_round(x: float) -> int:
    """math.Round: half away from zero."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def _resource_vectors(
    resources: Sequence[tuple[str, int]],
    pod_request: Mapping[str, int],
    node: Node,
    usage: NodeUsage,
    non_zero: bool,
) -> tuple[list[int], list[int], list[int]]:
    """resourceAllocationScorer.score's inputs: (requested incl. the pod, allocatable, weights).

    calculateResourceAllocatableRequest: cpu and memory count the node's non-zero requests when
    `non_zero` (NodeResourcesFit) and its real requests otherwise (BalancedAllocation); an
    extended resource the pod does not request is left out (0, 0).
    """
    requested, allocatable, weights = [], [], []
    node_alloc = node.allocatable or {}
    node_used = usage.non_zero_requested if non_zero else usage.requested
    for name, weight in resources:
        wanted = pod_request.get(name, 0)
        alloc = node_alloc.get(name, 0)
        if name in (CPU, MEMORY):
            used = node_used.get(name, 0)
        elif name == EPHEMERAL_STORAGE or (is_scalar(name) and wanted and name in node_alloc):
            used = usage.requested.get(name, 0)
        else:
            alloc = used = 0
        requested.append(used + wanted if alloc else 0)
        allocatable.append(alloc)
        weights.append(weight)
    return requested, allocatable, weights


def fit_score(pod_request: Mapping[str, int], node: Node, usage: NodeUsage, strategy: ScoringStrategy) -> int:
    """NodeResourcesFit.Score with its scoring strategy; `pod_request` is the non-zero request."""
    requested, allocatable, weights = _resource_vectors(strategy.resources, pod_request, node, usage, True)
    if strategy.type == "MostAllocated":
        return most_allocated(requested, allocatable, weights)
    if strategy.type == "RequestedToCapacityRatio":
        return requested_to_capacity_ratio(requested, allocatable, weights, strategy.shape)
    return least_allocated(requested, allocatable, weights)


def balanced_score(
    pod_request: Mapping[str, int], node: Node, usage: NodeUsage, resources: Sequence[tuple[str, int]]
) -> int:
    """NodeResourcesBalancedAllocation.Score; `pod_request` is the real (not non-zero) request.

    Since Kubernetes 1.36 (balanced_allocation.go balancedResourceScorer) it scores how much the
    pod improves the node's balance: 50 + (50 + balance with the pod - balance without it) / 2,
    each balance `balanced_allocation` of the used shares; 75 when the pod changes nothing.
    """
    requested, allocatable, _ = _resource_vectors(resources, pod_request, node, usage, False)
    allocated = [
        used - pod_request.get(name, 0) if alloc else 0
        for (name, _), used, alloc in zip(resources, requested, allocatable, strict=True)
    ]
    with_pod = balanced_allocation(requested, allocatable)
    without_pod = balanced_allocation(allocated, allocatable)
    half = MAX_NODE_SCORE // 2
    return half + _go_div(half + with_pod - without_pod, 2)


# ---------------------------------------------------------------------------------------------
# One scheduling cycle


@dataclass(frozen=True)
class NodeResult:
    name: str
    net: str | None  # the node's `net` label, None when it has none
    reasons: tuple[str, ...]  # why the scheduler filters it out; () when feasible
    netqos_score: int
    affinity_raw: int
    affinity_normalized: int | None  # None for infeasible nodes: the scheduler never scores them
    affinity_weighted: int | None
    scores: Mapping[str, int]  # normalised 0-100 per score plugin, before weights; {} when infeasible
    total: int | None  # the sum of the weighted scores; None when infeasible

    @property
    def feasible(self) -> bool:
        return not self.reasons

    @property
    def reason(self) -> str | None:
        return self.reasons[0] if self.reasons else None


@dataclass(frozen=True)
class Ranking:
    nodes: tuple[NodeResult, ...]
    prefilter_failure: str | None  # a PreFilter rejection applies to every node at once
    weights: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    skipped: tuple[str, ...] = ()  # score plugins whose PreScore skipped them for this pod
    # NodeAffinity's PreScore error when the pod's preferred terms do not parse: with more than
    # one feasible node the scheduling cycle fails there and the pod stays Pending.
    score_failure: str | None = None
    processed: int = 0  # nodes the cycle filtered (with `Sampling`: how far the next cycle starts on)

    @property
    def feasible(self) -> tuple[NodeResult, ...]:
        return tuple(n for n in self.nodes if n.feasible)

    @property
    def scoring_skipped(self) -> bool:
        """One feasible node: the scheduler binds it without running PreScore/Score."""
        return len(self.feasible) == 1

    @property
    def affinity_choice(self) -> tuple[str, ...]:
        return _top(self.feasible, lambda n: n.affinity_normalized or 0)

    @property
    def netqos_choice(self) -> tuple[str, ...]:
        return _top(self.feasible, lambda n: n.netqos_score)

    @property
    def scoring_fails(self) -> bool:
        """PreScore runs (several feasible nodes) and fails: no node is chosen this cycle."""
        return self.score_failure is not None and len(self.feasible) > 1

    @property
    def predicted(self) -> tuple[str, ...]:
        """The feasible node(s) with the best total: the scheduler picks one of them at random.
        None when scoring fails: the cycle ends in an error and the pod waits (Pending)."""
        if self.scoring_fails:
            return ()
        return _top(self.feasible, lambda n: n.total or 0)

    def filter_message(self) -> str:
        """The scheduler's FitError text for these nodes: "K/N nodes are available: <reasons>."

        The scheduler only emits it when K is 0 (the FailedScheduling event, which then goes on
        with the preemption outcome, not modelled here). Reasons are grouped with their counts
        and sorted as strings, as FitError.Error does.
        """
        total, feasible = len(self.nodes), len(self.feasible)
        head = f"{feasible}/{total} nodes are available"
        if self.prefilter_failure:
            return f"{head}: {self.prefilter_failure}."
        counts = Counter(r for n in self.nodes for r in n.reasons)
        if not counts:
            return f"{head}."
        return f"{head}: {', '.join(sorted(f'{c} {r}' for r, c in counts.items()))}."


def _top(nodes: Sequence[NodeResult], score: Callable[[NodeResult], int]) -> tuple[str, ...]:
    if not nodes:
        return ()
    best = max(score(n) for n in nodes)
    return tuple(n.name for n in nodes if score(n) == best)


def nodes_scored_at_most(node_count: int, percentage: int = 0) -> int:
    """numFeasibleNodesToFind (schedule_one.go): once this many feasible nodes are found the
    scheduler stops filtering, so only those are scored and normalised against each other.

    `percentage` is percentageOfNodesToScore; 0 (unset) is adaptive: 50% minus 1% per 125 nodes,
    at least 5%. Below 100 nodes every node is evaluated, and never fewer than 100.
    """
    if node_count < MIN_FEASIBLE_NODES_TO_FIND:
        return node_count
    if percentage == 0:
        percentage = max(50 - node_count // 125, MIN_FEASIBLE_NODES_PERCENTAGE)
    return max(node_count * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass(frozen=True)
class Sampling:
    """How a scheduling cycle walks a large cluster (schedule_one.go, findNodesThatPassFilters):
    from nextStartNodeIndex (`start`) round the node list, filtering until it has found
    `nodes_scored_at_most(len(nodes), percentage)` feasible nodes. The scheduler then advances
    nextStartNodeIndex by the nodes it processed (`Ranking.processed`). It filters in parallel,
    so which nodes beyond the first few it has seen when it stops may differ slightly; this walks
    them in order. (kubernetes v1.36.3 pkg/scheduler/schedule_one.go: findNodesThatPassFilters,
    numFeasibleNodesToFind, and `sched.nextStartNodeIndex = (sched.nextStartNodeIndex +
    processedNodes) % len(allNodes)` in findNodesThatFitPod.)"""

    start: int = 0
    percentage: int = 0  # percentageOfNodesToScore; 0: the adaptive default


def is_best_effort(request: Mapping[str, int], resources: Sequence[tuple[str, int]]) -> bool:
    """BalancedAllocation.PreScore skips a pod that requests none of its resources."""
    return not any(request.get(name, 0) for name, _ in resources)


def node_only_filter(
    pod: PodView, nodes: Sequence[Node], profile: Profile = DEFAULT_PROFILE
) -> tuple[str | None, list[tuple[str, ...]]]:
    """NodeAffinity's PreFilter, then `node_only_reasons`, for each node: the PreFilter
    conflict (None when there is none) and each node's reasons, () for a node that passes them.
    What stays to check on a node that passes is `usage_reasons`."""
    allowed = prefilter_node_names(pod)
    conflict = REASON_TERMS_CONFLICT if allowed is not None and not allowed else None
    reasons: list[tuple[str, ...]] = []
    for node in nodes:
        if conflict:
            reasons.append((conflict,))
        elif allowed is not None and node.name not in allowed:
            reasons.append((REASON_NOT_IN_PREFILTER,))
        else:
            reasons.append(node_only_reasons(pod, node, profile))
    return conflict, reasons


def rank(
    pod: PodView,
    nodes: Sequence[Node],
    usage: Mapping[str, NodeUsage] | None = None,
    profile: Profile = DEFAULT_PROFILE,
    sampling: Sampling | None = None,
) -> Ranking:
    """Filter every node for `pod`, then score the feasible ones, as one scheduling cycle would.

    `usage` maps node names to what the pods already there use (none when absent). With
    `sampling`, only the nodes the cycle walks are filtered and shown, in the order it walks them.
    """
    usage = usage or {}
    if sampling is None:
        conflict, node_only = node_only_filter(pod, nodes, profile)
        scanned: Sequence[Node] = nodes
        reasons = [
            why or usage_reasons(pod, node, usage.get(node.name, EMPTY_USAGE))
            for node, why in zip(nodes, node_only, strict=True)
        ]
    else:
        conflict, scanned, reasons = _walk(pod, nodes, usage, profile, sampling)
    preferred = (*pod.preferred, *profile.added_preferred)
    raw = {n.name: preferred_score(preferred, n.labels, n.name) for n in scanned}
    feasible = [n for n, why in zip(scanned, reasons, strict=True) if not why]
    scores, affinity, skipped = _score(pod, feasible, nodes, usage, profile, raw)
    affinity_weight = profile.weights.get(NODE_AFFINITY, 0)
    weights = profile.weights
    results = []
    for node, why in zip(scanned, reasons, strict=True):
        plugin_scores = scores.get(node.name, {})
        norm = affinity.get(node.name)
        results.append(
            NodeResult(
                name=node.name,
                net=node.labels.get(NETQOS_NODE_LABEL),
                reasons=why,
                netqos_score=netqos_score(pod.labels, node.labels),
                affinity_raw=raw[node.name],
                affinity_normalized=norm,
                affinity_weighted=None if norm is None else norm * affinity_weight,
                scores=plugin_scores,
                total=None if why else sum([s * weights[p] for p, s in plugin_scores.items()]),
            )
        )
    score_failure = preferred_terms_problem(pod.preferred, f"spec.affinity.nodeAffinity.{PREFERRED}")
    return Ranking(tuple(results), conflict, dict(profile.weights), skipped, score_failure, len(scanned))


def _walk(
    pod: PodView, nodes: Sequence[Node], usage: Mapping[str, NodeUsage], profile: Profile, sampling: Sampling
) -> tuple[str | None, list[Node], list[tuple[str, ...]]]:
    """The nodes one sampled cycle filters, from `sampling.start` round the list until it has
    found enough feasible ones, with their reasons."""
    allowed = prefilter_node_names(pod)
    conflict = REASON_TERMS_CONFLICT if allowed is not None and not allowed else None
    wanted = nodes_scored_at_most(len(nodes), sampling.percentage)
    scanned: list[Node] = []
    reasons: list[tuple[str, ...]] = []
    found = 0
    for i in range(len(nodes)):
        node = nodes[(sampling.start + i) % len(nodes)]
        if conflict:
            why: tuple[str, ...] = (conflict,)
        elif allowed is not None and node.name not in allowed:
            why = (REASON_NOT_IN_PREFILTER,)
        else:
            why = node_only_reasons(pod, node, profile) or usage_reasons(pod, node, usage.get(node.name, EMPTY_USAGE))
        scanned.append(node)
        reasons.append(why)
        found += not why
        if found >= wanted:
            break
    return conflict, scanned, reasons


def _score(
    pod: PodView,
    feasible: Sequence[Node],
    all_nodes: Sequence[Node],
    usage: Mapping[str, NodeUsage],
    profile: Profile,
    affinity_raw: Mapping[str, int],
) -> tuple[dict[str, dict[str, int]], dict[str, int], tuple[str, ...]]:
    """Each score plugin of `profile` over the feasible nodes, normalised as the plugin does;
    and NodeAffinity's normalised score per feasible node, shown even when not weighed."""
    weights = profile.weights
    columns: dict[str, list[int]] = {}
    skipped: list[str] = []
    use = [usage.get(n.name, EMPTY_USAGE) for n in feasible]
    affinity = default_normalize([affinity_raw[n.name] for n in feasible])
    if TAINT_TOLERATION in weights:
        raw = [intolerable_prefer_no_schedule(pod.tolerations, n.taints) for n in feasible]
        columns[TAINT_TOLERATION] = default_normalize(raw, reverse=True)
    if NODE_AFFINITY in weights:
        columns[NODE_AFFINITY] = affinity
    if NODE_RESOURCES_FIT in weights:
        request = pod.non_zero_requests
        strategy = profile.scoring_strategy
        columns[NODE_RESOURCES_FIT] = [fit_score(request, n, u, strategy) for n, u in zip(feasible, use, strict=True)]
    if BALANCED_ALLOCATION in weights:
        request = pod.requests
        if is_best_effort(request, profile.balanced_resources):
            skipped.append(BALANCED_ALLOCATION)
        else:
            resources = profile.balanced_resources
            columns[BALANCED_ALLOCATION] = [
                balanced_score(request, n, u, resources) for n, u in zip(feasible, use, strict=True)
            ]
    if IMAGE_LOCALITY in weights:
        images = pod.images
        nodes_with = Counter(name for n in all_nodes for name in set(n.images) & set(images))
        columns[IMAGE_LOCALITY] = [image_locality(images, n, nodes_with, len(all_nodes)) for n in feasible]
    if NETQOS in weights:
        columns[NETQOS] = [netqos_score(pod.labels, n.labels) for n in feasible]
    scores = {node.name: {plugin: column[i] for plugin, column in columns.items()} for i, node in enumerate(feasible)}
    return scores, {node.name: affinity[i] for i, node in enumerate(feasible)}, tuple(skipped)
