"""`netqos-webhook status`: read a cluster through `webhook.cluster`, judge it with `webhook.status`.

Read-only: gets and paginated lists, nothing else. Pods are listed once per rule with the rule's
podSelector as the server-side `labelSelector` and `status.phase` as `fieldSelector` (finished
pods hold no node and need no preference), so a cluster of 150,000 pods sends only the selected
ones, a page at a time. The pods that take the `net=high` nodes' resources are read only when a
selected pod is not on such a node (see `_pods_on_nodes`), and every bound pod at most once: the
count of pods `rebalance` would move starts from that read when it was one list of them all. What
RBAC forbids is `status.Unknown`,
reported, not a failure. The report renders here, as a table or as JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import itertools
import socket
import ssl
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO
from urllib.parse import urlsplit

import orjson

from webhook import rebalance, scope, status
from webhook.apidata import ShapeError
from webhook.commands import clusterread, flags, typed
from webhook.commands.clusterread import get_object, listed, policy_of
from webhook.commands.plan import SchedulerProfiles, read_plan
from webhook.errors import UsageError
from webhook.manifests import check_namespace
from webhook.names import CONFIGURATION_NAME, DEFAULT_NAMESPACE, DEFAULT_SERVICE, TLS_SECRET
from webhook.owners import CLIMB, TEMPLATED
from webhook.placement import NET_CLASSES
from webhook.policy import Policy
from webhook.policy_file import load_policy
from webhook.scheduler.model import Target
from webhook.status import Certificate, MissingPod, Report

# Past this many net=high nodes, one list of every bound pod instead of one list per such node: a
# request costs a round trip and the API server's work per request, and the one list also serves
# the plan of how many pods would move.
PER_NODE_LISTS = 50
CONNECT_TIMEOUT = 4.0  # seconds for the TLS handshake with an out-of-cluster webhook, as for the API server

HELP = (
    "Check, read-only, that a cluster carries out NetQoS: the webhook's registration, certificate and "
    "endpoints; which selected pods carry the preference (and which were created without it); whether "
    "they run on net=high nodes, and if not, why. Exit code 0 when all is well, 3 when there are "
    "problems or pods missing the preference, 1 when the cluster fails or nothing could be checked (RBAC "
    "hid the registration and the pods), 2 for unusable input. What RBAC hides is reported as unknown."
)
EXAMPLE = (
    "netqos-webhook status --context prod -o json\n"
    "  netqos-webhook status --context prod --scheduler-config scheduler.yaml   # judge its profiles' pods by them"
)


@dataclass(frozen=True)
class StatusArgs(flags.ClusterArgs):
    webhook_namespace: str = DEFAULT_NAMESPACE
    config: str | None = None  # a policy file instead of the one the webhook serves
    namespace: str | None = None  # None: every namespace
    output: str = "table"  # table | json
    scheduler_config: Sequence[str] = ()  # KubeSchedulerConfiguration files: the schedulers' profiles


def add_command(sub: flags.Subcommands) -> None:
    p = flags.command(sub, "status", HELP, EXAMPLE, _main)
    flags.cluster(p, "read the cluster of ")
    flags.webhook_namespace(p, f"namespace the webhook runs in (default {DEFAULT_NAMESPACE})")
    flags.config(p, "judge by this policy file instead of the one the installed webhook serves (its ConfigMap)")
    flags.namespaces(p, "the pods")
    flags.output(p, ("table", "json"), "output format (default table)")
    flags.scheduler_configs(
        p,
        "is judged by that profile's Filter plugins (NodeAffinity's addedAffinity among their arguments) when it "
        "is not on a net=high node, and counted among the pods rebalance would move as rebalance with the same "
        "files predicts it; without one, every pod is judged by kube-scheduler's default profile, which for a pod "
        "of another scheduler its reasons say, and such pods are not counted as movable",
    )


def _main(parsed: argparse.Namespace, out: TextIO) -> int:
    return run(typed(StatusArgs, parsed), out)


def run(args: StatusArgs, out: TextIO, now: dt.datetime | None = None) -> int:
    """Print the status of the cluster; the exit code: 0 all well, 3 problems or missing pods, 1
    nothing could be checked.

    Raises `PolicyError` for an unusable --config, `UsageError` for an unusable --scheduler-config
    (exit 2) and `clusterread.ClusterError` when the cluster cannot be read (its `exit_code`: 2 for
    unusable credentials, else 1).
    """
    for namespace in (args.webhook_namespace, args.namespace):
        if namespace is not None:
            check_namespace(namespace)  # as rebalance, review and explain check it
    override = load_policy(args.config) if args.config else None
    schedulers = SchedulerProfiles.read(args.scheduler_config, UsageError)
    with clusterread.reader(args) as reader:
        # the analysis streams the lists: one that expires between pages starts it over
        report = reader.restarting(lambda: _report(reader, args, override, now or dt.datetime.now(dt.UTC), schedulers))
    out.write(render_json(report) if args.output == "json" else render_table(report))
    return report.exit_code


def _report(
    reader: clusterread.Reader,
    args: StatusArgs,
    override: Policy | None,
    now: dt.datetime,
    schedulers: SchedulerProfiles,
) -> Report:
    try:
        bound = _BoundPods()
        view = _view(reader, args, override, now, bound, schedulers)
        report = status.analyse(view)
        lookups = status.owner_lookups(report)
        owners = _owners(reader, lookups)
        status.with_owners(report, owners)
        _movable(reader, view, args.namespace, report, bound, schedulers)
    except ShapeError as err:  # no API server stores such an object: a proxy or a stand-in sent it
        raise clusterread.ClusterError(
            f"the API server at {reader.cluster.host} sent an object no Kubernetes stores: {err}"
        ) from None
    return report


def _owners(reader: clusterread.Reader, lookups: Iterable[tuple[str, str, str]]) -> dict[tuple[str, str, str], Any]:
    """The controllers (namespace, kind, name) of missing pods that may be owned themselves
    (`clusterread.controllers`); Unknown where RBAC hides them."""
    return dict(clusterread.controllers(reader, lookups))


@dataclass
class _BoundPods:
    """Every node and every pod bound to a node, folded into the plan's inventory as they stream by
    for the net=high nodes' usage, so that the plan of how many pods would move reads them no
    second time. `complete` once the list of bound pods was read to its end."""

    inventory: rebalance.Inventory | None = None
    complete: bool = False

    def nodes(
        self, items: Iterable[dict[str, Any]], policy: Policy, options: rebalance.Options
    ) -> Iterator[dict[str, Any]]:
        self.inventory = rebalance.Inventory(policy, options)
        for node in items:
            self.inventory.add_node(node)
            yield node

    def pods(self, items: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for pod in items:
            if self.inventory is not None:
                self.inventory.add_pod(pod)
            yield pod
        self.complete = self.inventory is not None


def _movable(
    reader: clusterread.Reader,
    view: status.ClusterView,
    namespace: str | None,
    report: Report,
    bound: _BoundPods,
    schedulers: SchedulerProfiles,
) -> None:
    """How many pods `rebalance` would move now (its defaults). Its plan reads every bound pod, so
    only when a bound selected pod off the net=high nodes passes some net=high node's filters now;
    when the net=high nodes' usage was read from every bound pod, the plan starts from those."""
    if report.high_nodes is None:
        return
    if not any(p.node and status.could_fit(p) for p in report.not_on_high):
        # no bound pod off the net=high nodes passes a net=high node's filters now: nothing moves
        # (planning only takes room away), and every bound pod need not be read to know it
        report.movable = 0
        return
    options = rebalance.Options(now=view.now, webhook_namespace=view.webhook_namespace)
    try:
        read = bound.inventory if bound.complete else None
        plan = read_plan(reader, view.policy, options, schedulers, read=read, version=view.version)
    except clusterread.Forbidden:
        report.unknown.append(
            "cannot read the pods of every node (forbidden by RBAC): how many pods rebalance would move"
        )
        return
    report.movable = sum(1 for c in plan.movable if namespace is None or c.namespace == namespace)
    targets = {(p.namespace, p.name): p.target for p in report.not_on_high}
    says = {
        (c.namespace, c.name): _plan_says(c, targets.get((c.namespace, c.name), report.target)) for c in plan.candidates
    }
    status.with_plan(report, says)


