"""`netqos-webhook rebalance`: read a cluster through `webhook.cluster`, plan with
`webhook.rebalance`, and with `--apply` evict the planned pods through the Eviction API.

What it reads: every Node, and every pod bound to a node and not finished (one paginated list, in
every namespace: the prediction for a replacement scores every node, so it needs what each holds);
the ReplicaSets and Jobs of the candidates, for their Deployment or CronJob; without `--config`,
the webhook's Deployment and policy ConfigMap, as `status` finds the policy. Without `--apply`
nothing is written. With it, the planned pods are evicted in plan order (`policy/v1` Eviction, with
the pod's uid as a precondition) until `--max-evictions` succeeded: a 429 whose Status names the
DisruptionBudget cause is a PodDisruptionBudget that allows no disruption now (`blocked`, not
retried in this run), another 429 is API Priority and Fairness (retried after its Retry-After, then
`throttled` and the run stops), a 404 a pod already gone (`gone`), any other refusal is reported for
the pod and the run goes on; after MAX_FAILED_EVICTIONS refusals the run stops asking.

Each eviction is recorded as the descheduler records one: an `events.k8s.io/v1` Event on the pod
and one on its owner (`evictions.event`); and in the ConfigMap `--history-configmap` in
`--webhook-namespace` (`evictions.Record`, one per owner, read before planning and written once
after the evictions): an owner whose last replacement went to a slower node, in a world that has
not changed since, is skipped (`repeat`). Neither write can undo an eviction: a refused one is a
warning in the output, never a failed run.

`--missing` plans and evicts recreations instead (`rebalance.Options.missing`): the pods created
without the preference while the webhook was down, wherever they run, each evicted so that its
controller recreates it through the webhook, by the same rules, the same Eviction API and the
same records (of their own mode) and Events.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import socket
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import orjson

from webhook import cluster, evictions, rebalance
from webhook.commands import clusterread, flags, typed
from webhook.commands.clusterread import policy_in_force
from webhook.commands.plan import SchedulerProfiles, read_plan
from webhook.commands.tables import aligned
from webhook.errors import EXIT_FOUND, EXIT_OK, EXIT_RUNTIME, RuntimeFailure, UsageError
from webhook.manifests import check_namespace
from webhook.names import DEFAULT_NAMESPACE, REBALANCE_HISTORY
from webhook.policy_file import load_policy

MAX_FAILED_EVICTIONS = 10  # refused evictions (429, 403, ...) after which a run stops asking
THROTTLE_RETRIES = 3  # a throttled eviction is asked again this many times, after Retry-After
MAX_RETRY_AFTER = 10.0  # seconds: the longest wait for one Retry-After
TABLE_LIMIT = 50  # rows per section of the table; -o json lists every candidate
EVICTED, BLOCKED, GONE, THROTTLED, ERROR = "evicted", "blocked", "gone", "throttled", "error"
MAX_EVICTIONS = 1000  # per run: the point of a run is a few moves the budgets can absorb
MAX_REPLICAS = 100_000
WRITE_TRIES = 3  # the records' ConfigMap is written again after a conflict this many times in all

HELP = (
    "Move latency-sensitive pods that run on slower nodes back to net=high nodes that have room now. "
    "Plans, for each such pod in turn (longest on a slow node first), the net=high node its replacement "
    "fits and kube-scheduler would pick, reserving room for every planned pod; skips, with the reason, "
    "pods that must not be evicted (among them system-critical pods, pods whose replacement the live "
    "registration would not send to the webhook, and pods of a scheduler whose profile is not known). Each "
    "replacement is predicted with the profile of its spec.schedulerName: default-scheduler's is kube-scheduler's "
    "default profile, others' come from --scheduler-config. With --apply, evicts through the Eviction API, so "
    "PodDisruptionBudgets hold, and records each eviction: an Event on the pod and on its owner, and a record "
    "per owner in --history-configmap, by which an owner whose replacement went to a slower node is not evicted "
    "again while the net=high nodes and their pods are unchanged; without an active registration it evicts "
    "nothing. With --missing, recreates instead the running pods created without the preference while the "
    "webhook was down (what status lists as missing), wherever they run, by the same rules and evictions; where "
    "each replacement is predicted to land is said, not required. Exit code 0 when nothing "
    "movable is left, 3 when movable pods remain or no registration is active, 1 when the cluster (or an "
    "eviction) fails, 2 for unusable input."
)
EXAMPLE = (
    "netqos-webhook rebalance --context prod            # the plan; nothing is evicted\n"
    "  netqos-webhook rebalance --context prod --apply    # evict the first planned pod\n"
    "  netqos-webhook rebalance --context prod --scheduler-config scheduler.yaml   # predict its profiles' pods too\n"
    "  netqos-webhook rebalance --context prod --missing --apply   # recreate a pod created without the preference"
)


@dataclass(frozen=True)
class RebalanceArgs(flags.ClusterArgs):
    webhook_namespace: str = DEFAULT_NAMESPACE
    config: str | None = None  # a policy file instead of the one the webhook serves
    output: str = "table"  # table | json
    apply: bool = False
    max_evictions: int = 1
    min_replicas: int = rebalance.DEFAULT_MIN_REPLICAS
    min_age: dt.timedelta = rebalance.DEFAULT_MIN_AGE
    min_probability: float = rebalance.DEFAULT_MIN_PROBABILITY
    include_local_storage: bool = False
    movable_exit_code: int = EXIT_FOUND
    scheduler_config: Sequence[str] = ()  # KubeSchedulerConfiguration files: the schedulers' profiles
    forget_after: dt.timedelta = evictions.DEFAULT_FORGET_AFTER
    history_configmap: str = REBALANCE_HISTORY
    missing: bool = False  # recreate the pods created without the preference instead of moving stranded ones


@dataclass(frozen=True)
class Eviction:
    namespace: str
    name: str
    result: str  # EVICTED, BLOCKED, GONE, THROTTLED or ERROR
    message: str
    at: dt.datetime | None = None  # when it was asked for
    warnings: tuple[str, ...] = ()  # the Events that could not be recorded, and why


@dataclass
class RebalanceResult:
    plan: rebalance.Plan
    policy_source: str
    applied: bool
    max_evictions: int
    movable_exit_code: int = EXIT_FOUND
    evictions: list[Eviction] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what --apply could not record; never a failure

    @property
    def remaining(self) -> int:
        """Movable pods not evicted in this run (nor gone before it could)."""
        return len(self.plan.movable) - sum(1 for e in self.evictions if e.result in (EVICTED, GONE))

    @property
    def exit_code(self) -> int:
        if any(e.result == ERROR for e in self.evictions):
            return EXIT_RUNTIME
        if self.plan.registration:  # nothing may move until the webhook is registered and serving
            return EXIT_FOUND
        return self.movable_exit_code if self.remaining > 0 else EXIT_OK


def add_command(sub: flags.Subcommands) -> None:
    p = flags.command(sub, "rebalance", HELP, EXAMPLE, _main)
    flags.cluster(p, "rebalance the cluster of ")
    flags.webhook_namespace(
        p, f"namespace the webhook runs in: its policy is read from there (default {DEFAULT_NAMESPACE})"
    )
    flags.config(p, "plan by this policy file instead of the one the installed webhook serves (its ConfigMap)")
    flags.output(p, ("table", "json"), "output format (default table)")
    p.add_argument(
        "--apply",
        action="store_true",
        help="evict the planned pods (at most --max-evictions); without it nothing is written to the cluster",
    )
    flags.number(p, "--max-evictions", 1, MAX_EVICTIONS, 1, "evict at most N pods in one run")
    flags.number(
        p,
        "--min-replicas",
        0,
        MAX_REPLICAS,
        rebalance.DEFAULT_MIN_REPLICAS,
        "never evict a pod whose controller has fewer than N ready pods",
    )
    p.add_argument(
        "--min-age",
        type=flags.duration,
        default=rebalance.DEFAULT_MIN_AGE,
        metavar="DURATION",
        help="never evict a pod younger than this (default 10m; e.g. 1h, 90s, 0)",
    )
    flags.number(
        p,
        "--min-probability",
        0,
        1,
        rebalance.DEFAULT_MIN_PROBABILITY,
        "in a cluster of 100 nodes or more, where kube-scheduler scores a rotating sample of the nodes in each cycle, "
        "move a pod only when its replacement lands on a net=high node with at least this probability",
        "P",
        fraction=True,
    )
    flags.scheduler_configs(
        p,
        "is predicted with that profile's plugins and weights (the NetQoS scheduler plugin's among them); without "
        "one, only default-scheduler's pods are (kube-scheduler's default profile), and pods of another scheduler "
        "are skipped",
    )
    p.add_argument(
        "--missing",
        action="store_true",
        help=(
            "instead of moving stranded pods, recreate the running pods created without the preference (while the "
            "webhook was down: what status lists as missing), on any node, net=high ones included, by the same "
            "rules (an active registration, PodDisruptionBudgets, --min-replicas, --max-evictions, one pod per "
            "owner, the records); where each replacement is predicted to land is said, not required"
        ),
    )
    p.add_argument(
        "--include-local-storage",
        action="store_true",
        help="also evict pods with emptyDir or hostPath volumes (their data is lost)",
    )
    p.add_argument(
        "--forget-after",
        type=flags.duration,
        default=evictions.DEFAULT_FORGET_AFTER,
        metavar="DURATION",
        help=(
            "forget an eviction this long after it was made: until then, an owner whose replacement went to a "
            "slower node is not evicted again while the net=high nodes and the pods on them are unchanged "
            "(default 24h)"
        ),
    )
    p.add_argument(
        "--history-configmap",
        default=REBALANCE_HISTORY,
        metavar="NAME",
        help=(
            "the ConfigMap in --webhook-namespace that keeps the evictions made, one per owner: read before "
            f"planning, written after --apply evicted (default {REBALANCE_HISTORY})"
        ),
    )
    flags.number(
        p,
        "--movable-exit-code",
        0,
        255,
        EXIT_FOUND,
        "exit code when movable pods remain (a CronJob that moves a few pods per run passes 0)",
        "CODE",
    )


def _main(parsed: argparse.Namespace, out: TextIO) -> int:
    return run(typed(RebalanceArgs, parsed), out)


def run(args: RebalanceArgs, out: TextIO, now: dt.datetime | None = None) -> int:
    """Plan (and with `args.apply` evict); print the report; the exit code: 0 nothing movable
    left, `args.movable_exit_code` (3) movable pods remain, 1 an eviction failed.

    Raises `PolicyError` for an unusable --config, `UsageError` for an unusable --scheduler-config
    (exit 2) and `cluster.ClusterError` when the
    cluster cannot be read (its `exit_code`: 2 for unusable credentials, else 1).
    """
    check_namespace(args.webhook_namespace)  # as status, review and explain check it
    override = load_policy(args.config) if args.config else None
    schedulers = SchedulerProfiles.read(args.scheduler_config, UsageError)
    options = rebalance.Options(
        now=now or dt.datetime.now(dt.UTC),
        min_replicas=args.min_replicas,
        min_age=args.min_age,
        include_local_storage=args.include_local_storage,
        webhook_namespace=args.webhook_namespace,
        min_probability=args.min_probability,
        missing=args.missing,
    )
    with clusterread.reader(args) as reader:
        connection = reader.cluster  # --apply evicts and records through the same credentials
        policy, source, problem = policy_in_force(reader, args.webhook_namespace, override, args.config)
        if problem:
            raise RuntimeFailure(f"{problem}; fix it, or plan by a policy file with --config FILE")
        stored = _History.read(reader, args.webhook_namespace, args.history_configmap, options.now, args.forget_after)
        plan = read_plan(reader, policy, options, schedulers, dry_run=True, history=stored.history)
    plan.notes += stored.notes
    report = RebalanceResult(plan, source, args.apply, args.max_evictions, args.movable_exit_code)
    if args.apply:
        clock = _clock(options.now)
        report.evictions = evict(connection, plan.movable, args.max_evictions, clock=clock)
        report.warnings = [w for e in report.evictions for w in e.warnings]
        report.warnings += stored.remember(connection, _records(plan, report.evictions), clock())
    out.write(render_json(report) if args.output == "json" else render_table(report))
    if args.output == "json":
        for note in plan.notes:
            print(f"netqos-webhook rebalance: {note}", file=sys.stderr)
        for warning in report.warnings:
            print(f"netqos-webhook rebalance: warning: {warning}", file=sys.stderr)
        if plan.registration:
            print(f"netqos-webhook rebalance: nothing may be evicted: {plan.registration}", file=sys.stderr)
    return report.exit_code


def evict(
    connection: cluster.Connection,
    movable: Sequence[rebalance.Candidate],
    limit: int,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], dt.datetime] | None = None,
) -> list[Eviction]:
    """Evict `movable` in order until `limit` evictions succeeded (a pod already gone does not
    count) or MAX_FAILED_EVICTIONS were refused. A 429 is a PodDisruptionBudget's only when its
    Status names the DisruptionBudget cause (`blocked`, not retried); any other 429 is API Priority
    and Fairness throttling: retried after its Retry-After (at most THROTTLE_RETRIES times, each
    wait at most MAX_RETRY_AFTER s), then reported `throttled` and the run stops asking. Each
    eviction that succeeded is recorded as an Event on the pod and on its owner (`announce`)."""
    results: list[Eviction] = []
    evicted = failed = 0
    clock = clock or (lambda: dt.datetime.now(dt.UTC))
    with cluster.Evictor(connection) as evictor:
        for candidate in movable:
            if evicted >= limit or failed >= MAX_FAILED_EVICTIONS:
                break
            at = clock()
            result = dataclasses.replace(_evict_one(evictor, candidate, sleep or time.sleep), at=at)
            if result.result == EVICTED:
                result = dataclasses.replace(result, warnings=announce(evictor, candidate, clock()))
            results.append(result)
            if result.result == EVICTED:
                evicted += 1
            elif result.result in (BLOCKED, ERROR):
                failed += 1
            elif result.result == THROTTLED:
                break  # the API server is overloaded: the next run goes on
    return results


def _evict_one(evictor: cluster.Evictor, candidate: rebalance.Candidate, sleep: Callable[[float], None]) -> Eviction:
    ns, name = candidate.namespace, candidate.name
    for attempt in range(THROTTLE_RETRIES + 1):
        try:
            evictor.evict(ns, name, candidate.uid)
        except cluster.TooManyRequests as err:
            if err.disruption_budget:
                return Eviction(ns, name, BLOCKED, f"blocked by a PodDisruptionBudget ({err.detail})")
            if attempt == THROTTLE_RETRIES:
                return Eviction(
                    ns, name, THROTTLED, f"throttled by the API server after {attempt + 1} tries ({err.detail})"
                )
            sleep(min(err.retry_after if err.retry_after is not None else 1.0, MAX_RETRY_AFTER))
            continue
        except cluster.NotFound as err:
            return Eviction(ns, name, GONE, f"already gone ({err.detail})")
        except cluster.ClusterError as err:
            return Eviction(ns, name, ERROR, str(err))
        if candidate.missing:
            return Eviction(ns, name, EVICTED, f"evicted from {candidate.node} to be recreated with the preference")
        return Eviction(ns, name, EVICTED, f"evicted from {candidate.node} for {candidate.target}")
    raise AssertionError("unreachable: the last attempt returns")


def announce(evictor: cluster.Evictor, candidate: rebalance.Candidate, when: dt.datetime) -> tuple[str, ...]:
    """Record the eviction as the descheduler does: an Event on the pod and one on its owner, each
    naming the other (`evictions.event`). What cannot be recorded is a warning, never a failure:
    the pod is evicted either way."""
    c = candidate
    pod = evictions.Reference("Pod", c.namespace, c.name, c.uid)
    because = f"so that its replacement lands on {c.target}: {c.reason}"
    if c.missing:
        because = f"so that its replacement is created with the preference: {c.reason}"
    notes: list[tuple[evictions.Reference, evictions.Reference | None, str]] = [
        (pod, None, f"evicted from {c.node} by netqos-webhook rebalance {because}")
    ]
    if c.owner is not None:
        owner = evictions.Reference(c.owner.kind, c.namespace, c.owner.name, c.owner.uid)
        notes = [(pod, owner, notes[0][2]), (owner, pod, f"pod {c.name} evicted from {c.node} {because}")]
    warnings: list[str] = []
    host = socket.gethostname()
    for regarding, related, note in notes:
        event = evictions.event(regarding, related, note, when, host, str(uuid.uuid4()))
        try:
            evictor.record_event(event)
        except cluster.ClusterError as err:
            warnings.append(
                f"no Event recorded on {regarding.kind} {regarding.namespace}/{regarding.name} (it is evicted): {err}"
            )
    return tuple(warnings)


def _clock(start: dt.datetime) -> Callable[[], dt.datetime]:
    """The time now, as an offset from the run's `start` (which tests fix)."""
    began = time.monotonic()
    return lambda: start + dt.timedelta(seconds=time.monotonic() - began)


