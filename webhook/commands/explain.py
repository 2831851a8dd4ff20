"""`netqos-webhook explain`: read the pod, the nodes and the pods on them (files or a cluster),
explain with `webhook.explain`, print a table or JSON.

Nodes and pods come from files or, without --nodes, from the cluster (--kubeconfig, else $KUBECONFIG,
else ~/.kube/config) through `webhook.commands.clusterread`, which returns the same API data over
one connection per run; everything after reading is shared.

The namespaces' labels, which pod affinity's namespaceSelectors match, are read only when a term of
the pod or of a pod on the nodes has a namespaceSelector (no other plugin evaluated reads them, and
a cluster may hold thousands of namespaces): the Namespace objects of the --pods file, else, in
live mode, one list of the cluster's. Without them (none given, or RBAC forbids the list) each
namespace has its `kubernetes.io/metadata.name` label alone, and a note says so.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TextIO, TypeVar

from webhook import documents, owners, status, workloads
from webhook.affinity import PreferredTerm
from webhook.apidata import ShapeError, describe, show
from webhook.commands import clusterread, flags, typed
from webhook.commands.tables import aligned
from webhook.documents import OBJECT_LIMIT, Place, read_document, read_documents
from webhook.errors import NetqosError
from webhook.explain import ExplainError, Explanation, explain, sentence
from webhook.kubeversion import NEWEST, KubeVersion, nearest, parse
from webhook.manifests import check_namespace
from webhook.names import DEFAULT_NAMESPACE, DEFAULT_NETQOS_WEIGHT
from webhook.policy import Decision, Policy
from webhook.policy_file import load_policy
from webhook.scheduler.config import SchedulerConfigError, profile_for
from webhook.scheduler.cycle import NodeResult
from webhook.scheduler.keys import UsageFold
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Profile, selects_namespaces
from webhook.scheduler.read import (
    NO_SELECTORS,
    Selectors,
    namespace_info,
    node_info,
    pod_info,
    pod_problem,
    selectors_from_api,
)
from webhook.scheduler.registry import (
    BALANCED_ALLOCATION,
    DEFAULT_PROFILE,
    IMAGE_LOCALITY,
    INTER_POD_AFFINITY,
    NODE_AFFINITY,
    NODE_RESOURCES_FIT,
    POD_TOPOLOGY_SPREAD,
    TAINT_TOLERATION,
    for_version,
)
from webhook.scheduler.sampling import Landing

HELP = "Predict the node the stock kube-scheduler picks for a pod the webhook mutated, beside the NetQoS scheduler's."
EXAMPLE = "netqos-webhook explain --pod deploy/examples/test-pod.yaml --nodes deploy/examples/nodes.yaml"
DESCRIPTION = """\
Run a pod through the webhook's policy exactly as /mutate would, then filter and score the
nodes as kube-scheduler does, given the pods already on them: cordons, node name, taints,
node selector and required node affinity, host ports, resource fit, topology spread and pod
(anti-)affinity; then the score plugins TaintToleration, NodeAffinity, NodeResourcesFit,
PodTopologySpread (the pod's constraints, or the default spreading from the pods its Services
and controller select: read from the cluster, or from Service and ReplicaSet documents in
--pods), InterPodAffinity, NodeResourcesBalancedAllocation and ImageLocality, each normalised
and weighted, and the total. The predicted node is the best total. Beside it, the NetQoS
scheduler's prediction: the same profile plus the NetQoS plugin (net=high 100, other or no
label 10, net=low 0; weight --netqos-weight) for the pod without the injected terms. The
volume plugins are not evaluated; the output says so.

The pod is a file (--pod) or TYPE/NAME of the cluster: a pod, or a workload whose controller
creates the pod from its template. A pod that has been through the cluster (read live, or saved
with kubectl get -o yaml) is explained as it was before admission and scheduling: without
spec.nodeName, status, metadata.uid, resourceVersion and managedFields, and without the terms
the webhook injected (the rules its netqos.io/injected annotation names); a note says so.
"""
EPILOG = f"""\
examples:
  # the experiment of the NetQoS scheduler plugin: minikube (net=low) and fake-node-1 (net=high, tainted)
  {EXAMPLE}

  # against the nodes of a live cluster (kubeconfig: --kubeconfig, else $KUBECONFIG, else ~/.kube/config), as JSON
  netqos-webhook explain --pod pod.yaml --context minikube -o json

  # a pod of the cluster, judged as it was before admission and scheduling; a Deployment's next pod
  netqos-webhook explain pod/api-7d9f4c-x2x8q -n shop
  netqos-webhook explain deployment/api -n shop

  # the example of a full fast node: the pod still lands, on a slower node
  netqos-webhook explain --pod deploy/examples/full-cluster/pod.yaml \\
      --nodes deploy/examples/full-cluster/nodes.yaml --pods deploy/examples/full-cluster/pods.yaml

  # the files can be any kubectl output
  kubectl get nodes -o yaml > nodes.yaml; kubectl get pods -A -o yaml > pods.yaml