def _plan_says(candidate: rebalance.Candidate, target: Target) -> tuple[str, ...]:
    """What the plan found of a candidate's placement that status's own judge cannot see: no
    target node passes every Filter plugin, or one does but too rarely is in the scheduler's
    sample of nodes; () when neither."""
    if candidate.unfit:
        return candidate.unfit
    if candidate.constraint == "probability":
        return (f"a {target} node is feasible now, but {candidate.reason}",)
    return ()


def _view(
    reader: clusterread.Reader,
    args: StatusArgs,
    override: Policy | None,
    now: dt.datetime,
    bound: _BoundPods,
    schedulers: SchedulerProfiles,
) -> status.ClusterView:
    ns = args.webhook_namespace
    deployment = get_object(reader, "Deployment", status.DeploymentJSON, DEFAULT_SERVICE, ns)
    slices = listed(reader, "EndpointSlice", ns, label_selector=f"{scope.SERVICE_NAME_LABEL}={DEFAULT_SERVICE}")
    in_force = status.InForce(*policy_of(reader, deployment, ns, override, args.config))
    if in_force.problem is not None:  # the ConfigMap is unusable: the pods keep their last good policy
        in_force = status.choose(in_force, *clusterread.served_policies(reader, ns, slices))
    policy = in_force.policy
    options = rebalance.Options(now=now, webhook_namespace=ns)
    # pods are judged as the cluster's own release's scheduler filters and scores them
    version_notes: list[str] = []
    version = clusterread.release(reader, version_notes)
    configuration = get_object(
        reader, "MutatingWebhookConfiguration", status.WebhookConfigurationJSON, CONFIGURATION_NAME
    )
    admission = clusterread.admission_policies(reader)
    return status.ClusterView(
        webhook_namespace=ns,
        policy=policy,
        policy_source=in_force.source,
        configuration=configuration,
        served_certificates={url: served_certificate(url) for url in _urls(configuration)},
        pods_namespace=args.namespace,
        deployment=deployment,
        endpoint_slices=slices,
        secret=get_object(reader, "Secret", status.SecretJSON, TLS_SECRET, ns),
        namespaces=clusterread.namespaces(reader),
        nodes=_lazy(reader, "nodes", lambda: bound.nodes(clusterread.nodes(reader), policy, options)),
        pods=_lazy(reader, "pods", lambda: clusterread.selected_pods(reader, policy, args.namespace)),
        pods_on_nodes=lambda high, nodes: _pods_on_nodes(reader, high, nodes, bound),
        now=now,
        policy_problem=in_force.problem,
        policy_known=in_force.known,
        admission_policies=admission.policies,
        admission_policy_bindings=admission.bindings,
        profiles=schedulers.for_cluster(version),
        unknown_scheduler=schedulers.unknown(),
        version=version,
        version_notes=tuple(version_notes),
    )


