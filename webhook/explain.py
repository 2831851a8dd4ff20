"""`netqos-webhook explain`: where the stock kube-scheduler puts the pod we mutate, and where the
NetQoS scheduler would have put the pod as written.

The pod goes through `admission.review` exactly as a `/mutate` request would, and the JSON patch
in the response is applied to it: the scores below are those of the patched pod, so they prove
the patch, not only the policy. Each node is then filtered and scored as kube-scheduler does
(`webhook.scheduling`), given the pods already on it, under the default profile or the one a
`--scheduler-config` gives the pod's schedulerName. The counterfactual is the same profile plus
the NetQoS plugin's Score (weight `--netqos-weight`) for the pod without the injected terms.

Nodes and pods come from files or, with --kubeconfig or --context, from the cluster through `webhook.cluster`,
which returns the same API data; everything after that is shared.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TextIO, TypeVar

import jsonpatch

from webhook import admission, cluster, scheduling
from webhook.affinity import PREFERRED, PreferredTerm
from webhook.apidata import ShapeError
from webhook.documents import read_document, read_documents
from webhook.errors import UsageError
from webhook.policy import Decision, Policy
from webhook.schedconfig import SchedulerConfigError, profile_for

HELP = "Predict the node the stock kube-scheduler picks for a pod the webhook mutated, beside the NetQoS scheduler's."
EXAMPLE = "netqos-webhook explain --pod deploy/examples/test-pod.yaml --nodes deploy/examples/nodes.yaml"
DESCRIPTION = """\
Run a pod through the webhook's policy exactly as /mutate would, then filter and score the
nodes as kube-scheduler does, given the pods already on them: cordons, node name, taints,
node selector and required node affinity, host ports and resource fit; then the score
plugins TaintToleration, NodeAffinity, NodeResourcesFit, NodeResourcesBalancedAllocation
and ImageLocality, each normalised and weighted, and the total. The predicted node is the
best total. Beside it, the NetQoS scheduler's prediction: the same profile plus the NetQoS
plugin (net=high 100, other or no label 10, net=low 0; weight --netqos-weight) for the pod
without the injected terms. PodTopologySpread, InterPodAffinity and the volume plugins are
not evaluated; the output says so.
"""
EPILOG = f"""\
examples:
  # the experiment of the NetQoS scheduler plugin: minikube (net=low) and fake-node-1 (net=high, tainted)
  {EXAMPLE}

  # against the nodes of a live cluster (kubeconfig: --kubeconfig, else $KUBECONFIG, else ~/.kube/config), as JSON
  netqos-webhook explain --pod pod.yaml --context minikube -o json

  # the example of a full fast node: the pod still lands, on a slower node
  netqos-webhook explain --pod deploy/examples/full-cluster/pod.yaml \\
      --nodes deploy/examples/full-cluster/nodes.yaml --pods deploy/examples/full-cluster/pods.yaml

  # the files can be any kubectl output
  kubectl get nodes -o yaml > nodes.yaml; kubectl get pods -A -o yaml > pods.yaml
