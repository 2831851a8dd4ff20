"""What a scheduling cycle reads: nodes, the pods (`PodInfo`), what the pods already on a node
take (`NodeUsage`), and the profile that says which plugins run with which weights. Pure data.

Mirrors kube-scheduler's framework types (kubernetes v1.36, pkg/scheduler/framework/types.go:
NodeInfo's Requested, NonZeroRequested, Pods and UsedPorts; PodInfo), as far as they are read here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from webhook.affinity import NodeSelectorTerm, PreferredTerm
from webhook.names import DEFAULT_SCHEDULER, MAX_NODE_SCORE, NAMESPACE_NAME_LABEL
from webhook.resources import CPU, MEMORY, HostPort, PodResources, is_scalar
from webhook.selector import LabelSelector

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


# The creationTimestamp of a Node read without one: before every dated node (`cache_order`).
UNDATED = dt.datetime.min.replace(tzinfo=dt.UTC)


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
    # every name in status.images -> the size in bytes of its first entry; ImageLocality scores by
    # the size the cache keeps for the name, which may be another node's (`plugins.imagelocality.image_states`)
    images: Mapping[str, int] = field(default_factory=dict)
    declared_features: frozenset[str] = frozenset()  # status.declaredFeatures (Kubernetes 1.35+)
    created: dt.datetime = UNDATED  # metadata.creationTimestamp; UNDATED when absent


def cache_order(node: Node) -> tuple[dt.datetime, str]:
    """The order kube-scheduler's cache adds nodes in, as far as the Node objects tell it:
    creationTimestamp, then name. A scheduler running while nodes join adds each as its informer's
    watch delivers it, in creation order. The nodes there when it starts come from its initial
    list, which the API server serves in key order, that is by name (k8s.io/apiserver v0.36.3
    pkg/storage/cacher/store/store_btree.go, the watch cache's btree; watch_cache_interval.go
    newCacheIntervalFromStore, for a watch-list's initial events), and its informer hands them
    on in that order (client-go InOrderInformers, GA in 1.36). creationTimestamp has whole
    seconds, so nodes created within one second tie and go by name, and an UNDATED node (built
    in a test, or a file without the field) comes first, by name, as one listed at start.
    A scheduler that (re)started after such nodes joined added them all by name, which this
    order cannot see."""
    return node.created, node.name


def selects(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector's semantics: a null selector selects nothing, `{}` everything."""
    return selector is not None and selector.matches(labels)


@dataclass(frozen=True)
class SpreadConstraint:
    """A topologySpreadConstraint as PodTopologySpread reads it (its defaults filled in:
    podtopologyspread/common.go filterTopologySpreadConstraints)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule or ScheduleAnyway
    selector: LabelSelector | None  # None: a null labelSelector, which selects no pod
    min_domains: int = 1
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()

    def with_pod_labels(self, labels: Mapping[str, str]) -> SpreadConstraint:
        """matchLabelKeys merged into the selector with the pod's values (mergeLabelSetWithSelector)."""
        matched = tuple((k, labels[k]) for k in self.match_label_keys if k in labels)
        if not matched or self.selector is None:
            return self
        merged = LabelSelector((*matched, *self.selector.match_labels), self.selector.match_expressions)
        return dataclasses.replace(self, selector=merged, match_label_keys=())


@dataclass(frozen=True)
class AffinityTerm:
    """A PodAffinityTerm resolved as framework.AffinityTerm: `namespaces` the pod's own when the
    term names none and has no namespaceSelector (kube-scheduler framework/types.go)."""

    selector: LabelSelector | None  # None: selects no pod
    topology_key: str
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None = None  # None: no namespace by labels

    def matches(self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str]) -> bool:
        """AffinityTerm.Matches: the pod's namespace is named or selected, and its labels selected."""
        if namespace in self.namespaces or selects(self.namespace_selector, namespace_labels):
            return selects(self.selector, labels)
        return False


@dataclass(frozen=True)
class WeightedAffinityTerm:
    weight: int
    term: AffinityTerm


@dataclass(frozen=True)
class PodAffinity:
    """spec.affinity.podAffinity and podAntiAffinity."""

    required: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    preferred: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti: tuple[WeightedAffinityTerm, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.required or self.required_anti or self.preferred or self.preferred_anti)

    @property
    def selects_namespaces(self) -> bool:
        """Whether a term has a namespaceSelector: what it matches depends on the namespaces' labels."""
        weighted = (w.term for w in (*self.preferred, *self.preferred_anti))
        return any(t.namespace_selector is not None for t in (*self.required, *self.required_anti, *weighted))


def namespace_labels(namespaces: Mapping[str, Mapping[str, str]], name: str) -> Mapping[str, str]:
    """A namespace's labels; one not read has the label every namespace carries since 1.21."""
    return namespaces.get(name) or {NAMESPACE_NAME_LABEL: name}