def _urls(configuration: Any) -> set[str]:
    """The URLs our entries call (a `register --url` registration)."""
    if not isinstance(configuration, dict):
        return set()
    return {
        url
        for w in configuration.get("webhooks") or ()
        if scope.rule_of(str(w.get("name") or "")) is not None
        and (url := str((w.get("clientConfig") or {}).get("url") or ""))
    }


def served_certificate(url: str, timeout: float = CONNECT_TIMEOUT) -> bytes | str:
    """The certificate (DER) the server at `url` presents in a TLS handshake, or why none was had.
    Only read here: the analysis verifies it against the caBundle as the API server would."""
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 443
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # read, not trusted: `certs.refusal` judges it
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=host or None) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
    except (OSError, ValueError) as err:
        return f"{type(err).__name__}: {err}" if not str(err) else str(err)
    return der if der else "the server presented no certificate"


def _pods_on_nodes(reader: clusterread.Reader, high: Sequence[str], nodes: int, bound: _BoundPods) -> Any:
    """The pods bound to the `high` nodes and not finished, in every namespace, streamed.

    While the high nodes are few (at most PER_NODE_LISTS, and at most a tenth of the `nodes`),
    one list per high node with the field selector `kubectl describe node` sends
    (`spec.nodeName=NAME`, which the API server answers from an index): only the pods on high
    nodes cross the wire, at the cost of one request per node. Beyond that, one paginated list of
    every bound pod, folded into `bound` on the way: the requests stay few, and the plan of how
    many pods would move (`_movable`), which needs every bound pod, reads them no second time.
    """
    if len(high) <= PER_NODE_LISTS and len(high) * 10 <= nodes:

        def items() -> Iterable[dict[str, Any]]:
            return clusterread.pods_on_nodes(reader, high)
    else:

        def items() -> Iterable[dict[str, Any]]:
            return bound.pods(clusterread.bound_pods(reader))

    return _lazy(reader, "pods on net=high nodes", items)