"""

T = TypeVar("T")
# Kinds a pods file may hold beside Pods: what PodTopologySpread's default constraints read, and
# the Namespaces whose labels pod affinity's namespaceSelectors match.
SELECTOR_KINDS = ("Service", "ReplicationController", "ReplicaSet", "StatefulSet")
NAMESPACE = "Namespace"
NAMESPACES_FORBIDDEN = (
    "cannot list namespaces (forbidden by RBAC): pod affinity's namespaceSelector is matched against each "
    "namespace's kubernetes.io/metadata.name label alone"
)
NAMESPACES_MISSING = (
    "no Namespace objects were given: pod affinity's namespaceSelector is matched against each namespace's "
    "kubernetes.io/metadata.name label alone; add them to the --pods file (kubectl get namespaces -o yaml)"
)
Labels = dict[str, dict[str, str]]  # namespace name -> its labels
TOO_MANY_PODS = "explain a smaller cluster, or give --nodes and --pods files"


@dataclass(frozen=True)
class ExplainArgs(flags.ClusterArgs):
    """What `explain` is asked to do: the files to read or the cluster to ask (live mode, without
    --nodes: `flags.ClusterArgs`), and the output."""

    pod: str | None = None  # a pod file; None: `resource` names the pod or workload in the cluster
    resource: str | None = None  # TYPE/NAME: pod/NAME, deployment/NAME, ... read from the cluster
    namespace: str | None = None  # of `resource`; None: the context's, as kubectl's -n
    nodes: str | None = None  # a nodes file; None: list them from the cluster (live mode)
    pods: str | None = None  # the pods already on the nodes; live mode lists them when None
    scheduler_config: str | None = None
    netqos_weight: int | None = None  # None: the policy's schedulerWeights.netqos
    output: str = "table"
    config: str | None = None  # the policy file; None: the built-in policy
    webhook_namespace: str = DEFAULT_NAMESPACE  # excluded by the registration, as kube-system is
    kubernetes_version: str | None = None  # whose scheduler to compute as; None: the cluster's, else the newest

    @property
    def live(self) -> bool:
        """Read the nodes and pods from a cluster, found as `register` and `status` find it
        (--kubeconfig, else $KUBECONFIG, else ~/.kube/config): whenever --nodes is not given."""
        return self.nodes is None


def add_command(sub: flags.Subcommands) -> None:
    p = flags.command(sub, "explain", HELP, EXAMPLE, _main)
    p.description = DESCRIPTION
    p.epilog = EPILOG
    p.add_argument(
        "resource",
        nargs="?",
        metavar="TYPE/NAME",
        help="a pod or workload of the cluster, as kubectl names it: pod/NAME (pods/NAME, po/NAME, or NAME alone), "
        "or deployment/NAME, statefulset/NAME, "
        "replicaset/NAME, replicationcontroller/NAME, job/NAME, cronjob/NAME for the pod its controller creates "
        "from the template; read through --kubeconfig/--context, judged against the cluster's nodes and pods",
    )
    p.add_argument(
        "-n",
        "--namespace",
        metavar="NS",
        help="the namespace of TYPE/NAME (default: the kubeconfig context's namespace, else default, as kubectl)",
    )
    p.add_argument(
        "--pod",
        metavar="FILE",
        help="the Pod manifest (YAML or JSON) to explain, or a pod saved from the cluster (kubectl get pod NAME -o "
        "yaml), explained as it was before admission and scheduling",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--nodes",
        metavar="FILE",
        help="Node objects (YAML or JSON): one Node, several documents, or a List (kubectl get nodes -o yaml)",
    )
    flags.cluster(p, "read the nodes and pods from the cluster of ", exclusive=source)
    p.add_argument(
        "--pods",
        metavar="FILE",
        help="the pods already on the nodes: Pods, or a List (kubectl get pods -A -o yaml); pods not bound to a "
        "listed node, Succeeded or Failed are ignored (default: none with --nodes, the cluster's otherwise); "
        "Namespace objects beside them give the labels pod affinity's namespaceSelectors match",
    )
    p.add_argument(
        "--scheduler-config",
        metavar="FILE",
        help="a KubeSchedulerConfiguration (v1): the profile of the pod's schedulerName, its plugins, weights and "
        "plugin args (default: the default profile); what it sets that is not evaluated is named in the notes",
    )
    flags.number(
        p,
        "--netqos-weight",
        1,
        100,
        None,
        "the NetQoS plugin's weight in the NetQoS scheduler's profile; default: the policy's "
        f"schedulerWeights.netqos ({DEFAULT_NETQOS_WEIGHT} unless set)",
    )
    p.add_argument(
        "--kubernetes-version",
        metavar="V",
        help="score as kube-scheduler of this Kubernetes version does (1.34 to 1.37; the default profile's "
        "NodeResourcesBalancedAllocation changed in 1.36); default: the cluster's own (its /version) with "
        f"--kubeconfig/--context, else the newest known, {NEWEST}",
    )
    flags.output(p, ("table", "json"), "output format (default: table)")
    flags.config(p)
    flags.webhook_namespace(p)


def _main(parsed: argparse.Namespace, out: TextIO) -> int:
    try:
        return run(typed(ExplainArgs, parsed), out)
    except NetqosError as err:  # the policy's, the cluster's and the files' errors alike
        raise NetqosError(sentence(str(err)), err.exit_code) from None


def run(args: ExplainArgs, out: TextIO, policy: Policy | None = None) -> int:
    """Explain the pod `args` names under `policy` (None: the policy of `args.config`) and write it
    to `out`; 0 when done.

    Raises ExplainError for unusable input and clusterread.ClusterError when the cluster cannot be
    read; the CLI turns them into its one-line errors. Without --nodes (`args.live`) everything
    the cluster holds is read through one `clusterread.reader`: one connection per run.
    """
    if args.nodes is not None and (args.kubeconfig is not None or args.context is not None):
        raise ExplainError("the nodes come from --nodes or from a cluster (--kubeconfig, --context): give one")
    check_namespace(args.webhook_namespace)
    if policy is None:
        policy = load_policy(args.config)
    if not args.live:
        return _explain(args, out, policy, None)
    with clusterread.reader(args, max_pages=clusterread.MAX_POD_PAGES) as reader:
        return _explain(args, out, policy, reader)


def _explain(args: ExplainArgs, out: TextIO, policy: Policy, reader: clusterread.Reader | None) -> int:
    """`run`, reading the cluster through `reader` in live mode (None: the files)."""
    pod, pod_source = _the_pod(args, reader)
    nodes = _nodes(args, reader)
    pods, usage, selectors, given = _pods(args, reader, pod)
    namespaces, namespace_note = _namespaces(args, reader, pod, pods, usage, given)
    version, version_note = _version(args, reader)
    profile = for_version(_profile(args.scheduler_config, pod), version)
    report = explain(
        policy,
        pod,
        nodes,
        pod_source=pod_source,
        pods=pods,
        profile=profile,
        selectors=selectors,
        netqos_weight=policy.weights.netqos if args.netqos_weight is None else args.netqos_weight,
        pods_given=args.pods is not None or args.live,
        webhook_namespace=args.webhook_namespace,
        notes=tuple(note for note in (version_note, namespace_note) if note),
        usage=usage,
        namespaces=namespaces,
    )
    out.write(render_json(report) if args.output == "json" else render_table(report))
    return 0


def _the_pod(args: ExplainArgs, reader: clusterread.Reader | None) -> tuple[dict[str, Any], str]:
    """The pod to explain and where it came from, for messages: the --pod file, or the pod or
    the workload's pod TYPE/NAME names in the cluster (`pod_of_resource`)."""
    if (args.pod is None) == (args.resource is None):
        raise ExplainError(
            "give the pod to explain: TYPE/NAME of the cluster (pod/NAME, deployment/NAME, ...) or --pod FILE, one"
        )
    if args.pod is not None:
        if args.namespace is not None:
            raise ExplainError(
                f"-n names the namespace of TYPE/NAME; pod file {args.pod} says its own (metadata.namespace)"
            )
        return load_pod(args.pod), f"pod file {args.pod}"
    assert args.resource is not None
    if reader is None:
        raise ExplainError(
            f"{args.resource} is read from the cluster, and explained against its nodes and pods: drop --nodes, or "
            "save the pod (kubectl get pod NAME -o yaml) and give it with --pod"
        )
    kind, name = resource_kind(args.resource)
    namespace = args.namespace or reader.cluster.namespace
    check_namespace(namespace)
    obj = clusterread.named_object(reader, kind, name, namespace)
    source = f"{args.resource} in namespace {namespace} ({_where(args)})"
    if obj is None:
        raise ExplainError(
            f"{kind.lower()} {name} not found in namespace {namespace} ({_where(args)}); "
            f"list them: kubectl -n {namespace} get {kind.lower()}s"
        )
    return pod_of_resource(kind, obj, source), source