"""

T = TypeVar("T")
Lister = Callable[[str | None, str | None], list[Any]]
DEFAULT_NETQOS_WEIGHT = 1
# Owners whose pods PodTopologySpread's system default constraints spread (pkg/scheduler/
# framework/plugins/podtopologyspread/common.go: the selector of the pod's Services,
# ReplicationController, ReplicaSet or StatefulSet).
SPREAD_OWNERS = ("ReplicaSet", "StatefulSet", "ReplicationController")


@dataclass(frozen=True)
class ExplainOptions:
    """What `explain` is asked to do: the files to read or the cluster to ask, and the output."""

    pod: str
    nodes: str | None = None  # a nodes file; None: list them from the cluster (live mode)
    kubeconfig: str | None = None  # live mode with it or `context`; None: $KUBECONFIG, else ~/.kube/config
    context: str | None = None
    pods: str | None = None  # the pods already on the nodes; live mode lists them when None
    scheduler_config: str | None = None
    netqos_weight: int = DEFAULT_NETQOS_WEIGHT
    output: str = "table"

    @property
    def live(self) -> bool:
        """Read the nodes and pods from a cluster, as `register` and `status` find it."""
        return self.kubeconfig is not None or self.context is not None


class ExplainError(UsageError, ValueError):
    """An input that cannot be explained; the message names the file, the field and the fix."""


@dataclass(frozen=True)
class Mutation:
    """What /mutate made of the pod."""

    pod: dict[str, Any]  # the pod with the response's patch applied
    decision: Decision
    injected: tuple[str, ...]  # rule names
    warnings: tuple[str, ...]
    patch: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Report:
    pod_name: str
    namespace: str
    mutation: Mutation
    added_terms: tuple[PreferredTerm, ...]  # preferred terms the patch appended
    added_terms_api: tuple[Any, ...]  # the same, as they appear in the patched pod
    ranking: scheduling.Ranking  # the mutated pod under the profile: the stock scheduler
    netqos: scheduling.Ranking  # the pod as written under the profile plus the NetQoS plugin
    netqos_weight: int
    not_evaluated: tuple[str, ...]
    notes: tuple[str, ...]

    def choices_match(self) -> bool:
        return set(self.ranking.affinity_choice) == set(self.ranking.netqos_choice)

    def predictions_match(self) -> bool:
        return set(self.ranking.predicted) == set(self.netqos.predicted)


# ---------------------------------------------------------------------------------------------
# Entry points


def run(
    options: ExplainOptions,
    policy: Policy,
    *,
    list_nodes: Lister | None = None,
    list_pods: Lister | None = None,
    stdout: TextIO | None = None,
) -> int:
    """Explain `options.pod` under `policy` and print it; 0 when done.

    Raises ExplainError for unusable input and cluster.ClusterError when the cluster cannot be
    read; the CLI turns them into its one-line errors. `list_nodes(kubeconfig, context)` and
    `list_pods(kubeconfig, context)` read the cluster in live mode, by default
    `webhook.cluster.list_nodes` and `list_pods` (which import the kubernetes client only when
    called). Tests pass fakes here: the one seam to the cluster.
    """
    if options.nodes is not None and options.live:
        raise ExplainError("the nodes come from --nodes or from a cluster (--kubeconfig, --context): give one")
    if options.nodes is None and not options.live:
        raise ExplainError("give the nodes: --nodes FILE, or --kubeconfig FILE and/or --context NAME for a cluster's")
    pod = load_pod(options.pod)
    nodes = _nodes(options, list_nodes)
    pods = _pods(options, list_pods)
    profile = _profile(options.scheduler_config, pod)
    report = explain(
        policy,
        pod,
        nodes,
        pod_source=f"pod file {options.pod}",
        pods=pods,
        profile=profile,
        netqos_weight=options.netqos_weight,
        pods_given=options.pods is not None or options.live,
    )
    (stdout or sys.stdout).write(render_json(report) if options.output == "json" else render_table(report))
    return 0


def _where(options: ExplainOptions) -> str:
    return f"cluster of kubeconfig {cluster.kubeconfig_source(options.kubeconfig)}" + (
        f", context {options.context}" if options.context else ""
    )


def _nodes(options: ExplainOptions, list_nodes: Lister | None) -> list[scheduling.Node]:
    if options.nodes:
        return load_nodes(options.nodes)
    list_nodes = list_nodes or cluster.list_nodes
    return nodes_from_api(list_nodes(options.kubeconfig, options.context), _where(options))


def _pods(options: ExplainOptions, list_pods: Lister | None) -> list[scheduling.PodView]:
    if options.pods:
        return load_pods(options.pods)
    if not options.live:
        return []
    list_pods = list_pods or cluster.list_pods
    items = list_pods(options.kubeconfig, options.context)
    return _pods_from([(f"items[{i}].", item) for i, item in enumerate(items)], _where(options))


def _profile(path: str | None, pod: dict[str, Any]) -> scheduling.Profile:
    if path is None:
        return scheduling.DEFAULT_PROFILE
    scheduler_name = _scheduler_name(pod)
    try:
        return profile_for(read_document(path, "scheduler configuration", ExplainError), scheduler_name)
    except SchedulerConfigError as err:
        raise ExplainError(f"scheduler configuration {path}: {err}") from None


def _scheduler_name(pod: dict[str, Any]) -> str:
    spec = pod.get("spec")
    name = spec.get("schedulerName") if isinstance(spec, dict) else None
    return name if isinstance(name, str) and name else scheduling.DEFAULT_PROFILE.scheduler_name


# ---------------------------------------------------------------------------------------------
# The pure core: mutation through /mutate's code path, then filter and score


def explain(
    policy: Policy,
    pod: dict[str, Any],
    nodes: Sequence[scheduling.Node],
    pod_source: str = "pod",
    pods: Sequence[scheduling.PodView] = (),
    profile: scheduling.Profile = scheduling.DEFAULT_PROFILE,
    netqos_weight: int = DEFAULT_NETQOS_WEIGHT,
    pods_given: bool = True,
) -> Report:
    """The stock scheduler's view of the mutated pod, and the NetQoS scheduler's of the pod as
    written, on `nodes` with `pods` already running (those bound to a node and not finished)."""
    mutation = mutate(policy, pod)
    try:
        before = scheduling.pod_view(pod)
        after = scheduling.pod_view(mutation.pod)
    except ShapeError as err:
        raise ExplainError(f"{pod_source}: {err}; fix the field (the API server would reject this pod)") from None
    others = [p for p in pods if (p.namespace, p.name) != (after.namespace, after.name)]
    usage = scheduling.usage_by_node(others)
    ranking = scheduling.rank(after, nodes, usage, profile)
    netqos = scheduling.rank(before, nodes, usage, profile.with_netqos(netqos_weight))
    added = after.preferred[len(before.preferred) :]  # the policy appends after the pod's own terms
    preferred_api = ((mutation.pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    added_api = tuple((preferred_api.get(PREFERRED) or [])[len(before.preferred) :])
    return Report(
        pod_name=before.name or "<unnamed>",
        namespace=_namespace(pod),
        mutation=mutation,
        added_terms=added,
        added_terms_api=added_api,
        ranking=ranking,
        netqos=netqos,
        netqos_weight=netqos_weight,
        not_evaluated=profile.not_evaluated,
        notes=_notes(after, ranking, nodes, profile, pods_given),
    )


def mutate(policy: Policy, pod: dict[str, Any]) -> Mutation:
    """Send `pod` through `admission.review` as a CREATE, and apply the patch it answers."""
    review = admission.create_review(pod, "netqos-webhook-explain")
    result = admission.review(policy, review)
    patch = admission.wire_patch(result.response)
    patched = jsonpatch.apply_patch(pod, patch) if patch else pod
    warnings = tuple(result.response["response"].get("warnings") or ())
    return Mutation(patched, result.decision, result.injected, warnings, tuple(patch))


def _namespace(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    return namespace if isinstance(namespace, str) and namespace else "default"


def _notes(
    pod: scheduling.PodView,
    ranking: scheduling.Ranking,
    nodes: Sequence[scheduling.Node],
    profile: scheduling.Profile,
    pods_given: bool,
) -> tuple[str, ...]:
    notes = []
    total, feasible = len(ranking.nodes), len(ranking.feasible)
    if pod.node_name:
        notes.append(
            f"spec.nodeName is {pod.node_name!r}: the scheduler never sees this pod; "
            "the kubelet of that node runs it (shown as the NodeName filter would judge it)"
        )
    if feasible == 0:
        notes.append("no node is feasible: the pod would stay Pending (FailedScheduling)")
    elif ranking.scoring_skipped:
        notes.append(
            f"only {ranking.feasible[0].name} is feasible: kube-scheduler binds the pod there without "
            "scoring (no Score plugin runs, the NetQoS plugin's neither); the scores show what scoring would give"
        )
    elif len(ranking.predicted) > 1:
        notes.append("the best totals tie: the scheduler picks one of the predicted nodes at random")
    sampled = scheduling.nodes_scored_at_most(total)
    if sampled < total:
        notes.append(
            f"{total} nodes: kube-scheduler stops filtering once it has found {sampled} feasible nodes "
            "(percentageOfNodesToScore), so it normalises over those, not over all the nodes shown"
        )
    if pod.scheduler_name != profile.scheduler_name:
        notes.append(
            f"spec.schedulerName is {pod.scheduler_name!r}: shown under the default profile; give that "
            "scheduler's KubeSchedulerConfiguration with --scheduler-config"
        )
    if not pods_given:
        notes.append("no --pods: the nodes are taken as empty (give kubectl get pods -A -o yaml to count their pods)")
    unknown = [n.name for n in nodes if n.allocatable is None]
    if unknown:
        notes.append(
            f"no status.allocatable on {', '.join(unknown)}: resource fit is not checked there "
            "and resource scores count it as zero capacity"
        )
    if scheduling.BALANCED_ALLOCATION in ranking.skipped:
        notes.append(
            "the pod requests no cpu or memory: NodeResourcesBalancedAllocation skips it (best-effort pod), "
            "and NodeResourcesFit counts it as 100m CPU and 200Mi memory"
        )
    notes.append(_not_evaluated_note(pod, profile))
    return tuple(notes)


def _not_evaluated_note(pod: scheduling.PodView, profile: scheduling.Profile) -> str:
    concerns = []
    spread_owner = next((k for k in pod.owner_kinds if k in SPREAD_OWNERS), None)
    if spread_owner and "PodTopologySpread" in profile.not_evaluated:
        concerns.append(
            f"this pod belongs to a {spread_owner}, so PodTopologySpread's system default constraints spread it "
            "away from its siblings (score weight 2)"
        )
    for use, what in (
        ("PodTopologySpread", "its topologySpreadConstraints"),
        ("InterPodAffinity", "its pod (anti-)affinity"),
        ("volumes", "its volumes"),
        ("DynamicResources", "its resource claims"),
    ):
        if use in pod.uses:
            concerns.append(f"{what} are not evaluated")
    listed = ", ".join(profile.not_evaluated)
    head = f"not evaluated: {listed}; the prediction assumes they pass every node and score all nodes alike"
    return head + (f" ({'; '.join(concerns)})" if concerns else "")


# ---------------------------------------------------------------------------------------------
# Reading files


def load_pod(path: str) -> dict[str, Any]:
    """The single Pod in `path`."""
    docs = read_documents(path, "pod", ExplainError)
    if len(docs) != 1:
        raise ExplainError(f"pod file {path}: holds {len(docs)} YAML documents; put exactly one Pod in it")
    pod = docs[0]
    if not isinstance(pod, dict):
        raise ExplainError(f"pod file {path}: the document is {type(pod).__name__}, not a Pod object")
    kind = pod.get("kind")
    if kind is not None and kind != "Pod":
        raise ExplainError(
            f"pod file {path}: kind is {kind!r}; explain takes a Pod (for a workload, copy its "
            "spec.template into a Pod manifest: its metadata and spec)"
        )
    return pod


def load_nodes(path: str) -> list[scheduling.Node]:
    """The Nodes in `path`: Node documents, or List/NodeList documents holding Nodes."""
    return _nodes_from(_objects(path, "nodes", "Node"), f"nodes file {path}")


def load_pods(path: str) -> list[scheduling.PodView]:
    """The Pods in `path`: Pod documents, or List/PodList documents holding Pods."""
    return _pods_from(_objects(path, "pods", "Pod"), f"pods file {path}")


def _objects(path: str, what: str, kind: str) -> list[tuple[str, Any]]:
    """The objects of a file, each with its place ("document 2: items[0]."): `kind` documents,
    or List/`kind`List documents holding them, as kubectl prints them."""
    docs = read_documents(path, what, ExplainError)
    objects: list[tuple[str, Any]] = []
    for d, doc in enumerate(docs):
        where = f"document {d + 1}: " if len(docs) > 1 else ""
        if isinstance(doc, dict) and doc.get("kind") in ("List", f"{kind}List"):
            items = doc.get("items")
            if not isinstance(items, list):
                raise ExplainError(f"{what} file {path}: {where}items must be a list of {kind} objects")
            objects += [(f"{where}items[{i}].", item) for i, item in enumerate(items)]
        else:
            objects.append((where, doc))
    return objects


def _pods_from(objects: Sequence[tuple[str, Any]], source: str) -> list[scheduling.PodView]:
    return _read_objects(objects, source, "Pod", scheduling.pod_view)


def _read_objects(objects: Sequence[tuple[str, Any]], source: str, kind: str, read: Callable[[Any], T]) -> list[T]:
    """Each object read by `read`; ExplainError names the file, the item and the field."""
    out = []
    for prefix, obj in objects:
        if not isinstance(obj, dict):
            where = prefix.rstrip(".: ") or "the document"
            raise ExplainError(f"{source}: {where} is {type(obj).__name__}, not a {kind} object; give {kind} objects")
        if obj.get("kind") not in (None, kind):
            raise ExplainError(f"{source}: {prefix}kind is {obj.get('kind')!r}; only {kind} objects belong here")
        try:
            out.append(read(obj))
        except ShapeError as err:
            raise ExplainError(f"{source}: {prefix}{err}; fix the field") from None
    return out


def nodes_from_api(items: Sequence[Any], source: str) -> list[scheduling.Node]:
    """Nodes from API data (e.g. the cluster's list), checked like a file's."""
    return _nodes_from([(f"items[{i}].", item) for i, item in enumerate(items)], source)


def _nodes_from(objects: Sequence[tuple[str, Any]], source: str) -> list[scheduling.Node]:
    nodes: list[scheduling.Node] = []
    seen: set[str] = set()
    for (prefix, _), node in zip(
        objects, _read_objects(objects, source, "Node", scheduling.node_from_api), strict=True
    ):
        if node.name in seen:
            raise ExplainError(f"{source}: {prefix}metadata.name {node.name!r} appears twice; node names are unique")
        seen.add(node.name)
        nodes.append(node)
    if not nodes:
        raise ExplainError(f"{source}: holds no Node objects; give at least one (kubectl get nodes -o yaml)")
    return nodes


# ---------------------------------------------------------------------------------------------
# Output


def to_json(report: Report) -> dict[str, Any]:
    ranking, netqos = report.ranking, report.netqos
    netqos_totals = {n.name: n.total for n in netqos.nodes}
    return {
        "pod": report.pod_name,
        "namespace": report.namespace,
        "mutated": report.mutation.decision is Decision.MUTATED,
        "decision": report.mutation.decision.value,
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
            }
            for n in ranking.nodes
        ],
        "affinity_choice": list(ranking.affinity_choice),
        "netqos_choice": list(ranking.netqos_choice),
        "choices_match": report.choices_match(),
        "scoring_skipped": ranking.scoring_skipped,
        "filter_message": ranking.filter_message(),
        "weights": dict(ranking.weights),
        "netqos_weight": report.netqos_weight,
        "predicted": list(ranking.predicted),
        "netqos_predicted": list(netqos.predicted),
        "predictions_match": report.predictions_match(),
        "not_evaluated": list(report.not_evaluated),
        "notes": list(report.notes),
    }


def render_json(report: Report) -> str:
    return json.dumps(to_json(report), indent=2) + "\n"


# Short column names for the score plugins (the legend under the table names them in full).
SHORT_NAMES: Mapping[str, str] = MappingProxyType(
    {
        scheduling.TAINT_TOLERATION: "TAINT",
        scheduling.NODE_AFFINITY: "AFFINITY",
        scheduling.NODE_RESOURCES_FIT: "FIT",
        scheduling.BALANCED_ALLOCATION: "BALANCED",
        scheduling.IMAGE_LOCALITY: "IMAGE",
    }
)


def render_table(report: Report) -> str:
    ranking = report.ranking
    lines = [_pod_line(report)]
    lines += [f"  + weight {t.weight:<3} {_describe_term(t)}" for t in report.added_terms]
    if report.mutation.decision is Decision.MUTATED:  # otherwise the warnings are the pod line
        lines += [f"warning: {w}" for w in report.mutation.warnings]
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
        "REASON",
    )
    netqos_totals = {n.name: n.total for n in report.netqos.nodes}
    marks = [" "] + ["*" if n.name in ranking.predicted else " " for n in ranking.nodes]
    rows = [headers] + [_row(n, plugins, ranking.weights, netqos_totals[n.name]) for n in ranking.nodes]
    lines += [f"{mark} {row}".rstrip() for mark, row in zip(marks, _aligned(rows), strict=True)]
    lines.append("")
    lines.append(ranking.filter_message())
    lines.append(_choices_line(report))
    lines.append(_predictions_line(report))
    lines.append(
        "* the predicted node(s): the best TOTAL of the weighted scores ("
        + ", ".join(f"{SHORT_NAMES.get(p, p)} = {p}" for p in plugins)
        + f"); NETQOS TOTAL: the same profile plus the NetQoS plugin at weight {report.netqos_weight}, "
        "for the pod without the injected terms"
    )
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines) + "\n"


def _pod_line(report: Report) -> str:
    m = report.mutation
    pod = f"Pod {report.namespace}/{report.pod_name}"
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
    return f"{pod}: not mutated: {why}"


def _describe_term(term: PreferredTerm) -> str:
    parts = [f"{r.key} {r.operator}" + (f" [{', '.join(r.values)}]" if r.values else "") for r in term.term.expressions]
    parts += [f"{f.key} {f.operator} [{', '.join(f.values)}]" for f in term.term.fields]
    return " AND ".join(parts)


def _row(
    node: scheduling.NodeResult, plugins: Sequence[str], weights: Mapping[str, int], netqos_total: int | None
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
        ", ".join(node.reasons),
    )


def _aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    return ["   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _choices_line(report: Report) -> str:
    ranking = report.ranking
    if not ranking.feasible:
        return "NodeAffinity picks: none   NetQoS plugin picked: none"
    verdict = "same" if report.choices_match() else "DIFFERENT"
    return (
        f"NodeAffinity picks: {', '.join(ranking.affinity_choice)}   "
        f"NetQoS plugin picked: {', '.join(ranking.netqos_choice)}   ({verdict})"
    )


def _predictions_line(report: Report) -> str:
    ranking, netqos = report.ranking, report.netqos
    if not ranking.feasible:
        return "predicted: none (Pending)   NetQoS scheduler: none (Pending)"
    verdict = "agree" if report.predictions_match() else "DISAGREE"
    label = "scoring skipped, " if ranking.scoring_skipped else ""
    label += "some plugins not evaluated" if report.not_evaluated else "every plugin evaluated"
    return (
        f"predicted: {', '.join(ranking.predicted)}   NetQoS scheduler: {', '.join(netqos.predicted)}   "
        f"({verdict}; {label})"
    )