def _lazy(reader: clusterread.Reader, what: str, items: Callable[[], Iterable[dict[str, Any]]]) -> Any:
    """`items()` as an iterator whose first page is read now, so a 403 becomes Unknown here and
    the rest streams into the analysis page by page."""
    iterator = iter(items())
    try:
        first = next(iterator, None)
    except clusterread.Forbidden:
        return status.Unknown(f"the {what}")
    return iter(()) if first is None else itertools.chain((first,), iterator)


# --- output ------------------------------------------------------------------------------------

# A top owner's kind -> how to recreate its pods (the table prints it; status never runs it).
RECREATE = {
    "Deployment": "kubectl -n {ns} rollout restart deployment/{name}",
    "StatefulSet": "kubectl -n {ns} rollout restart statefulset/{name}",
    "DaemonSet": "kubectl -n {ns} rollout restart daemonset/{name}",
    "CronJob": "the next Job of cronjob/{name} is covered; its running pods keep their placement",
    "Job": "kubectl -n {ns} delete job {name}, then create it again",
    "ReplicaSet": "kubectl -n {ns} delete pods of replicaset/{name}; it creates new ones",
}
# The top owners of long-running pods `rebalance --missing` recreates (their controllers re-create a
# pod from a template, `owners.TEMPLATED`): the table offers it beside RECREATE. Not a Job's or a
# CronJob's: recreating a running Job pod restarts its work, and the next Job is covered anyway.
REBALANCED = frozenset({*TEMPLATED, *CLIMB.values()}) - {"Job", "CronJob"}
REBALANCE_MISSING = "netqos-webhook rebalance --missing --apply (a pod per owner per run, through the Eviction API)"