# kubectl's names for the kinds explain reads (plural, singular, short), by kind.
RESOURCE_NAMES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "Pod": ("pods", "pod", "po"),
        "Deployment": ("deployments", "deployment", "deploy"),
        "StatefulSet": ("statefulsets", "statefulset", "sts"),
        "ReplicaSet": ("replicasets", "replicaset", "rs"),
        "ReplicationController": ("replicationcontrollers", "replicationcontroller", "rc"),
        "Job": ("jobs", "job"),
        "CronJob": ("cronjobs", "cronjob", "cj"),
    }
)


def resource_kind(resource: str) -> tuple[str, str]:
    """The kind and name of TYPE/NAME, TYPE as kubectl spells it (pod, po, deployment, deploy, ...,
    with or without its API group: deployments.apps); NAME alone is a pod's, as `kubectl describe
    pod NAME` and `kubectl logs NAME` take it."""
    if "/" not in resource and resource:
        return "Pod", resource
    type_, _, name = resource.partition("/")
    type_ = type_.lower().partition(".")[0]
    kind = next((k for k, names in RESOURCE_NAMES.items() if type_ in names), None)
    if kind is None or not name or "/" in name:
        known = ", ".join(f"{names[1]}/NAME" for names in RESOURCE_NAMES.values())
        raise ExplainError(f"{resource!r} is not TYPE/NAME of a kind explain reads: {known}")
    return kind, name


