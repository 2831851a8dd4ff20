"""The Filter plugins' checks, and NodeAffinity's PreFilter: each answers why a node cannot take
the pod, in kube-scheduler's words (the reasons that make up "0/N nodes are available"), () when
it can. Which run, in which order, is `plugins.FILTER_PLUGINS`.

Sources (kubernetes/kubernetes v1.36): pkg/scheduler/framework/plugins/{nodeunschedulable,
nodename,tainttoleration,nodeaffinity,nodeports,noderesources/fit.go}, pkg/scheduler/framework/
types.go (HostPortInfo), staging/src/k8s.io/component-helpers/scheduling/corev1/{helpers.go,
nodeaffinity/nodeaffinity.go}.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from webhook.affinity import NODE_NAME_FIELD, node_selector_matches
from webhook.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, HostPort, is_scalar
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Profile, Taint, Toleration
from webhook.validation import is_qualified_name

# Reasons, verbatim from kube-scheduler (the Filter statuses that make up "0/N nodes are available").
REASON_UNSCHEDULABLE = "node(s) were unschedulable"  # nodeunschedulable.ErrReasonUnschedulable
REASON_NODE_NAME = "node(s) didn't match the requested node name"  # nodename.ErrReason
REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"  # nodeaffinity.ErrReasonPod
REASON_ENFORCED_AFFINITY = "node(s) didn't match scheduler-enforced node affinity"  # nodeaffinity.errReasonEnforced
REASON_NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"  # nodeports.ErrReason
REASON_TOO_MANY_PODS = "Too many pods"  # noderesources: InsufficientResource for pods
# nodedeclaredfeatures.errReasonUnsatisfiedRequirements
REASON_UNDECLARED_FEATURES = "node(s) didn't match Pod's required features"
# Nodes left out by NodeAffinity's PreFilter (schedule_one.go, SetAbsentNodesStatus).
REASON_NOT_IN_PREFILTER = "node(s) didn't satisfy plugin(s) [NodeAffinity]"


def not_in_prefilter(plugins: Sequence[str]) -> str:
    """The reason of a node the PreFilters of `plugins` left out (schedule_one.go
    findNodesThatFitPod, SetAbsentNodesStatus: the plugins' names sorted, as Go prints a slice)."""
    return f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(plugins))}]"


def no_node_in_prefilter(plugins: Sequence[str]) -> str:
    """The PreFilter failure when the node names of `plugins` have no node in common
    (framework/runtime/framework.go RunPreFilterPlugins)."""
    if len(plugins) == 1:
        return f"node(s) didn't satisfy plugin {plugins[0]}"
    return f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(plugins))}] simultaneously"


# NodeAffinity's PreFilter when the required terms name disjoint sets of nodes.
REASON_TERMS_CONFLICT = "pod affinity terms conflict"

# NodeUnschedulable lets a pod onto a cordoned node if it tolerates this taint.
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
FILTER_EFFECTS = ("NoSchedule", "NoExecute")  # helper.DoNotScheduleTaintsFilterFunc


def untolerated_taint_reason(taint: Taint) -> str:
    """TaintToleration's reason, naming the first untolerated taint.

    This is the wording of kube-scheduler up to v1.34. From v1.35 (kubernetes/kubernetes#134740,
    backported to v1.34 patch releases) the scheduler writes "node(s) had untolerated taint(s)"
    and logs the taint instead, to keep taint values out of pod status; explain reads nodes the
    user can read anyway, so it names the taint.
    """
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


def undeclared_features(needed: frozenset[str], node: Node) -> tuple[str, ...]:
    """NodeDeclaredFeatures.Filter: the node declares every feature the pod needs
    (plugins/nodedeclaredfeatures/nodedeclaredfeatures.go, v1.36.3 and v1.37.2)."""
    return () if needed <= node.declared_features else (REASON_UNDECLARED_FEATURES,)