def to_json(report: Report) -> dict[str, Any]:
    """The documented shape (docs/commands.md and docs/operations.md); keys may be added, never changed."""

    def cert(c: Certificate | None, verified: bool) -> dict[str, Any] | None:
        if c is None:
            return None
        out: dict[str, Any] = {"not_after": c.not_after, "days_left": c.days_left}
        if verified:
            out["verifies_against_ca_bundle"] = bool(c.verifies_against_ca_bundle)
        return out

    return {
        "installation": report.installation,
        "webhook": {
            "configuration": report.configuration,
            "entries": [dataclasses.asdict(e) for e in report.entries],
            "ready_endpoints": report.ready_endpoints,
            "urls": report.urls,
            "deployment": report.deployment,
            "certificate": cert(report.certificate, True),
            "ca": cert(report.ca, False),
        },
        "admission_policies": [dataclasses.asdict(e) for e in report.admission_policies],
        "policy": {"source": report.policy_source, "rules": report.rules},
        # null where the pods (or, for the classes of nodes, the nodes) could not be read
        "pods": {
            k: None if report.pods_unknown else report.pods[k]
            for k in ("selected", "injected", "explicit", "opted_out", "missing", status.EARLIER)
        },
        "placement": {
            **{k: _placement_count(report, k) for k in NET_CLASSES},
            "movable": report.movable,
        },
        "high_nodes": report.high_nodes,
        # Built by hand: dataclasses.asdict deep-copies, which costs seconds for 30,000 pods.
        "missing": [
            {"namespace": p.namespace, "name": p.name, "owner": p.owner, "created": p.created} for p in report.missing
        ],
        # "high_nodes", "not_on_high" and "net" keep their names whatever the rules' targets
        # (the nodes of `netqos.rule_target`, the node's value of its key): they are an API.
        "not_on_high": [
            {
                "namespace": p.namespace,
                "name": p.name,
                "node": p.node,
                "net": p.net,
                "why": list(p.why),
                "target": str(p.target),
            }
            for p in report.not_on_high
        ],
        "problems": report.problems,
        "unknown": report.unknown,
    }


def render_json(report: Report) -> str:
    return orjson.dumps(to_json(report), option=orjson.OPT_INDENT_2).decode() + "\n"