def pod_of_resource(kind: str, obj: dict[str, Any], source: str) -> dict[str, Any]:
    """The pod itself, or the pod a workload's controller creates from its template
    (`workloads.pod_of`, as `review` makes it)."""
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", **obj}
    found = workloads.kind_of(obj) or next(k for k in workloads.KINDS if k.kind == kind)
    try:
        return workloads.pod_of(obj, found)
    except workloads.NotAWorkload as err:
        raise ExplainError(f"{source}: {err}") from None


def _version(args: ExplainArgs, reader: clusterread.Reader | None) -> tuple[KubeVersion, str | None]:
    """The Kubernetes version to score as, and the note that says which and why when it is not
    the newest (whose scores are the ones every other note and document shows)."""
    if args.kubernetes_version is not None:
        version, source = parse(args.kubernetes_version), "--kubernetes-version"
    elif reader is not None:
        found = clusterread.server_version(reader)
        if found.version is None:
            return NEWEST, f"scored as kube-scheduler {NEWEST} scores, the newest known ({found.said})"
        version, source = found.version, found.said
    else:
        version, source = NEWEST, "the newest known; --kubernetes-version to choose"
    known, outside = nearest(version)
    if known == NEWEST and not outside:
        return known, None
    note = f"scored as kube-scheduler {known} scores ({source})"
    return known, f"{note}; {outside}" if outside else note


def _where(args: ExplainArgs) -> str:
    return clusterread.where(args)


def _nodes(args: ExplainArgs, reader: clusterread.Reader | None) -> list[Node]:
    if reader is None:
        assert args.nodes is not None
        return load_nodes(args.nodes)
    return nodes_from_api(reader.restarting(lambda: list(clusterread.nodes(reader))), _where(args))