def named_node(pod: PodInfo) -> frozenset[str] | None:
    """NodeName.PreFilter from Kubernetes 1.37 (plugins/nodename/node_name.go, v1.37.2): a pod
    with spec.nodeName is filtered on that node only."""
    return frozenset({pod.node_name}) if pod.node_name else None


def prefilter_node_names(pod: PodInfo) -> frozenset[str] | None:
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


# Each Filter plugin: (pod, node, what the pods on the node take, profile) -> reasons.


def node_unschedulable(pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile) -> tuple[str, ...]:
    """NodeUnschedulable: a cordoned node, unless the pod tolerates the unschedulable taint."""
    taint = Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")
    if node.unschedulable and not any(t.tolerates(taint) for t in pod.tolerations):
        return (REASON_UNSCHEDULABLE,)
    return ()


def node_name(pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile) -> tuple[str, ...]:
    """NodeName: a pod with spec.nodeName fits that node only."""
    return (REASON_NODE_NAME,) if pod.node_name and pod.node_name != node.name else ()


def taint_toleration(pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile) -> tuple[str, ...]:
    """TaintToleration: the first NoSchedule or NoExecute taint the pod does not tolerate."""
    taint = first_untolerated_taint(pod.tolerations, node.taints)
    return (untolerated_taint_reason(taint),) if taint is not None else ()


def node_affinity(pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile) -> tuple[str, ...]:
    """NodeAffinity: the profile's addedAffinity, then the pod's node selector and required terms."""
    if profile.added_required is not None and not node_selector_matches(profile.added_required, node.labels, node.name):
        return (REASON_ENFORCED_AFFINITY,)
    return () if required_affinity_matches(pod, node) else (REASON_NODE_AFFINITY,)


def node_ports(pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile) -> tuple[str, ...]:
    """NodePorts: no host port of the pod conflicts with one in use on the node."""
    return () if ports_fit(pod.host_ports, usage.host_ports) else (REASON_NODE_PORTS,)


def node_resources_fit(pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile) -> tuple[str, ...]:
    """NodeResourcesFit: every resource the node lacks for the pod, but the extended resources
    its args ignore (`checked_scalars`)."""
    scalars = pod.scalar_requests
    if profile.ignored_resources or profile.ignored_resource_groups:
        scalars = checked_scalars(scalars, profile.ignored_resources, profile.ignored_resource_groups)
    return insufficient_resources(pod.requests, node.allocatable, usage, scalars)


def checked_scalars(scalars: Sequence[str], ignored: frozenset[str], ignored_groups: frozenset[str]) -> tuple[str, ...]:
    """The scalar resources NodeResourcesFit's Filter checks: an extended resource is skipped when
    NodeResourcesFitArgs.ignoredResources names it or ignoredResourceGroups names the part of its
    name before "/" (noderesources/fit.go fitsRequest, v1.36.3); hugepages and
    `kubernetes.io/` resources are never skipped."""
    return tuple(
        name
        for name in scalars
        if not (is_extended_resource(name) and (name in ignored or name.split("/", 1)[0] in ignored_groups))
    )


def is_extended_resource(name: str) -> bool:
    """v1helper.IsExtendedResourceName (pkg/apis/core/v1/helper/helpers.go, v1.36.3): a name with
    a "/" outside the kubernetes.io/ namespace, not `requests.`-prefixed, that is a qualified name
    once prefixed so."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return not is_qualified_name(f"requests.{name}")


def first_untolerated_taint(tolerations: Sequence[Toleration], taints: Sequence[Taint]) -> Taint | None:
    """FindMatchingUntoleratedTaint over the NoSchedule and NoExecute taints, in node order."""
    for taint in taints:
        if taint.effect in FILTER_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def required_affinity_matches(pod: PodInfo, node: Node) -> bool:
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

    A Node object without status.allocatable reads as {}: nothing allocatable, as NodeInfo's zero
    Allocatable, so no pod fits it (Too many pods). None (a model built without resources) is not
    checked. `scalars`: the scalar resources of `request`, sorted, when the caller has them already.
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