def _records(plan: rebalance.Plan, done: Sequence[Eviction]) -> list[evictions.Record]:
    """A record of each pod evicted, for its owner, in the world its plan saw."""
    by_pod = {(c.namespace, c.name): c for c in plan.movable}
    records = []
    for e in done:
        c = by_pod.get((e.namespace, e.name))
        if e.result != EVICTED or c is None or c.owner is None or c.controller is None:
            continue
        if c.target is None and not c.missing:
            continue
        at = e.at or dt.datetime.now(dt.UTC)
        newest = plan.newest.get(c.controller.uid)
        mode = evictions.MISSING if c.missing else ""
        target = c.target or ""  # a recreation's replacement may not have been predicted
        records.append(
            evictions.Record(
                c.namespace, c.owner, c.controller, c.name, c.uid, c.node, target, at, plan.world, newest, mode
            )
        )
    return records


@dataclass
class _History:
    """The records' ConfigMap as read before planning: the records in force, the object (None when
    there is none yet), and whether it could be read at all."""

    namespace: str
    name: str
    history: evictions.History
    found: dict[str, Any] | None
    readable: bool
    notes: list[str]

    @classmethod
    def read(
        cls, reader: cluster.Reader, namespace: str, name: str, now: dt.datetime, forget_after: dt.timedelta
    ) -> _History:
        try:
            found = reader.get("ConfigMap", name, namespace)
        except cluster.Forbidden:
            note = (
                f"cannot read the ConfigMap {name} in namespace {namespace} (forbidden by RBAC): the evictions made "
                "before are not known, so a pod whose last replacement went to a slower node may be evicted again"
            )
            return cls(namespace, name, evictions.History((), forget_after), None, False, [note])
        history, notes = evictions.read(found.get("data") if found else None, now, forget_after)
        notes = [f"ConfigMap {namespace}/{name}: {n}" for n in notes]
        return cls(namespace, name, history, found, True, notes)

    def remember(
        self, connection: cluster.Connection, records: Sequence[evictions.Record], now: dt.datetime
    ) -> list[str]:
        """Add `records` to the ConfigMap (created when there is none), re-read and merged again
        when another writer changed it first; a warning when it cannot be written."""
        if not records:
            return []
        where = f"ConfigMap {self.namespace}/{self.name}"
        if not self.readable:
            return [f"the evictions of this run are not recorded: {where} cannot be read"]
        found = self.found
        forget_after = self.history.forget_after
        with cluster.Evictor(connection) as writer:
            for _ in range(WRITE_TRIES):
                kept = evictions.read(found.get("data") if found else None, now, forget_after)[0].records
                data = evictions.data(evictions.pruned([*kept, *records], now, forget_after))
                try:
                    writer.write_config_map(self.namespace, self.name, data, found)
                    return []
                except cluster.Conflict:
                    try:
                        with cluster.Reader(connection) as reader:
                            found = reader.get("ConfigMap", self.name, self.namespace)
                    except cluster.ClusterError as err:
                        return [f"the evictions of this run are not recorded in {where}: {err}"]
                except cluster.ClusterError as err:
                    return [f"the evictions of this run are not recorded in {where}: {err}"]
        return [f"the evictions of this run are not recorded: {where} changed {WRITE_TRIES} times while written"]


