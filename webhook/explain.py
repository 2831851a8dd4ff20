"""`netqos-webhook explain`: what the stock kube-scheduler does with the pod we mutate.

The pod goes through `admission.review` exactly as a `/mutate` request would, and the JSON patch
in the response is applied to it: the scores below are those of the patched pod, so they prove
the patch, not only the policy. Each node is then filtered and scored as kube-scheduler does
(`webhook.scheduling`), beside the NetQoS plugin's score, so a user sees, for their own pod and
nodes, whether NodeAffinity ranks the nodes as the plugin did.

Nodes come from a file or, with --kubeconfig, from the cluster through `webhook.cluster`, which
returns the same API data; everything after that is shared.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import jsonpatch

from webhook import admission, cluster, scheduling
from webhook.affinity import PreferredTerm
from webhook.apidata import ShapeError
from webhook.documents import read_documents
from webhook.errors import UsageError
from webhook.policy import PREFERRED, Decision, Policy

HELP = "Show how the stock kube-scheduler ranks nodes for a pod once the webhook has mutated it."
EXAMPLE = "netqos-webhook explain --pod deploy/examples/test-pod.yaml --nodes deploy/examples/nodes.yaml"
DESCRIPTION = """\
Run a pod through the webhook's policy exactly as /mutate would, then filter and score the
nodes as kube-scheduler does: its node selector, required node affinity, taints and
cordons (resource fit is not evaluated), and the NodeAffinity score of the mutated pod
(raw, normalised over the feasible nodes, and times NodeAffinity's weight 2), beside the
score the NetQoS scheduler plugin gave (net=high 100, other or no label 10, net=low 0).
"""
EPILOG = f"""\
examples:
  # the experiment of the NetQoS scheduler plugin: minikube (net=low) and fake-node-1 (net=high, tainted)
  {EXAMPLE}

  # against the nodes of a live cluster, as JSON
  netqos-webhook explain --pod pod.yaml --kubeconfig ~/.kube/config --context minikube -o json

  # the nodes file can be any kubectl output
  kubectl get nodes -o yaml > nodes.yaml
"""

NodeLister = Callable[[str, "str | None"], list]


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
    ranking: scheduling.Ranking
    notes: tuple[str, ...]

    def choices_match(self) -> bool:
        return set(self.ranking.affinity_choice) == set(self.ranking.netqos_choice)


# ---------------------------------------------------------------------------------------------
# Entry points


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Configure the CLI's `explain` subparser (which adds --config as for every command)."""
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--pod", required=True, metavar="FILE", help="the Pod manifest (YAML or JSON) to explain")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--nodes",
        metavar="FILE",
        help="Node objects (YAML or JSON): one Node, several documents, or a List as `kubectl get nodes -o yaml` prints",
    )
    source.add_argument("--kubeconfig", metavar="FILE", help="read the nodes from the cluster of this kubeconfig")
    parser.add_argument(
        "--context", metavar="NAME", help="the kubeconfig context to use (default: its current context)"
    )
    parser.add_argument(
        "-o", "--output", choices=("table", "json"), default="table", help="output format (default: table)"
    )


def run(
    args: argparse.Namespace,
    policy: Policy,
    *,
    list_nodes: NodeLister | None = None,
    stdout: TextIO | None = None,
) -> int:
    """Explain `args.pod` under `policy` and print it; 0 when done.

    Raises ExplainError for unusable input and cluster.ClusterError when the cluster cannot be
    read; the CLI turns them into its one-line errors. `list_nodes(kubeconfig, context)` reads
    the nodes in live mode, by default `webhook.cluster.list_nodes` (which imports the
    kubernetes client only when called). Tests pass a fake here: the one seam to the cluster.
    """
    if args.context and not args.kubeconfig:
        raise ExplainError("--context selects a kubeconfig context; give --kubeconfig too")
    pod = load_pod(args.pod)
    nodes = _nodes(args, list_nodes)
    report = explain(policy, pod, nodes, pod_source=f"pod file {args.pod}")
    (stdout or sys.stdout).write(render_json(report) if args.output == "json" else render_table(report))
    return 0


def _nodes(args: argparse.Namespace, list_nodes: NodeLister | None) -> list[scheduling.Node]:
    if args.nodes:
        return load_nodes(args.nodes)
    list_nodes = list_nodes or cluster.list_nodes
    where = f"cluster of kubeconfig {args.kubeconfig}" + (f", context {args.context}" if args.context else "")
    return nodes_from_api(list_nodes(args.kubeconfig, args.context), where)


# ---------------------------------------------------------------------------------------------
# The pure core: mutation through /mutate's code path, then filter and score


def explain(policy: Policy, pod: dict[str, Any], nodes: Sequence[scheduling.Node], pod_source: str = "pod") -> Report:
    mutation = mutate(policy, pod)
    try:
        before = scheduling.pod_view(pod)
        after = scheduling.pod_view(mutation.pod)
    except ShapeError as err:
        raise ExplainError(f"{pod_source}: {err}; fix the field (the API server would reject this pod)") from None
    ranking = scheduling.rank(after, nodes)
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
        notes=_notes(after, ranking),
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


