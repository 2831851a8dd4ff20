"""What a scheduling cycle reads: nodes, the pods (`PodInfo`), what the pods already on a node
take (`NodeUsage`), and the profile that says which plugins run with which weights. Pure data.

Mirrors kube-scheduler's framework types (kubernetes v1.36, pkg/scheduler/framework/types.go:
NodeInfo's Requested, NonZeroRequested, Pods and UsedPorts; PodInfo), as far as they are read here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from webhook.affinity import NodeSelectorTerm, PreferredTerm
from webhook.names import DEFAULT_SCHEDULER, MAX_NODE_SCORE
from webhook.resources import CPU, MEMORY, HostPort, PodResources, is_scalar

__all__ = ["DEFAULT_SCHEDULER", "MAX_NODE_SCORE"]


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
        """v1.Toleration.ToleratesTaint (staging/src/k8s.io/api/core/v1/toleration.go)."""
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
    # status.allocatable in scheduler units (cpu in millicores); a Node object without it reads as
    # {}: nothing is allocatable there, so no pod fits (explain says why). None: a model built
    # without resources (tests of other plugins), whose fit is not evaluated.
    allocatable: Mapping[str, int] | None = None
    images: Mapping[str, int] = field(default_factory=dict)  # every name in status.images -> size in bytes


@dataclass(frozen=True)
class PodInfo:
    """The pod fields scheduling reads (framework.PodInfo)."""

    name: str
    labels: Mapping[str, str]
    node_selector: Mapping[str, str]
    required: tuple[NodeSelectorTerm, ...] | None  # None: no requiredDuringScheduling...
    preferred: tuple[PreferredTerm, ...]
    tolerations: tuple[Toleration, ...]
    node_name: str = ""
    namespace: str = "default"
    resources: PodResources = PodResources()  # requests, non-zero requests, host ports
    # ImageLocality's images: init containers', containers', then image volumes' references
    images: tuple[str, ...] = ()
    containers: int = 0  # init and app containers: ImageLocality's scale (image volumes not counted)
    scheduler_name: str = DEFAULT_SCHEDULER
    phase: str = ""
    owner_kinds: tuple[str, ...] = ()
    uses: frozenset[str] = frozenset()  # features whose plugins are not evaluated (`read.pod_info`)

    @property
    def requests(self) -> Mapping[str, int]:
        """PodRequests: what NodeResourcesFit's Filter and the node's Requested count."""
        return self.resources.requests

    @property
    def non_zero_requests(self) -> Mapping[str, int]:
        """The node's NonZeroRequested share: 100m / 200Mi where a container names no cpu / memory."""
        return self.resources.non_zero_requests

    @property
    def scored_requests(self) -> Mapping[str, int]:
        """What the resource scorers count of the pod being scheduled (non-zero cpu and memory)."""
        return self.resources.scored_requests

    @cached_property
    def scalar_requests(self) -> tuple[str, ...]:
        """The extended resources and hugepages the pod requests, sorted (Fit's reason order)."""
        return tuple(sorted(name for name in self.requests if is_scalar(name)))

    @property
    def host_ports(self) -> tuple[HostPort, ...]:
        """The host ports of the app containers and the sidecars (util.GetHostPorts)."""
        return self.resources.host_ports


def normalized_image_name(name: str) -> str:
    """imagelocality.normalizedImageName: a name without a tag gets `:latest`."""
    return name if name.rfind(":") > name.rfind("/") else f"{name}:latest"


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

    def add(self, pod: PodInfo) -> None:
        """Count `pod` (bound to the node) in."""
        self.pods += 1
        for name, value in pod.requests.items():
            self.requested[name] = self.requested.get(name, 0) + value
        for name in (CPU, MEMORY):
            self.non_zero[name] = self.non_zero.get(name, 0) + pod.non_zero_requests.get(name, 0)
        self.ports.extend(pod.host_ports)

    def remove(self, pod: PodInfo) -> None:
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


def usage_of(pods: Iterable[PodInfo]) -> NodeUsage:
    """The usage of a node by `pods` (all bound to it)."""
    tally = UsageTally()
    for pod in pods:
        tally.add(pod)
    return tally.usage()


def usage_by_node(pods: Iterable[PodInfo]) -> dict[str, NodeUsage]:
    """Each node's usage by the pods bound to it and not finished (Succeeded or Failed)."""
    by_node: dict[str, list[PodInfo]] = {}
    for pod in pods:
        if pod.node_name and pod.phase not in ("Succeeded", "Failed"):
            by_node.setdefault(pod.node_name, []).append(pod)
    return {name: usage_of(on_node) for name, on_node in by_node.items()}


@dataclass(frozen=True)
class Target:
    """The nodes a latency-sensitive pod belongs on: those whose label `key` has one of `values`
    (the policy's top-scoring values; `net=high` by default)."""

    key: str
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return labels.get(self.key) in self.values

    def describe(self, node: Node) -> str:
        """The node by name and its value of the key: "n1 (net=low)", "n2 (no net label)"."""
        value = node.labels.get(self.key)
        return f"{node.name} ({self.key}={value})" if value is not None else f"{node.name} (no {self.key} label)"

    def __str__(self) -> str:  # as a label selector: net=high, net in (high,fast)
        values = sorted(self.values)
        return f"{self.key}={values[0]}" if len(values) == 1 else f"{self.key} in ({','.join(values)})"


# ---------------------------------------------------------------------------------------------
# The profile: which plugins run, with which weights and arguments


@dataclass(frozen=True)
class ScoringStrategy:
    """NodeResourcesFitArgs.scoringStrategy."""

    type: str = "LeastAllocated"  # or MostAllocated, RequestedToCapacityRatio
    resources: tuple[tuple[str, int], ...] = ((CPU, 1), (MEMORY, 1))
    shape: tuple[tuple[int, int], ...] = ()  # (utilization, score 0-10) for RequestedToCapacityRatio


@dataclass(frozen=True)
class Profile:
    """A KubeSchedulerProfile, as far as it is evaluated here: the Score plugins that run, by
    name, with their weights (`plugins.SCORE_PLUGINS` says what each name computes), and the
    plugins' arguments. `plugins.DEFAULT_PROFILE` is kube-scheduler's default profile."""

    weights: Mapping[str, int]
    scheduler_name: str = DEFAULT_SCHEDULER
    scoring_strategy: ScoringStrategy = ScoringStrategy()
    balanced_resources: tuple[tuple[str, int], ...] = ((CPU, 1), (MEMORY, 1))
    added_required: tuple[NodeSelectorTerm, ...] | None = None  # NodeAffinityArgs.addedAffinity
    added_preferred: tuple[PreferredTerm, ...] = ()
    not_evaluated: tuple[str, ...] = ()  # enabled plugins whose effect is not modelled
    # plugin name -> the `plugins.SCORE_PLUGINS` entry that scores it, when not the one of that name
    variants: Mapping[str, str] = field(default_factory=dict)

    def with_plugin(self, name: str, weight: int) -> Profile:
        """The same profile with the Score plugin `name` at `weight` (added, or re-weighed)."""
        return dataclasses.replace(self, weights=MappingProxyType({**self.weights, name: weight}))