def _pods(
    args: ExplainArgs, reader: clusterread.Reader | None, pod: dict[str, Any]
) -> tuple[list[PodInfo], Mapping[str, NodeUsage] | None, Selectors, Labels]:
    """The pods on the nodes (from the pods file), or in live mode what they take of each node,
    folded as the cluster's pods arrive (None where the pods are read); the Services and
    controllers that select the pod: from the pods file (its Service, ReplicaSet, ... documents),
    else from the cluster in live mode; and the labels of the pods file's Namespaces."""
    if args.pods:
        objects = _objects(args.pods, "pods")
        source = f"pods file {args.pods}"
        return _pods_from(objects, source), None, _selectors_from(objects), _namespaces_from(objects, source)
    if reader is None:
        return [], None, NO_SELECTORS, {}
    source = _where(args)
    meta = pod.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    itself = (_namespace_of(pod), str(meta.get("name") or meta.get("generateName") or ""))

    def new() -> _LiveUsage:
        return _LiveUsage(source, UsageFold(leave_out=itself))

    # memory holds one page of API JSON and a tally per node, never every pod (150,000 pods
    # decoded whole are about 2.5 GB); the pods of one template are read once
    fold = clusterread.fold_bound_pods(reader, new, TOO_MANY_PODS)
    selectors = clusterread.spread_selectors(reader, _namespace_of(pod), _controller_of(pod))
    return [], fold.usage.usage(), selectors, {}


def _namespaces(
    args: ExplainArgs,
    reader: clusterread.Reader | None,
    pod: dict[str, Any],
    pods: Sequence[PodInfo],
    usage: Mapping[str, NodeUsage] | None,
    given: Labels,
) -> tuple[Labels, str | None]:
    """The namespaces' labels for pod affinity's namespaceSelectors, and a note when they are not
    known: those of the pods file (`given`), else in live mode the cluster's, listed only when a
    term of the pod or of a pod on the nodes has a namespaceSelector."""
    if given or not selects_namespaces((*_own_view(pod), *pods), (usage or {}).values()):
        return given, None
    if reader is None:
        return {}, NAMESPACES_MISSING
    try:
        listed = reader.restarting(lambda: clusterread.namespaces(reader))
    except ShapeError as err:
        raise ExplainError(f"{_where(args)}: a Namespace: {err}; no API server stores such an object") from None
    if isinstance(listed, status.Unknown):
        return {}, NAMESPACES_FORBIDDEN
    return listed, None


def _own_view(pod: dict[str, Any]) -> tuple[PodInfo, ...]:
    """The pod as scheduling reads it; none when it cannot be read (`explain` says why)."""
    try:
        return (pod_info(pod),)
    except ShapeError:
        return ()


def _namespaces_from(objects: Sequence[tuple[str, Any]], source: str) -> Labels:
    """The labels of the Namespace objects among `objects`, by name."""
    found = [(p, o) for p, o in objects if isinstance(o, dict) and o.get("kind") == NAMESPACE]
    return dict(_read_objects(found, source, NAMESPACE, namespace_info))


@dataclass
class _LiveUsage:
    """The cluster's pods folded into each node's usage; a pod of the wrong shape is an
    ExplainError naming the item and the field."""

    source: str
    usage: UsageFold

    def add(self, index: int, item: Any) -> None:
        _read_object(f"items[{index}].", item, self.source, "Pod", self.usage.add)