def _notes(pod: scheduling.PodView, ranking: scheduling.Ranking) -> tuple[str, ...]:
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
    elif len(ranking.affinity_choice) > 1:
        notes.append(
            "NodeAffinity ties: the other score plugins decide, and among equal totals the scheduler picks at random"
        )
    sampled = scheduling.nodes_scored_at_most(total)
    if sampled < total:
        notes.append(
            f"{total} nodes: kube-scheduler stops filtering once it has found {sampled} feasible nodes "
            "(percentageOfNodesToScore), so it normalises over those, not over all the nodes shown"
        )
    notes.append(
        "not evaluated: resource fit (CPU, memory, pods), host ports, volumes, inter-pod affinity, topology "
        "spread, and the other score plugins (NodeAffinity's weighted score is one term of the node's total)"
    )
    return tuple(notes)


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
    docs = read_documents(path, "nodes", ExplainError)
    objects: list[tuple[str, Any]] = []
    for d, doc in enumerate(docs):
        where = f"document {d + 1}: " if len(docs) > 1 else ""
        if isinstance(doc, dict) and doc.get("kind") in ("List", "NodeList"):
            items = doc.get("items")
            if not isinstance(items, list):
                raise ExplainError(f"nodes file {path}: {where}items must be a list of Node objects")
            objects += [(f"{where}items[{i}].", item) for i, item in enumerate(items)]
        else:
            objects.append((where, doc))
    return _nodes_from(objects, f"nodes file {path}")


def nodes_from_api(items: Sequence[Any], source: str) -> list[scheduling.Node]:
    """Nodes from API data (e.g. the cluster's list), checked like a file's."""
    return _nodes_from([(f"items[{i}].", item) for i, item in enumerate(items)], source)


def _nodes_from(objects: Sequence[tuple[str, Any]], source: str) -> list[scheduling.Node]:
    nodes: list[scheduling.Node] = []
    seen: set[str] = set()
    for prefix, obj in objects:
        if not isinstance(obj, dict):
            where = prefix.rstrip(".: ") or "the document"
            raise ExplainError(f"{source}: {where} is {type(obj).__name__}, not a Node object; give Node objects")
        kind = obj.get("kind")
        if kind not in (None, "Node"):
            raise ExplainError(f"{source}: {prefix}kind is {kind!r}; only Node objects belong here")
        try:
            node = scheduling.node_from_api(obj)
        except ShapeError as err:
            raise ExplainError(f"{source}: {prefix}{err}; fix the field") from None
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
    ranking = report.ranking
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
                "reasons": [n.reason] if n.reason else [],
                "netqos_score": n.netqos_score,
                "affinity_raw": n.affinity_raw,
                "affinity_normalized": n.affinity_normalized,
                "affinity_weighted": n.affinity_weighted,
            }
            for n in ranking.nodes
        ],
        "affinity_choice": list(ranking.affinity_choice),
        "netqos_choice": list(ranking.netqos_choice),
        "choices_match": report.choices_match(),
        "scoring_skipped": ranking.scoring_skipped,
        "filter_message": ranking.filter_message(),
        "notes": list(report.notes),
    }


def render_json(report: Report) -> str:
    return json.dumps(to_json(report), indent=2) + "\n"


HEADERS = (
    "NODE",
    "NET",
    "FEASIBLE",
    "NETQOS",
    "AFFINITY RAW",
    "NORMALIZED",
    f"WEIGHTED (x{scheduling.NODE_AFFINITY_WEIGHT})",
    "REASON",
)


def render_table(report: Report) -> str:
    ranking = report.ranking
    lines = [_pod_line(report)]
    lines += [f"  + weight {t.weight:<3} {_describe_term(t)}" for t in report.added_terms]
    if report.mutation.decision is Decision.MUTATED:  # otherwise the warnings are the pod line
        lines += [f"warning: {w}" for w in report.mutation.warnings]
    lines.append("")
    marks = [" "] + ["*" if n.name in ranking.affinity_choice else " " for n in ranking.nodes]
    rows = [HEADERS] + [_row(n) for n in ranking.nodes]
    lines += [f"{mark} {row}".rstrip() for mark, row in zip(marks, _aligned(rows))]
    lines.append("")
    lines.append(ranking.filter_message())
    lines.append(_choices_line(report))
    lines.append("* the feasible node(s) NodeAffinity scores highest")
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines) + "\n"


def _pod_line(report: Report) -> str:
    m = report.mutation
    pod = f"Pod {report.namespace}/{report.pod_name}"
    if m.decision is Decision.MUTATED:
        rules = ", ".join(m.injected)
        return f"{pod}: mutated by netqos-webhook (rule{'s' if len(m.injected) > 1 else ''} {rules}), preferred node affinity added:"
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


def _row(node: scheduling.NodeResult) -> tuple[str, ...]:
    def num(value: int | None) -> str:
        return "-" if value is None else str(value)

    return (
        node.name,
        "<none>" if node.net is None else node.net,
        "yes" if node.feasible else "no",
        str(node.netqos_score),
        str(node.affinity_raw),
        num(node.affinity_normalized),
        num(node.affinity_weighted),
        node.reason or "",
    )


def _aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    return ["   ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def _choices_line(report: Report) -> str:
    ranking = report.ranking
    if not ranking.feasible:
        return "NodeAffinity picks: none   NetQoS plugin picked: none"
    verdict = "same" if report.choices_match() else "DIFFERENT"
    return (
        f"NodeAffinity picks: {', '.join(ranking.affinity_choice)}   "
        f"NetQoS plugin picked: {', '.join(ranking.netqos_choice)}   ({verdict})"
    )