# ---------------------------------------------------------------------------------------------
# Output


def to_json(report: RebalanceResult) -> dict[str, Any]:
    """The documented shape (docs/operations.md, "Rebalancing"); keys may be added, never changed."""
    return {
        "candidates": [
            {
                "namespace": c.namespace,
                "name": c.name,
                "node": c.node,
                "net": c.net,
                "owner": {"kind": c.owner.kind, "name": c.owner.name} if c.owner else None,
                "action": c.action,
                "target": c.target,
                "reason": c.reason,
                "constraint": c.constraint,
                "probability": None if c.probability is None else round(c.probability, 4),
                # how its replacement was admitted: "dry-run" (the API server's answer), "model", or
                # null where no replacement was built
                "admission": c.admission or None,
                # the target's net label (null: none, or no target); with --missing the target is where the
                # replacement is predicted to land, any node, as information
                "target_net": c.target_net,
            }
            for c in report.plan.candidates
        ],
        "evicted": [
            {"namespace": e.namespace, "name": e.name, "result": e.result, "message": e.message}
            for e in report.evictions
        ],
        "summary": rebalance.summary(report.plan.candidates, report.evictions),
        "registration": {"active": not report.plan.registration, "problem": report.plan.registration},
        # what --apply could not record (an Event, the records' ConfigMap): the evictions stand
        "warnings": list(report.warnings),
        "off_high": rebalance.counted(report.plan),
        # "missing": recreations of pods created without the preference (--missing); "stranded": moves
        "mode": "missing" if report.plan.missing else "stranded",
    }