def _namespace_of(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    return namespace if isinstance(namespace, str) and namespace else "default"


def _controller_of(pod: dict[str, Any]) -> owners.Owner | None:
    """The pod's controller (`owners.controller_of`); None for a pod whose ownerReferences cannot
    be read, which `explain` reports on its own when it reads the pod."""
    try:
        return owners.controller_of(pod)
    except ShapeError:
        return None


def _selectors_from(objects: Sequence[tuple[str, Any]]) -> Selectors:
    kept = [obj for _, obj in objects if isinstance(obj, dict) and obj.get("kind") in SELECTOR_KINDS]
    return selectors_from_api([o for o in kept if o.get("kind") == "Service"], kept)


def _profile(path: str | None, pod: dict[str, Any]) -> Profile:

    if path is None:
        return DEFAULT_PROFILE
    scheduler_name = _scheduler_name(pod)
    try:
        return profile_for(read_document(path, "scheduler configuration", ExplainError), scheduler_name)
    except SchedulerConfigError as err:
        raise ExplainError(f"scheduler configuration {path}: {err}") from None


def _scheduler_name(pod: dict[str, Any]) -> str:

    spec = pod.get("spec")
    name = spec.get("schedulerName") if isinstance(spec, dict) else None
    return name if isinstance(name, str) and name else DEFAULT_PROFILE.scheduler_name


# ---------------------------------------------------------------------------------------------
# Reading files


def load_pod(path: str) -> dict[str, Any]:
    """The single Pod in `path`."""

    docs = read_documents(path, "pod", ExplainError, OBJECT_LIMIT)
    if len(docs) != 1:
        raise ExplainError(f"pod file {path}: holds {len(docs)} YAML documents; put exactly one Pod in it")
    pod = docs[0]
    if not isinstance(pod, dict):
        raise ExplainError(f"pod file {path}: the document is {describe(pod)}, not a Pod object")
    kind = pod.get("kind")
    if kind is not None and kind != "Pod":
        raise ExplainError(
            f"pod file {path}: kind is {show(kind)}; explain takes a Pod (for a workload, copy its "
            "spec.template into a Pod manifest: its metadata and spec)"
        )
    problem = pod_problem(pod)  # review turns such a pod away by the same function
    if problem:  # the API server refuses such a manifest, so the scheduler never sees the pod
        raise ExplainError(f"pod file {path}: {problem}")
    return pod


def load_nodes(path: str) -> list[Node]:
    """The Nodes in `path`: Node documents, or List documents (NodeList, List) holding Nodes."""
    return _nodes_from(_objects(path, "nodes"), f"nodes file {path}")


def load_pods(path: str) -> list[PodInfo]:
    """The Pods in `path`: Pod documents, or List documents (PodList, List) holding Pods (and
    Services, ReplicaSets, StatefulSets, ReplicationControllers and Namespaces, which `_pods` reads
    apart)."""
    return _pods_from(_objects(path, "pods"), f"pods file {path}")


def _objects(path: str, what: str) -> list[tuple[str, Any]]:
    """The objects of a file, each with its place ("document 2: items[0]."), the items of List
    documents in place of the List (`webhook.documents.objects`, as kubectl prints them)."""

    docs = read_documents(path, what, ExplainError)
    return [
        (_prefix(place), obj)
        for place, obj in documents.objects(docs, lambda place: f"{what} file {path}: {_prefix(place)}", ExplainError)
    ]


def _prefix(place: Place) -> str:
    document = f"document {place.document}: " if place.document else ""
    return document + "".join(f"items[{i}]." for i in place.items)


def _pods_from(objects: Sequence[tuple[str, Any]], source: str) -> list[PodInfo]:

    pods = [(p, o) for p, o in objects if not (isinstance(o, dict) and o.get("kind") in (*SELECTOR_KINDS, NAMESPACE))]
    return _read_objects(pods, source, "Pod", pod_info)


def _read_objects(objects: Sequence[tuple[str, Any]], source: str, kind: str, read: Callable[[Any], T]) -> list[T]:
    """Each object read by `read`; ExplainError names the file, the item and the field."""

    return [_read_object(prefix, obj, source, kind, read) for prefix, obj in objects]


def _read_object(prefix: str, obj: Any, source: str, kind: str, read: Callable[[Any], T]) -> T:
    if not isinstance(obj, dict):
        where = prefix.rstrip(".: ") or "the document"
        raise ExplainError(f"{source}: {where} is {describe(obj)}, not a {kind} object; give {kind} objects")
    if obj.get("kind") not in (None, kind):
        raise ExplainError(f"{source}: {prefix}kind is {show(obj.get('kind'))}; only {kind} objects belong here")
    try:
        return read(obj)
    except ShapeError as err:
        raise ExplainError(f"{source}: {prefix}{err}; fix the field") from None


def nodes_from_api(items: Sequence[Any], source: str) -> list[Node]:
    """Nodes from API data (e.g. the cluster's list), checked like a file's."""
    return _nodes_from([(f"items[{i}].", item) for i, item in enumerate(items)], source)


def _nodes_from(objects: Sequence[tuple[str, Any]], source: str) -> list[Node]:

    nodes: list[Node] = []
    seen: set[str] = set()
    for (prefix, _), node in zip(objects, _read_objects(objects, source, "Node", node_info), strict=True):
        if node.name in seen:
            raise ExplainError(f"{source}: {prefix}metadata.name {node.name!r} appears twice; node names are unique")
        seen.add(node.name)
        nodes.append(node)
    if not nodes:
        raise ExplainError(f"{source}: holds no Node objects; give at least one (kubectl get nodes -o yaml)")
    return nodes


# ---------------------------------------------------------------------------------------------
# Output


def to_json(report: Explanation) -> dict[str, Any]:

    ranking, netqos = report.ranking, report.netqos
    netqos_totals = {n.name: n.total for n in netqos.nodes}
    return {
        "pod": report.pod_name,
        "namespace": report.namespace,
        "mutated": report.mutation.decision is Decision.MUTATED,
        "decision": report.mutation.decision_name,
        "injected_rules": list(report.mutation.injected),
        "injected_terms": list(report.added_terms_api),
        "warnings": list(report.mutation.warnings),
        "nodes": [
            {
                "name": n.name,
                "net": n.net,
                "feasible": n.feasible,
                "reasons": list(n.reasons),
                "netqos_score": n.netqos_score,
                "affinity_raw": n.affinity_raw,
                "affinity_normalized": n.affinity_normalized,
                "affinity_weighted": n.affinity_weighted,
                "scores": dict(n.scores),
                "total": n.total,
                "netqos_total": netqos_totals[n.name],
                "probability": _share(report.landing, n.name),
                "netqos_probability": _share(report.netqos_landing, n.name),
            }
            for n in ranking.nodes
        ],
        "sampling": _sampling_json(report),
        "affinity_choice": list(ranking.affinity_choice),
        "netqos_choice": list(ranking.netqos_choice),
        "choices_match": report.choices_match(),
        "scoring_skipped": ranking.scoring_skipped,
        "score_failure": ranking.score_failure,
        "filter_message": ranking.filter_message(),
        "weights": dict(ranking.weights),
        "netqos_weight": report.netqos_weight,
        "predicted": list(ranking.predicted),
        "netqos_predicted": list(netqos.predicted),
        "predictions_match": report.predictions_match(),
        "not_evaluated": list(report.not_evaluated),
        "settings_not_evaluated": list(report.settings_not_evaluated),
        "image_sizes": [
            {
                "image": sizes.image,
                "size_bytes": sizes.size,
                "node": sizes.node,
                "reported": [{"size_bytes": size, "nodes": list(names)} for size, names in sizes.reported],
                "decides_prediction": sizes.decides,
            }
            for sizes in report.image_sizes
        ],
        "notes": list(report.notes),
    }


def _share(landing: Landing | None, name: str) -> float | None:
    return None if landing is None else round(landing.probability.get(name, 0.0), 4)


def _sampling_json(report: Explanation) -> dict[str, Any] | None:
    """How a cycle samples the nodes, and the probability the pod lands on a fast node."""
    landing, netqos = report.landing, report.netqos_landing
    if landing is None or netqos is None:
        return None
    fast = report.fast
    return {
        "nodes": landing.walked,
        "scored_per_cycle": landing.wanted,
        "feasible": landing.feasible,
        "sampled": landing.sampled,
        "target": str(report.target),
        "target_probability": round(landing.of(fast), 4),
        "netqos_target_probability": round(netqos.of(fast), 4),
    }


def render_json(report: Explanation) -> str:
    return json.dumps(to_json(report), indent=2) + "\n"


# Short column names for the score plugins (the legend under the table names them in full).
SHORT_NAMES: Mapping[str, str] = MappingProxyType(
    {
        TAINT_TOLERATION: "TAINT",
        NODE_AFFINITY: "AFFINITY",
        NODE_RESOURCES_FIT: "FIT",
        POD_TOPOLOGY_SPREAD: "SPREAD",
        INTER_POD_AFFINITY: "PODAFF",
        BALANCED_ALLOCATION: "BALANCED",
        IMAGE_LOCALITY: "IMAGE",
    }
)


def render_table(report: Explanation) -> str:

    ranking = report.ranking
    sampled = report.landing is not None and report.landing.sampled
    lines = [_pod_line(report)]
    lines += [f"  + weight {t.weight:<3} {_describe_term(t)}" for t in report.added_terms]
    if report.mutation.decision is Decision.MUTATED:  # otherwise the warnings are the pod line
        lines += [f"warning: {sentence(w)}" for w in report.mutation.warnings]
    lines.append("")
    plugins = list(ranking.weights)
    headers = (
        "NODE",
        "NET",
        "FEASIBLE",
        "NETQOS",
        "AFFINITY RAW",
        "NORMALIZED",
        *(f"{SHORT_NAMES.get(p, p)} x{ranking.weights[p]}" for p in plugins),
        "TOTAL",
        f"NETQOS TOTAL (x{report.netqos_weight})",
        *(("P",) if sampled else ()),
        "REASON",
    )
    netqos_totals = {n.name: n.total for n in report.netqos.nodes}
    marks = [" "] + ["*" if n.name in ranking.predicted else " " for n in ranking.nodes]
    rows = [headers] + [
        _row(n, plugins, ranking.weights, netqos_totals[n.name], _share(report.landing, n.name) if sampled else None)
        for n in ranking.nodes
    ]
    lines += [f"{mark} {row}".rstrip() for mark, row in zip(marks, aligned(rows), strict=True)]
    lines.append("")
    lines.append(ranking.filter_message())
    lines.append(_choices_line(report))
    lines.append(_predictions_line(report))
    lines.append(
        "* the predicted node(s): the best TOTAL of the weighted scores ("
        + ", ".join(f"{SHORT_NAMES.get(p, p)} = {p}" for p in plugins)
        + f"); NETQOS TOTAL: the same profile plus the NetQoS plugin at weight {report.netqos_weight}, "
        "for the pod without the injected terms."
    )
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines) + "\n"