def selects_namespaces(pods: Iterable[PodInfo], usage: Iterable[NodeUsage] = ()) -> bool:
    """Whether the namespaces' labels can change a prediction: a term of one of `pods` (those
    scheduled) or of a pod on a node (`usage`) has a namespaceSelector. Callers read the
    namespaces only then: no other plugin evaluated here reads them."""
    on_nodes = (p for u in usage for p in u.with_affinity)
    return any(p.pod_affinity.selects_namespaces for p in (*pods, *on_nodes))


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
    spread: tuple[SpreadConstraint, ...] = ()  # spec.topologySpreadConstraints
    # helper.DefaultSelector: the selectors of the Services, ReplicationController, ReplicaSet or
    # StatefulSet that select the pod, merged (`read.default_spread_selector`); None when none does
    default_spread: LabelSelector | None = None
    pod_affinity: PodAffinity = PodAffinity()
    terminating: bool = False  # metadata.deletionTimestamp is set: spreading does not count it
    # The features nodes must declare for this pod, by every release's inference
    # (`read.declared_features_needed`); each release's NodeDeclaredFeatures reads those it knows.
    node_features: frozenset[str] = frozenset()

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

    @cached_property
    def labels_key(self) -> LabelsKey:
        """The pod's namespace and labels as a node's counts of its pods key them (`UsageTally`):
        made once per view, which the pods of one template share (`keys.UsageViews`)."""
        return (self.namespace, frozenset(self.labels.items()))


def normalized_image_name(name: str) -> str:
    """imagelocality.normalizedImageName: a name without a tag gets `:latest`."""
    return name if name.rfind(":") > name.rfind("/") else f"{name}:latest"


LabelsKey = tuple[str, frozenset[tuple[str, str]]]  # a pod's namespace and labels


@dataclass(frozen=True)
class NodeUsage:
    """What the pods already on a node take (NodeInfo.Requested, NonZeroRequested, Pods, UsedPorts),
    and who they are as far as the plugins that look at other pods read them: how many pods of each
    namespace and labels, the terminating ones (metadata.deletionTimestamp set) apart, and those
    with pod (anti-)affinity terms. PodTopologySpread leaves terminating pods out of its counts
    (podtopologyspread/common.go countPodsMatchSelector, v1.36.3); InterPodAffinity counts every pod
    of the NodeInfo, terminating or not (`plugins.interpodaffinity`)."""

    requested: Mapping[str, int] = field(default_factory=dict)
    non_zero_requested: Mapping[str, int] = field(default_factory=dict)
    pods: int = 0
    host_ports: tuple[HostPort, ...] = ()
    labelled: Mapping[LabelsKey, int] = field(default_factory=dict)  # pods not terminating
    with_affinity: tuple[PodInfo, ...] = ()
    terminating: Mapping[LabelsKey, int] = field(default_factory=dict)  # terminating pods

    def count(self, namespace: str, selector: LabelSelector | None) -> int:
        """countPodsMatchSelector: the pods of `namespace` that `selector` selects."""
        if selector is None or selector.is_empty():
            return 0  # an empty selector counts nothing here (podtopologyspread/common.go)
        return sum(n for (ns, labels), n in self.labelled.items() if ns == namespace and selector.matches(dict(labels)))


EMPTY_USAGE = NodeUsage()


class UsageTally:
    """A NodeUsage built one pod at a time, so a caller streaming many pods need not hold them."""

    def __init__(self) -> None:
        self.requested: dict[str, int] = {}
        self.non_zero: dict[str, int] = {}
        self.pods = 0
        self.ports: list[HostPort] = []
        self.labelled: dict[LabelsKey, int] = {}
        self.terminating: dict[LabelsKey, int] = {}
        self.with_affinity: list[PodInfo] = []

    def add(self, pod: PodInfo) -> None:
        """Count `pod` (bound to the node) in."""
        self._count(pod, 1)
        self.ports.extend(pod.host_ports)
        if pod.pod_affinity:
            self.with_affinity.append(pod)

    def remove(self, pod: PodInfo) -> None:
        """Count `pod` (counted in before) out: it leaves the node."""
        self._count(pod, -1)
        for port in pod.host_ports:
            self.ports.remove(port)
        if pod.pod_affinity:  # the pod as other pods see it: another view of it may differ elsewhere
            seen = (pod.namespace, pod.labels, pod.pod_affinity)
            found = [i for i, p in enumerate(self.with_affinity) if (p.namespace, p.labels, p.pod_affinity) == seen]
            if found:
                del self.with_affinity[found[0]]

    def _count(self, pod: PodInfo, sign: int) -> None:
        self.pods += sign
        for name, value in pod.requests.items():
            self.requested[name] = self.requested.get(name, 0) + sign * value
        for name in (CPU, MEMORY):
            self.non_zero[name] = self.non_zero.get(name, 0) + sign * pod.non_zero_requests.get(name, 0)
        counts = self.terminating if pod.terminating else self.labelled
        key = pod.labels_key
        count = counts.get(key, 0) + sign
        if count > 0:
            counts[key] = count
        else:  # a view that differs from the pod counted in (its labels changed) takes nothing out
            counts.pop(key, None)

    def usage(self) -> NodeUsage:
        return NodeUsage(
            dict(self.requested),
            dict(self.non_zero),
            self.pods,
            tuple(self.ports),
            dict(self.labelled),
            tuple(self.with_affinity),
            dict(self.terminating),
        )


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