def render_json(report: RebalanceResult) -> str:
    return orjson.dumps(to_json(report), option=orjson.OPT_INDENT_2).decode() + "\n"


def _plan_line(plan: rebalance.Plan, counts: dict[str, int]) -> str:
    if plan.missing:
        return (
            f"PLAN    --missing: {counts['candidates']} running pod(s) created without the preference: "
            f"{counts['movable']} to recreate, {counts['skipped']} skipped"
        )
    return (
        f"PLAN    {plan.off_high} selected pod(s) off the net=high nodes, as status counts them ({plan.pending} "
        f"pending: the scheduler still places those); {counts['candidates']} running candidate(s): "
        f"{counts['movable']} movable, {counts['skipped']} skipped"
    )


def render_table(report: RebalanceResult, limit: int = TABLE_LIMIT) -> str:
    """For people: the moves, the skipped pods and why, the evictions, the outcome."""
    plan = report.plan
    counts = rebalance.summary(plan.candidates, report.evictions)
    lines = [
        f"POLICY  {report.policy_source}",
        f"NODES   {plan.nodes}, {plan.high_nodes} net=high",
        f"WEBHOOK {'active' if not plan.registration else 'NOT ACTIVE: ' + plan.registration}",
        _plan_line(plan, counts),
    ]
    header = ("NAMESPACE/NAME", "NODE", "NET", "OWNER", "ACTION", "TARGET", "REASON")
    if plan.missing:  # where a recreation's replacement is predicted to land: information, any node
        header = ("NAMESPACE/NAME", "NODE", "NET", "OWNER", "ACTION", "PREDICTED", "REASON")
    movable = "TO RECREATE (created without the preference)" if plan.missing else "MOVABLE"
    for action, title in ((rebalance.EVICT, movable), (rebalance.SKIP, "SKIPPED")):
        chosen = [c for c in plan.candidates if c.action == action]
        if not chosen:
            continue
        lines += ["", title]
        shown = [
            (
                f"{c.namespace}/{c.name}",
                c.node,
                c.net or "<none>",
                str(c.owner) if c.owner else "<none>",
                c.action,
                c.target or "-",
                c.reason,
            )
            for c in chosen[:limit]
        ]
        lines += aligned([header, *shown])
        if len(chosen) > limit:
            lines.append(f"... and {len(chosen) - limit} more (-o json lists all)")
    if report.applied:
        lines += ["", "EVICTIONS"]
        if report.evictions:
            lines += aligned(
                [("NAMESPACE/NAME", "RESULT", "MESSAGE")]
                + [(f"{e.namespace}/{e.name}", e.result, e.message) for e in report.evictions]
            )
        elif plan.registration:
            lines.append("none: no active registration would give a replacement the preference")
        else:
            lines.append("none: nothing to recreate" if plan.missing else "none: nothing movable")
    else:
        lines += ["", f"plan only: nothing evicted (--apply evicts up to --max-evictions {report.max_evictions})"]
    lines += [f"note: {n}" for n in plan.notes]
    lines += [f"warning: {w}" for w in report.warnings]
    code = report.exit_code
    lines += [
        "",
        f"RESULT {counts['evicted']} evicted, {counts['blocked']} blocked, {counts['gone']} gone, "
        f"{counts['throttled']} throttled, {report.remaining} movable left: "
        f"exit {code}",
    ]
    return "\n".join(lines) + "\n"