def _pod_line(report: Explanation) -> str:

    m = report.mutation
    pod = f"Pod {report.namespace}/{report.pod_name}"
    if m.not_called:
        return sentence(f"{pod}: not mutated: {m.not_called}")
    if m.decision is Decision.MUTATED:
        rules = f"rule{'s' if len(m.injected) > 1 else ''} {', '.join(m.injected)}"
        return f"{pod}: mutated by netqos-webhook ({rules}), preferred node affinity added:"
    why = {
        Decision.UNCHANGED: "it already carries the terms of every rule that selects it",
        Decision.SKIPPED_OPT_OUT: "it opts out with the annotation netqos.io/inject=false",
        Decision.NOT_SELECTED: "no rule of the policy selects its labels",
    }.get(m.decision, "; ".join(m.warnings) or m.decision.value)
    if m.decision is Decision.SKIPPED_EXPLICIT:
        why = "; ".join(m.warnings)
    return sentence(f"{pod}: not mutated: {why}")


def _describe_term(term: PreferredTerm) -> str:
    parts = [f"{r.key} {r.operator}" + (f" [{', '.join(r.values)}]" if r.values else "") for r in term.term.expressions]
    parts += [f"{f.key} {f.operator} [{', '.join(f.values)}]" for f in term.term.fields]
    return " AND ".join(parts)