@dataclass(frozen=True)
class Snapshot:
    """What a cycle sees of the cluster besides the pod: every node, what the pods on each take,
    the nodes that passed the filters (PreScore's `filteredNodes`) and the namespaces' labels."""

    nodes: Sequence[Node]
    usage: Mapping[str, NodeUsage]
    feasible: Sequence[Node] = ()
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def usage_of(self, node: Node) -> NodeUsage:
        return self.usage.get(node.name, EMPTY_USAGE)

    @cached_property
    def with_affinity(self) -> tuple[Node, ...]:
        """The nodes running a pod with pod (anti-)affinity terms, in order: all that
        InterPodAffinity reads for a pod without such terms of its own (a snapshot is never
        changed: a what-if move makes a new one)."""
        return tuple(n for n in self.nodes if self.usage_of(n).with_affinity)

    def narrowed(self, feasible: Sequence[Node]) -> Snapshot:
        """This snapshot with `feasible` the nodes that passed the filters. What derives from the
        nodes and their usage alone (`with_affinity`) comes along instead of being derived again
        over every node: a what-if plan narrows a snapshot per pod spec it predicts."""
        narrowed = dataclasses.replace(self, feasible=feasible)
        if "with_affinity" in self.__dict__:
            narrowed.knowing(self.__dict__["with_affinity"])
        return narrowed

    def knowing(self, with_affinity: tuple[Node, ...]) -> Snapshot:
        """This snapshot, told its `with_affinity` by a caller that keeps it as pods move
        (`incremental.World`); it must be what the property would derive."""
        self.__dict__["with_affinity"] = with_affinity  # where cached_property keeps its value
        return self


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
    name, with their weights (`registry.SCORE_PLUGINS` says what each name computes), and the
    plugins' arguments. `registry.DEFAULT_PROFILE` is kube-scheduler's default profile."""

    weights: Mapping[str, int]
    scheduler_name: str = DEFAULT_SCHEDULER
    scoring_strategy: ScoringStrategy = ScoringStrategy()
    balanced_resources: tuple[tuple[str, int], ...] = ((CPU, 1), (MEMORY, 1))
    added_required: tuple[NodeSelectorTerm, ...] | None = None  # NodeAffinityArgs.addedAffinity
    added_preferred: tuple[PreferredTerm, ...] = ()
    # PodTopologySpreadArgs: None is defaultingType System (the system default constraints, which
    # still spread nodes without a zone label by hostname); a tuple is defaultingType List, its
    # defaultConstraints (none: a pod without constraints of its own is not spread at all)
    spread_defaults: tuple[SpreadConstraint, ...] | None = None
    hard_pod_affinity_weight: int = 1  # InterPodAffinityArgs.hardPodAffinityWeight (0: not counted)
    ignore_preferred_terms_of_existing_pods: bool = False  # InterPodAffinityArgs
    # NodeResourcesFitArgs: extended resources its Filter does not check, by name and by the
    # group before their "/"
    ignored_resources: frozenset[str] = frozenset()
    ignored_resource_groups: frozenset[str] = frozenset()
    # plugins of the table whose Filter (or PreFilter) the profile does not run
    disabled_filters: frozenset[str] = frozenset()
    disabled_prefilters: frozenset[str] = frozenset()
    # percentageOfNodesToScore: the profile's when it sets one, else the configuration's; 0 is
    # kube-scheduler's adaptive default (what `cycle.Sampling.percentage` takes)
    percentage_of_nodes_to_score: int = 0
    not_evaluated: tuple[str, ...] = ()  # enabled plugins whose effect is not modelled
    # what the scheduler configuration says that is not evaluated here, each "where: what"
    # (`config.settings_not_evaluated` explains them; explain, status and rebalance name them)
    settings_not_evaluated: tuple[str, ...] = ()
    # plugin name -> the entry of `registry.SCORE_PLUGINS` or `registry.FILTER_PLUGINS` that runs
    # it, when not the one of that name (a Kubernetes release's variant: `registry.for_version`)
    variants: Mapping[str, str] = field(default_factory=dict)

    def with_plugin(self, name: str, weight: int) -> Profile:
        """The same profile with the Score plugin `name` at `weight` (added, or re-weighed)."""
        return dataclasses.replace(self, weights=MappingProxyType({**self.weights, name: weight}))
