"""`netqos-webhook review`: the offline dry run, through the same code as `POST /mutate`.

Input: files, directories of .yaml/.yml/.json files (not recursive: a subdirectory is reported and
skipped) or `-` (a stream such as `kubectl kustomize` prints), each holding one or more documents;
a `List` (`kubectl get -o yaml`) counts as its items.
Pods and AdmissionReviews go to `webhook.admission.review` as they are; a workload's pod template
becomes the Pod its controller would create (`webhook.workloads`) first; in a stream, a workload
without a usable template is an `invalid` row. Other objects are listed as `not a pod`.

Output: for one object of one file, by default what the webhook decided, for a person (`text`:
the object, its decision, the rules applied, and the change as the node-affinity terms and
annotations it adds, else as JSON-patch lines); on request the AdmissionReview response as sent
on the wire (`-o response`), the patch, the mutated pod or the mutated workload. For several (or
a directory), one table row per object by default; `-o json|yaml`, one record per object; `-o
text`, one block per object; `-o pod` and `-o workload` print a YAML stream (every pod mutated;
with `workload`, every object, pod templates mutated, for a pipeline to apply). A pod the API
server would refuse (`webhook.scheduler.read.pod_problem`, as `explain` refuses it) is `invalid`,
never `mutated`. `--fail-on` turns chosen decisions into exit code 3, for CI.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import yaml

from webhook.apidata import describe
from webhook.commands import flags, typed
from webhook.commands.tables import aligned
from webhook.errors import EXIT_FOUND, EXIT_OK, UsageError
from webhook.manifests import check_namespace
from webhook.names import DEFAULT_NAMESPACE
from webhook.policy import Decision, policy_warnings
from webhook.scope import NOT_CALLED, not_called_reason
from webhook.workloads import KIND_NAMES

if TYPE_CHECKING:
    from webhook.admission import AdmissionReviewResponse
    from webhook.documents import Place
    from webhook.policy import Policy

NOT_A_POD = "not a pod"
# text: for people (the default for one object); response: the AdmissionReview as the webhook
# answers it on the wire; json and yaml: one record per object, for programs.
SINGLE_OUTPUTS = ("response", "patch", "pod", "workload")
LIST_OUTPUTS = ("table", "json", "yaml", "text")
OUTPUTS = SINGLE_OUTPUTS + LIST_OUTPUTS
SUFFIXES = (".yaml", ".yml", ".json")
REVIEWER = "netqos-webhook-review"
ACCEPTED = f"a Pod, an AdmissionReview or a workload ({', '.join(KIND_NAMES)})"
DECISIONS = (*(d.value for d in Decision), NOT_CALLED)

HELP = (
    "Dry-run the webhook offline over Pods, AdmissionReviews and the pod templates of workloads "
    f"({', '.join(KIND_NAMES)}): the same code as POST /mutate. Each FILE is a YAML or JSON file "
    "with one or more documents, a directory of them (not recursive), or - for stdin (e.g. kubectl "
    "kustomize DIR | netqos-webhook review -); other objects are listed as 'not a pod'."
)
EXAMPLE = (
    "kubectl kustomize deploy/base | netqos-webhook review - --fail-on skipped_explicit,invalid\n"
    "  netqos-webhook review deploy/examples/test-pod.yaml deploy/examples/latency-sensitive-deployment.yaml"
)


@dataclass(frozen=True)
class ReviewArgs:
    files: tuple[str, ...]  # files, directories, or - for stdin (at most once)
    output: str | None = None  # None: text for one object of one file, table otherwise
    config: str | None = None
    fail_on: frozenset[str] = frozenset()  # decisions that make the exit code 3
    webhook_namespace: str = DEFAULT_NAMESPACE  # excluded by the registration, as kube-system is


@dataclass(frozen=True)
class Item:
    """One object of the input and where it came from, for messages."""

    source: str
    obj: Any
    file: str = ""  # the file it was read from, "-" for stdin


@dataclass(frozen=True)
class Reviewed:
    """What the webhook made of one object."""

    item: Item
    kind: str
    namespace: str
    name: str
    decision: str  # a policy.Decision value, or NOT_A_POD
    rules: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    patch: list[dict[str, Any]] = field(default_factory=list)  # as sent: decoded from the response
    response: AdmissionReviewResponse | None = None
    pod: Any = None  # the pod as the webhook received it

    def record(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "decision": self.decision,
            "rules": list(self.rules),
            "warnings": list(self.warnings),
            "patch": self.patch,
            "file": self.item.file,
        }


def add_command(sub: flags.Subcommands) -> None:
    p = flags.command(sub, "review", HELP, EXAMPLE, _main)
    p.add_argument("files", nargs="+", metavar="FILE|DIR|-", help="manifests to review")
    p.add_argument(
        "-o",
        "--output",
        choices=OUTPUTS,
        default=None,
        help="for one object of one file: text (default), the decision, the rules and the change for a person; "
        "response, the AdmissionReview response as the webhook sends it; patch, the decoded JSON patch; pod, the "
        "mutated pod as YAML; workload, the workload with its mutated template. For several (or a directory): "
        "table (default), one row per object; text, one block per object; json or yaml, one record per object; "
        "pod and workload, a YAML stream (workload: every object, pod templates mutated)",
    )
    flags.config(p)
    flags.webhook_namespace(p)
    p.add_argument(
        "--fail-on",
        type=_decisions,
        default=frozenset(),
        metavar="DECISIONS",
        help=f"exit with code 3 when an object gets one of these comma-separated decisions: {', '.join(DECISIONS)}",
    )


def _decisions(text: str) -> frozenset[str]:
    chosen = frozenset(word.strip() for word in text.split(",") if word.strip())
    unknown = sorted(chosen - set(DECISIONS))
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"{', '.join(unknown) or repr(text)}: not a decision; choose from {', '.join(DECISIONS)}"
        )
    return chosen


def _main(parsed: argparse.Namespace, out: TextIO) -> int:
    return run(typed(ReviewArgs, parsed, files=tuple(parsed.files)), out)


def run(args: ReviewArgs, out: TextIO) -> int:
    from webhook.policy_file import load_policy

    items, notices = read_inputs(args.files)
    for notice in notices:
        print(f"Warning: {notice}", file=sys.stderr)
    policy = load_policy(args.config)
    for warning in policy_warnings(policy):
        print(f"Warning: policy {args.config or 'built-in'}: {warning}", file=sys.stderr)
    # One object of one named file is "the object": its answer in full. A directory or several
    # paths are a collection, listed even when they hold a single object.
    single = len(items) == 1 and len(args.files) == 1 and not _is_dir(args.files[0])
    output = args.output or ("text" if single else "table")
    if output in ("response", "patch") and not single:
        raise UsageError(
            f"-o {output} shows one object of one file; {_holding(args.files)} {_count(len(items))}: "
            "use -o table, -o json, or -o pod / -o workload for a YAML stream"
        )
    check_namespace(args.webhook_namespace)
    results = [review_item(policy, item, single=single, webhook_namespace=args.webhook_namespace) for item in items]
    if output in SINGLE_OUTPUTS and single:
        out.write(_single(results[0], output))
    elif output in ("pod", "workload"):
        if output == "pod":
            _check_pods(results, args.files)
        out.write(_stream(results, output))
    elif output == "json":
        out.write(json.dumps([r.record() for r in results], indent=2) + "\n")
    elif output == "yaml":
        out.write(yaml.safe_dump([r.record() for r in results], sort_keys=False))
    elif output == "text":
        out.write("\n".join(human(r) for r in results))
    else:
        out.write(table(results))
    for r in results:
        where = f"{r.namespace}/{r.name}" if r.namespace else r.name
        prefix = "" if len(results) == 1 else f"{r.item.source}: {r.kind} {where}: "
        for warning in r.warnings:
            print(f"Warning: {prefix}{warning}", file=sys.stderr)
    return _verdict(results, args.fail_on)


def read_inputs(paths: Sequence[str]) -> tuple[list[Item], list[str]]:
    """The objects of every path (a file, a directory's files sorted, or `-` for stdin), in the
    order given, and notices about what a directory held that is not read (its subdirectories)."""
    from webhook.documents import INPUT_LIMIT, documents_from_bytes, objects, read_bytes, size

    if list(paths).count("-") > 1:
        raise UsageError("- (stdin) can be given once")
    files: list[str] = []
    notices: list[str] = []
    for path in paths:
        if _is_dir(path):
            found, skipped = _directory_files(path)
            notices += [
                f"{d}: a subdirectory, not reviewed (review reads a directory's files; name it too)" for d in skipped
            ]
            if not found:
                raise UsageError(f"directory {path} holds no {', '.join(SUFFIXES)} file")
            files += [str(f) for f in found]
        else:
            files.append(path)
    # One budget for every file of the run: each read stops one byte past what is left of it.
    # Every file is read before any is parsed, so a run over the budget is refused at once.
    left = INPUT_LIMIT
    contents: list[tuple[str, bytes]] = []
    for path in files:
        total = f"the limit for review's files together ({size(INPUT_LIMIT)}); review them in several runs"
        data = read_bytes(path, "input", limit=left, beyond=f"what is left of {total}" if left < INPUT_LIMIT else total)
        left -= len(data)
        contents.append((path, data))
    sources = [(path, documents_from_bytes(data, path, "input")) for path, data in contents]
    items: list[Item] = []
    for name, docs in sources:
        for place, obj in objects(docs, functools.partial(_source, name, colon=True), UsageError):
            source = _source(name, place)
            if not isinstance(obj, dict):
                raise UsageError(f"{source}: is {describe(obj)}, not a Kubernetes object; give {ACCEPTED}")
            items.append(Item(source, obj, name))
    if not items:
        raise UsageError(f"input {_holding(paths)} no object; give {ACCEPTED}")
    return items, notices


def _is_dir(path: str) -> bool:
    return path != "-" and Path(path).is_dir()


def _directory_files(path: str) -> tuple[list[Path], list[Path]]:
    """A directory's files with one of SUFFIXES and its subdirectories, each sorted. A broken
    link with such a suffix is an error: a file the user put there that cannot be read."""
    from webhook.documents import directory_entries

    files, subdirectories = [], []
    for entry in directory_entries(path, "input", UsageError):
        if entry.is_dir():
            subdirectories.append(entry)
        elif entry.suffix in SUFFIXES:
            if not entry.exists():
                raise UsageError(
                    f"input file {entry}: a broken symbolic link (to {os.readlink(entry)}); fix or remove it"
                )
            if entry.is_file():
                files.append(entry)
    return files, subdirectories


def _source(name: str, place: Place, colon: bool = False) -> str:
    document = f", document {place.document}" if place.document else ""
    items = "".join(f", items[{i}]" for i in place.items)
    return f"input file {name}{document}{items}" + (": " if colon else "")


def _not_registered_for(request: dict[str, Any]) -> str | None:
    """Why the API server would never send this request: the registration's rules name the CREATE
    of pods alone (webhook.scope.pod_create_rule), no other operation and no subresource."""
    operation, subresource = request.get("operation"), request.get("subResource")
    if operation == "CREATE" and not subresource:
        return None
    what = f"the {_text(operation)} of a pod" + (f"'s {_text(subresource)} subresource" if subresource else "")
    return f"the webhook is not called: the registration's rules send the CREATE of pods only, and this is {what}"


def review_item(
    policy: Policy, item: Item, single: bool = False, webhook_namespace: str = DEFAULT_NAMESPACE
) -> Reviewed:
    """One object through the /mutate path. With `single`, an object that carries no pod is an
    error (the user asked about it alone); in a stream it is listed as `not a pod`. A pod in a
    namespace the registration excludes is `not_called`: the API server never sends it to us."""
    from webhook import workloads
    from webhook.admission import BadReview, create_review, review, wire_patch

    obj = item.obj
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) else ""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    workload = workloads.kind_of(obj)
    if kind == "AdmissionReview":
        document = obj
    elif kind == "Pod":
        invalid = _invalid(item, obj, single)
        if invalid is not None:
            return invalid
        document = create_review(obj, REVIEWER)
    elif workload is not None:
        try:
            pod = workloads.pod_of(obj, workload)
            invalid = _invalid(item, obj, single, pod)
            if invalid is not None:
                return invalid
            document = create_review(pod, REVIEWER)
        except workloads.NotAWorkload as err:
            if single:
                raise UsageError(f"{item.source}: {kind} {_text(meta.get('name'))!r}: {err}") from None
            # One broken object in a stream is a row of its own, as the webhook answers a pod
            # it cannot read (`invalid`), so the rest is still reviewed and --fail-on sees it.
            namespace = _text(meta.get("namespace"))
            warning = f"{err}; no pod to review"
            return Reviewed(item, kind, namespace, _text(meta.get("name")), Decision.INVALID.value, (), (warning,))
    elif single:
        got = f"kind {json.dumps(kind)}" if kind else "an object without a kind"
        raise UsageError(f"{item.source}: expected {ACCEPTED}, got {got}")
    else:
        return Reviewed(item, kind or "?", _text(meta.get("namespace")), _text(meta.get("name")), NOT_A_POD)
    try:
        result = review(policy, document)
    except BadReview as err:
        raise UsageError(f"{item.source}: {err}") from None
    request = document["request"]
    answer = result.response["response"]
    not_called = not_called_reason(result.namespace or "default", webhook_namespace) or _not_registered_for(request)
    if kind == "AdmissionReview":
        pod_kind = request.get("kind", {}).get("kind") if isinstance(request.get("kind"), dict) else None
        kind, name = _text(pod_kind) or "AdmissionReview", result.name
    else:  # a Pod made by a controller has only a generateName: result.name falls back to it
        name = result.name if kind == "Pod" else _text(meta.get("name"))
    if not_called:
        return Reviewed(
            item,
            kind,
            result.namespace,
            name,
            NOT_CALLED,
            (),
            (not_called,),
            [],
            result.response,
            request.get("object"),
        )
    return Reviewed(
        item,
        kind,
        result.namespace,
        name,
        result.decision.value,
        result.injected,
        tuple(answer.get("warnings", ())),
        wire_patch(result.response),
        result.response,
        request.get("object"),
    )


def _invalid(item: Item, obj: dict[str, Any], single: bool, pod: Any = None) -> Reviewed | None:
    """The `invalid` row of an object whose pod (`obj` itself, or `pod`, the pod its controller
    would create) the API server would refuse, as `explain` refuses it (`pod_problem`): the
    webhook may be called with it, but the pod is never created, so it is not "mutated". Alone,
    the object is an error (exit 2); None when the pod is valid."""
    from webhook.scheduler.read import pod_problem

    problem = pod_problem(obj if pod is None else pod)
    if problem is None:
        return None
    if pod is not None:  # the paths are the pod's, as its controller would create it
        problem = f"the pod of its template: {problem}"
    if single:
        raise UsageError(f"{item.source}: {problem}")
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    namespace, name = _text(meta.get("namespace")), _text(meta.get("name"))
    return Reviewed(item, _text(obj.get("kind")), namespace, name, Decision.INVALID.value, (), (problem,))


def table(results: Sequence[Reviewed]) -> str:
    rows = [("KIND", "NAMESPACE/NAME", "DECISION", "RULES", "WARNINGS")]
    for r in results:
        where = f"{r.namespace}/{r.name}" if r.namespace else r.name
        rows.append((r.kind, where, r.decision, ",".join(r.rules) or "-", str(len(r.warnings))))
    return "".join(line + "\n" for line in aligned(rows))


def human(r: Reviewed) -> str:
    """One object's review for a person: what it is, the decision and the rules applied, then
    what the patch does: the preferred node-affinity terms it adds (weight, then the terms as
    kubectl describe shows them) and the annotations it sets; any other operation as a
    JSON-patch line (op, path, value as compact JSON). Why a pod was left alone is on stderr."""
    import jsonpatch

    where = f"{r.namespace}/{r.name}" if r.namespace else r.name
    rules = f" by rule {', '.join(r.rules)}" if r.rules else ""
    lines = [f"{r.kind} {where} ({r.item.source.removeprefix('input file ')}): {r.decision}{rules}"]
    if r.patch:
        after = jsonpatch.apply_patch(r.pod, r.patch)
        added = _added(_preferred(r.pod), _preferred(after))
        if added:
            lines.append("  adds preferred node affinity (weight: terms):")
            lines += [f"    {term.get('weight')!s:>3}: {_term(term.get('preference') or {})}" for term in added]
        for key, value in _added_annotations(r.pod, after):
            lines.append(f"  adds annotation {key}={value}")
        lines += [f"  {_op_line(op)}" for op in r.patch if not _shown(op, bool(added))]
    else:
        lines.append("  no change")
    return "".join(line + "\n" for line in lines)


def _preferred(pod: Any) -> list[Any]:
    spec = pod.get("spec") if isinstance(pod, dict) else None
    affinity = (spec or {}).get("affinity") or {}
    terms = (affinity.get("nodeAffinity") or {}).get("preferredDuringSchedulingIgnoredDuringExecution")
    return list(terms) if isinstance(terms, list) else []


def _added(before: Sequence[Any], after: Sequence[Any]) -> list[Any]:
    """The items of `after` beyond those of `before` (each of `before` matched once)."""
    left = list(before)
    added = []
    for item in after:
        if item in left:
            left.remove(item)
        else:
            added.append(item)
    return added


def _added_annotations(before: Any, after: Any) -> list[tuple[str, str]]:
    def annotations(pod: Any) -> dict[str, Any]:
        meta = pod.get("metadata") if isinstance(pod, dict) else None
        found = (meta or {}).get("annotations")
        return found if isinstance(found, dict) else {}

    old = annotations(before)
    return [(k, str(v)) for k, v in annotations(after).items() if old.get(k) != v]


def _term(preference: dict[str, Any]) -> str:
    """A NodeSelectorTerm on one line: `net In [high]`, `net Exists`, its requirements ANDed."""
    parts = []
    for kind, prefix in (("matchExpressions", ""), ("matchFields", "field ")):
        for req in preference.get(kind) or ():
            values = req.get("values") or []
            shown = f" [{', '.join(map(str, values))}]" if values else ""
            parts.append(f"{prefix}{req.get('key')} {req.get('operator')}{shown}")
    return " and ".join(parts) or "(an empty term)"


def _shown(op: dict[str, Any], terms_shown: bool) -> bool:
    """Is the operation told already by the terms and annotations lines?"""
    path = str(op.get("path", ""))
    if op.get("op") != "add":
        return False
    return path.startswith("/metadata/annotations") or (terms_shown and path.startswith("/spec/affinity"))


def _op_line(op: dict[str, Any]) -> str:
    value = f" {json.dumps(op['value'], separators=(',', ':'))}" if "value" in op else ""
    return f"{op.get('op')} {op.get('path')}{value}"


def _single(r: Reviewed, output: str) -> str:
    import jsonpatch

    from webhook import workloads

    if output == "text":
        return human(r)
    if output == "response":
        return json.dumps(r.response, indent=2) + "\n"
    if output == "patch":
        return json.dumps(r.patch, indent=2) + "\n"
    # apply what we would send, so the output proves the patch and not just the policy
    pod = jsonpatch.apply_patch(r.pod, r.patch)
    kind = workloads.kind_of(r.item.obj)
    if output == "workload" and kind is None:
        raise UsageError(f"-o workload shows a mutated workload; {r.item.source} is a {r.kind}: use -o pod")
    shown = workloads.with_pod(r.item.obj, kind, pod) if output == "workload" and kind else pod
    text: str = yaml.safe_dump(shown, sort_keys=False)
    return text


def _stream(results: Sequence[Reviewed], output: str) -> str:
    """A YAML stream: with `pod`, the pod of each object that carries one, as mutated; with
    `workload`, every object, pods and pod templates as mutated, the rest as given, so a pipeline
    (`kubectl kustomize DIR | netqos-webhook review - -o workload | kubectl apply -f -`) keeps them."""
    import jsonpatch

    from webhook import workloads

    documents = []
    for r in results:
        if r.pod is None:  # not a pod, or a workload without a usable template (invalid)
            if output == "workload":
                documents.append(r.item.obj)
            continue
        pod = jsonpatch.apply_patch(r.pod, r.patch)
        kind = workloads.kind_of(r.item.obj)
        documents.append(workloads.with_pod(r.item.obj, kind, pod) if output == "workload" and kind else pod)
    return yaml.safe_dump_all(documents, sort_keys=False) if documents else ""


def _check_pods(results: Sequence[Reviewed], files: Sequence[str]) -> None:
    """`-o pod` over several objects prints the pods: input with none is refused as one object
    that is no pod is (exit 2, not an empty stream), and the objects left out are counted."""
    left_out = [r for r in results if r.pod is None]
    if len(left_out) == len(results):
        kinds = ", ".join(sorted({r.kind for r in results}))
        raise UsageError(
            f"-o pod prints pods; {_holding(files)} none ({_count(len(results))}: {kinds}); give {ACCEPTED}"
        )
    if left_out:
        print(f"Warning: -o pod: {_count(len(left_out))} left out, carrying no pod to print", file=sys.stderr)


def _verdict(results: Sequence[Reviewed], fail_on: frozenset[str]) -> int:
    failing = [r for r in results if r.decision in fail_on]
    if not failing:
        return EXIT_OK
    decisions = ", ".join(sorted({r.decision for r in failing}))
    print(
        f"netqos-webhook review: {len(failing)} of {len(results)} objects decided {decisions} (--fail-on)",
        file=sys.stderr,
    )
    return EXIT_FOUND


def _holding(paths: Sequence[str]) -> str:
    """The paths as a list a person reads as so many ("a.yaml and b.yaml", each whole even with
    a space in it), with the verb that agrees: "a.yaml holds", "a.yaml and b.yaml hold"."""
    if len(paths) == 1:
        return f"{paths[0]} holds"
    shown = [json.dumps(p) if " " in p or "," in p else p for p in paths]
    return f"{', '.join(shown[:-1])} and {shown[-1]} hold"


def _count(objects: int) -> str:
    return f"{objects} object" if objects == 1 else f"{objects} objects"


def _text(value: Any) -> str:
    return str(value) if isinstance(value, str) else ""