def _row(
    node: NodeResult,
    plugins: Sequence[str],
    weights: Mapping[str, int],
    netqos_total: int | None,
    probability: float | None = None,
) -> tuple[str, ...]:
    def num(value: int | None) -> str:
        return "-" if value is None else str(value)

    weighted = [num(node.scores[p] * weights[p]) if p in node.scores else "-" for p in plugins]
    return (
        node.name,
        "<none>" if node.net is None else node.net,
        "yes" if node.feasible else "no",
        str(node.netqos_score),
        str(node.affinity_raw),
        num(node.affinity_normalized),
        *weighted,
        num(node.total),
        num(netqos_total),
        *(() if probability is None else (f"{probability:.2f}",)),
        ", ".join(node.reasons),
    )


def _choices_line(report: Explanation) -> str:
    ranking = report.ranking
    if not ranking.feasible:
        return "NodeAffinity picks: none   NetQoS plugin picked: none"
    verdict = "same" if report.choices_match() else "DIFFERENT"
    return (
        f"NodeAffinity picks: {', '.join(ranking.affinity_choice)}   "
        f"NetQoS plugin picked: {', '.join(ranking.netqos_choice)}   ({verdict})"
    )


def _predictions_line(report: Explanation) -> str:
    ranking, netqos = report.ranking, report.netqos
    if not ranking.feasible:
        return "predicted: none (Pending)   NetQoS scheduler: none (Pending)"
    if ranking.scoring_fails:
        return (
            "predicted: none (Pending: NodeAffinity's PreScore fails on a preferred term the scheduler cannot parse)"
            f"   NetQoS scheduler: {', '.join(netqos.predicted) or 'none (Pending, the same term)'}"
        )
    verdict = "agree" if report.predictions_match() else "DISAGREE"
    label = "scoring skipped, " if ranking.scoring_skipped else ""
    label += "some plugins not evaluated" if report.not_evaluated else "every plugin evaluated"
    return (
        f"predicted: {', '.join(ranking.predicted)}   NetQoS scheduler: {', '.join(netqos.predicted)}   "
        f"({verdict}; {label})"
    )