def render_table(report: Report, limit: int = 20) -> str:
    """For people: registration first, then counts, then the pods to act on (lists cut at `limit`)."""
    lines = [f"INSTALLATION {report.installation}", "WEBHOOK"]
    missing = "unknown (cannot read it)" if report.configuration_unknown else "MISSING"
    if report.not_installed:  # nothing to check of a registration, Service or certificate
        lines.append("  not installed     no registration, no Deployment")
    else:
        lines.append(f"  configuration     {report.configuration or missing}")
    for e in report.entries:
        flags = [
            "caBundle " + ("ok" if e.ca_bundle else "EMPTY"),
            "objectSelector " + ("= policy" if e.object_selector_matches_policy else "DRIFTED"),
            f"failurePolicy {e.failure_policy}",
            f"timeout {e.timeout_seconds}s",
        ]
        lines.append(f"  entry {e.name:<12} rule {e.rule}: {', '.join(flags)}")
    for url in report.urls:  # an out-of-cluster webhook: no Service, no endpoints
        lines.append(f"  url               {url}")
    if not report.not_installed and (not report.urls or report.ready_endpoints is not None):
        lines.append(f"  ready endpoints   {_or_unknown(report.ready_endpoints)}")
    if report.deployment is not None:
        lines.append(f"  deployment        {report.deployment['ready_replicas']}/{report.deployment['replicas']} ready")
    if report.certificate is not None:
        c = report.certificate
        verifies = "verifies against caBundle" if c.verifies_against_ca_bundle else "does NOT verify against caBundle"
        lines.append(f"  certificate       until {c.not_after} ({c.days_left} days), {verifies}")
    if report.ca is not None:
        lines.append(f"  CA                until {report.ca.not_after} ({report.ca.days_left} days)")
    for a in report.admission_policies:
        flags = ["bound" if a.bound else "NOT BOUND", "= policy" if a.matches_policy else "DRIFTED"]
        lines.append(f"  admission policy  {a.name} rule {a.rule}: {', '.join(flags)}")
    lines.append(f"  policy            {report.policy_source}: rules {', '.join(report.rules) or '-'}")
    lines.append("")
    p = report.pods
    if report.pods_unknown:
        lines.append("PODS      unknown (cannot read the pods)")
    else:
        lines.append(
            f"PODS      selected {p['selected']}: injected {p['injected']}, explicit {p['explicit']}, "
            f"opted out {p['opted_out']}, missing {p['missing']}"
            + (f", injected by an earlier policy {p[status.EARLIER]}" if p[status.EARLIER] else "")
        )
    movable = "" if report.movable is None else f"; rebalance would move {report.movable} now"
    if report.pods_unknown:
        lines.append("PLACEMENT unknown (cannot read the pods)")
    elif report.high_nodes is None:
        lines.append(f"PLACEMENT unknown (cannot read the nodes), pending {report.placement['pending']}")
    else:
        lines.append("PLACEMENT " + ", ".join(f"{k} {report.placement[k]}" for k in NET_CLASSES) + movable)
    if report.missing:
        lines += ["", "MISSING THE PREFERENCE (created without it; recreate to fix)"]
        groups: dict[tuple[str, str | None], list[MissingPod]] = {}
        for pod in report.missing:
            groups.setdefault((pod.namespace, pod.owner), []).append(pod)
        for (ns, owner), pods in _cut(sorted(groups.items(), key=lambda g: (g[0][0], g[0][1] or "")), limit, lines):
            oldest = min(p.created for p in pods)
            names = ", ".join(p.name for p in pods[:3]) + (f" and {len(pods) - 3} more" if len(pods) > 3 else "")
            lines.append(f"  {ns}/{owner or 'Pod (no owner)'}: {len(pods)} pod(s) created since {oldest}: {names}")
            lines.append(f"    recreate: {_recreate(ns, owner, pods)}")
            if owner is not None and owner.partition("/")[0] in REBALANCED:
                lines.append(f"    or:       {REBALANCE_MISSING}")
    if report.not_on_high:
        targets = {p.target for p in report.not_on_high}
        one = next(iter(targets)) if len(targets) == 1 else None
        lines += ["", f"NOT ON A {one} NODE" if one else "NOT ON A NODE OF THEIR RULE'S BEST CLASS"]
        for pod in _cut(report.not_on_high, limit, lines):
            where = f"on {pod.node} ({pod.target.key}={pod.net or '<none>'})" if pod.node else "pending"
            wanted = "" if one else f" (wants {pod.target})"
            lines.append(f"  {pod.namespace}/{pod.name} {where}{wanted}: {'; '.join(pod.why)}")
    lines += ["", f"PROBLEMS ({len(report.problems)})" if report.problems else "PROBLEMS none"]
    lines += [f"  - {problem}" for problem in report.problems]
    lines += [f"  ? {u}" for u in report.unknown]
    if report.checked_nothing:
        lines += ["", f"RESULT nothing could be checked (forbidden by RBAC): exit {report.exit_code}"]
        return "\n".join(lines) + "\n"
    lines += [
        "",
        f"RESULT {len(report.problems)} problem(s), {len(report.missing)} pod(s) missing the preference: "
        f"exit {report.exit_code}",
    ]
    return "\n".join(lines) + "\n"


def _cut(items: Sequence[Any], limit: int, lines: list[str]) -> Iterable[Any]:
    yield from items[:limit]
    if len(items) > limit:
        lines.append(f"  ... and {len(items) - limit} more (-o json lists all)")


def _recreate(ns: str, owner: str | None, pods: Sequence[MissingPod]) -> str:
    if owner is None:
        return f"delete and re-create the pod(s) from their manifests (kubectl -n {ns} delete pod {pods[0].name} ...)"
    kind, _, name = owner.partition("/")
    return RECREATE.get(kind, "recreate them through their owner {kind}/{name}").format(ns=ns, name=name, kind=kind)


def _placement_count(report: Report, net_class: str) -> int | None:
    if report.pods_unknown or (report.high_nodes is None and net_class != "pending"):
        return None
    return report.placement[net_class]


def _or_unknown(value: Any) -> str:
    return "unknown" if value is None else str(value)
