"""`rebalance`: which latency-sensitive pods stranded on slower nodes can move back to a `net=high`
node now, and where. Pure: the cluster's API JSON in, a `Plan` out; the command reads and evicts.

The preference the webhook injects is IgnoredDuringExecution: a pod that landed on a slower node
while every fast node was full stays there. This module plans the moves, one pod at a time in a
stable order (longest on a slow node first), against one model of the cluster that every planned
move updates:

- **Candidates** are the running pods the policy selects (`policy.evaluate` on the pod as it is:
  `MUTATED` for a pod created while the webhook was down, `UNCHANGED` for one that carries the
  terms; opted-out pods and pods with their own `net` affinity are not candidates), on a node
  that is not `net=high`.
- **Never evicted**, each with its reason: what `webhook.evictability`'s named constraints
  protect (terminating, mirror, no controller, DaemonSet, system-critical priority, the live
  registration's scope, local storage, min age, replicas), and a second pod of one owner (the
  top owner: a Deployment over its ReplicaSets). Without an active registration nothing moves.
- **The replacement** is the pod its controller would create in its place, from the controller's
  pod template (`workloads.pod_of`; not from the running pod, which may carry an older policy's
  terms or an older spec): the webhook's outcome for it (its terms), no nodeName.
  It is filtered and scored, with the profile of its template's `schedulerName` (kube-scheduler's
  default profile for `default-scheduler`; another scheduler's from the KubeSchedulerConfiguration
  the command was given, the NetQoS scheduler plugin's profile among them; a scheduler whose
  profile is not known is the `scheduler` constraint's), over every node by
  `webhook.scheduler.incremental`, given what the
  pods on each node take, with the candidate itself gone from its node and every move planned so
  far counted on its target. The move is planned when kube-scheduler's prediction (the best total,
  as `explain` computes it) is a `net=high` node, which becomes the target; otherwise it is skipped
  with the reason: no `net=high` node passes the filters (their reasons, counted as the
  scheduler's FitError counts them), or a slower node scores better.

Nothing here does I/O; pods and nodes are folded in one at a time (`Inventory.add_node`,
`Inventory.add_pod`), so memory holds a usage tally per node and a small record per candidate.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook import evictability, owners, workloads
from webhook.apidata import ShapeError
from webhook.evictability import DEFAULT_MIN_AGE, DEFAULT_MIN_REPLICAS, Facts
from webhook.names import DEFAULT_NAMESPACE, DEFAULT_SCHEDULER, INJECTED_ANNOTATION, OPT_OUT_ANNOTATION
from webhook.owners import Owner
from webhook.policy import Decision, Policy, evaluate
from webhook.scheduler import keys, read
from webhook.scheduler.config import unevaluated_scores
from webhook.scheduler.incremental import World
from webhook.scheduler.model import Node, PodInfo, Profile, Target, UsageTally
from webhook.scheduler.plugins import DEFAULT_PROFILE
from webhook.scheduler.read import NO_SELECTORS, Selectors
from webhook.scheduler.scores import NETQOS_NODE_LABEL, fast_target
from webhook.scope import ALWAYS_EXCLUDED_NAMESPACES, Registration

__all__ = ["DEFAULT_MIN_AGE", "DEFAULT_MIN_REPLICAS", "Candidate", "Inventory", "Options", "Owner", "Plan", "plan"]

EVICT = "evict"
# A StatefulSet's replacement keeps the name and ordinal of the pod it replaces.
STATEFUL_LABELS = ("statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index")
NOT_MUTATED = {
    Decision.SKIPPED_EXPLICIT: "its template's own node affinity uses the policy's keys",
    Decision.SKIPPED_OPT_OUT: "its template opts out",
    Decision.NOT_SELECTED: "no rule selects its template's labels",
    Decision.INVALID: "its template is not a pod the webhook can read",
    Decision.ERROR: "the webhook fails on it",
}
SKIP = "skip"


@dataclass(frozen=True)
class Options(evictability.Options):
    webhook_namespace: str = DEFAULT_NAMESPACE  # the webhook is never called for its own namespace


@dataclass(frozen=True)
class Candidate:
    """One row of the plan: what happens to one pod, and why."""

    namespace: str
    name: str
    node: str
    net: str | None  # the node's net label; None when it has none
    owner: Owner | None  # the top owner (a Deployment over its ReplicaSet); None without a controller
    action: str  # EVICT or SKIP
    target: str | None  # the net=high node the replacement is predicted to land on
    reason: str
    uid: str = ""
    constraint: str = ""  # for a skip: the named check that kept the pod (`evictability`, or the plan's own)


@dataclass
class Plan:
    candidates: list[Candidate] = field(default_factory=list)
    nodes: int = 0
    high_nodes: int = 0
    notes: list[str] = field(default_factory=list)  # objects left out (unreadable), and why
    registration: str = ""  # why no registration is active: nothing may be evicted ("" when one is)
    off_high: int = 0  # selected pods not on a net=high node, Pending ones included, as status counts them
    pending: int = 0  # of those, the pods no node is bound to yet (the scheduler still places them)

    @property
    def movable(self) -> list[Candidate]:
        return [c for c in self.candidates if c.action == EVICT]


# ---------------------------------------------------------------------------------------------
# Reading the cluster: nodes first, then every pod bound to a node and not finished


@dataclass(frozen=True)
class _Template:
    """What every pod of one spec shares: the webhook's decision for it and its replacement's
    scheduling view (None with `error` when its fields cannot be read)."""

    decision: Decision
    replacement: PodInfo | None
    error: str = ""


@dataclass(frozen=True)
class _Replacement:
    """The pod a candidate's controller would create in its place, as the plan reads it."""

    template: _Template  # the webhook's decision for it, its scheduling view
    labels: Mapping[str, str]  # what the registration's objectSelector sees
    scheduler: str  # its schedulerName


@dataclass(frozen=True)
class _Pending:
    """A candidate as read, before it is judged."""

    facts: Facts
    uid: str
    node: str
    since: str  # when it was bound to its node (RFC 3339), for the order
    template: _Template

    @property
    def namespace(self) -> str:
        return self.facts.namespace

    @property
    def name(self) -> str:
        return self.facts.name


class Inventory:
    """The cluster as the plan needs it, folded from API objects one at a time: `add_node` for
    every Node, then `add_pod` for every pod bound to a node and not finished."""

    def __init__(self, policy: Policy, options: Options, target: Target | None = None) -> None:
        self.policy = policy
        self.options = options
        self.target = target or fast_target(policy)  # the policy's top-scoring nodes: net=high by default
        self.nodes: list[Node] = []
        self.net: dict[str, str | None] = {}
        self.fast: set[str] = set()
        self._tallies: dict[str, UsageTally] = {}
        self._usage_views = keys.UsageViews()
        self._templates: keys.Memo[bytes, _Template] = keys.Memo()
        self.pending: list[_Pending] = []
        self.ready: Counter[str] = Counter()  # controller uid -> its ready pods
        self.off_high = 0  # selected pods not on a net=high node (Pending ones included)
        self.pending_pods = 0  # of those, the ones no node is bound to
        self.notes: list[str] = []
        self._excluded = {*ALWAYS_EXCLUDED_NAMESPACES, options.webhook_namespace}

    def add_node(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        try:
            node = read.node_info(obj)
        except ShapeError as err:  # the scheduler could not place a pod there either
            self.notes.append(f"node {meta.get('name', '?')} left out: {err}")
            return
        self.nodes.append(node)
        self.net[node.name] = node.labels.get(NETQOS_NODE_LABEL)
        if self.target.matches(node.labels):
            self.fast.add(node.name)
        self._tallies[node.name] = UsageTally()

    def add_pod(self, pod: Mapping[str, Any]) -> None:
        meta, spec, status = _mapping(pod, "metadata"), _mapping(pod, "spec"), _mapping(pod, "status")
        node = spec.get("nodeName") or ""
        tally = self._tallies.get(node)
        if tally is None or status.get("phase") in ("Succeeded", "Failed"):
            return
        view = self._usage_view(pod, spec)
        if view is not None:
            tally.add(view)
        controller = owners.controller_of(pod)
        if controller is not None and _ready(status):
            self.ready[controller.uid] += 1
        if node not in self.fast and self._selected(meta):
            self.off_high += 1
        if node not in self.fast and status.get("phase") == "Running":
            self._consider(pod, meta, spec, status, node)

    def add_unbound_pod(self, pod: Mapping[str, Any]) -> None:
        """A pod no node is bound to yet (Pending): counted off the net=high nodes, as `status`
        counts it; never a candidate (the scheduler has yet to place it)."""
        meta, spec = _mapping(pod, "metadata"), _mapping(pod, "spec")
        if not spec.get("nodeName") and meta.get("deletionTimestamp") is None and self._selected(meta):
            self.off_high += 1
            self.pending_pods += 1

    def _selected(self, meta: Mapping[str, Any]) -> bool:
        """A pod some rule selects, in a namespace the shipped registration calls the webhook for."""
        labels = meta.get("labels") or {}
        namespace = str(meta.get("namespace") or "")
        return namespace not in self._excluded and any(r.pod_selector.matches(labels) for r in self.policy.rules)

    def _usage_view(self, pod: Mapping[str, Any], spec: Mapping[str, Any]) -> PodInfo | None:
        """What the pod takes of its node; pods of one template are read once."""
        try:
            return self._usage_views.get(pod)
        except ShapeError:  # the API server stores no such pod; one that slipped in takes nothing here
            return None

    def _consider(
        self,
        pod: Mapping[str, Any],
        meta: Mapping[str, Any],
        spec: Mapping[str, Any],
        status: Mapping[str, Any],
        node: str,
    ) -> None:
        labels = meta.get("labels") or {}
        namespace = str(meta.get("namespace") or "")
        if namespace in self._excluded or not any(r.pod_selector.matches(labels) for r in self.policy.rules):
            return
        template = self._template(pod, meta, spec)
        if template.decision not in (Decision.MUTATED, Decision.UNCHANGED):
            return  # opted out, its own net affinity, or not a pod the webhook can read
        self.pending.append(
            _Pending(
                facts=Facts.of(pod),
                uid=str(meta.get("uid") or ""),
                node=node,
                since=_scheduled_at(meta, status),
                template=template,
            )
        )

    def _template(self, pod: Mapping[str, Any], meta: Mapping[str, Any], spec: Mapping[str, Any]) -> _Template:
        return self._templates.get(_template_key(meta, spec), lambda: self._judge(pod))

    def _judge(self, pod: Mapping[str, Any]) -> _Template:
        outcome = evaluate(self.policy, pod)
        replacement = None
        error = ""
        if outcome.decision in (Decision.MUTATED, Decision.UNCHANGED):
            try:
                replacement = dataclasses.replace(read.pod_info(outcome.pod), node_name="")
            except ShapeError as err:
                error = f"cannot evaluate the replacement's scheduling fields: {err}"
        else:
            error = f"the webhook would not give its replacement the preference: {NOT_MUTATED[outcome.decision]}"
        return _Template(outcome.decision, replacement, error)

    def controller_lookups(self) -> set[tuple[str, str, str]]:
        """(namespace, kind, name) of each candidate's controller that re-creates it from a pod
        template (ReplicaSet, StatefulSet, Job, ReplicationController): the command reads them."""
        return {
            (p.namespace, c.kind, c.name)
            for p in self.pending
            if (c := p.facts.controller) is not None and c.kind in owners.TEMPLATED
        }

    def replacement(
        self, pending: _Pending, controllers: Mapping[tuple[str, str, str], Mapping[str, Any] | str]
    ) -> _Replacement | str:
        """The pod the candidate's controller would create in its place, from the controller's pod
        template (not from the running pod: the template may have changed since, and the pod may
        carry terms of an older policy), run through the policy; or why it cannot be known."""
        controller = pending.facts.controller
        if controller is None:
            return "no controller: nothing would re-create it"
        if controller.kind not in owners.TEMPLATED:
            return (
                f"its controller {controller} is not a ReplicaSet, StatefulSet, Job or ReplicationController: "
                "the pod it would create in its place cannot be read"
            )
        found = controllers.get((pending.namespace, controller.kind, controller.name), "not read")
        if isinstance(found, str):
            return f"cannot read its {controller} ({found}): the pod it would create in its place is not known"
        kind = workloads.kind_of(dict(found))
        if kind is None or kind.kind != controller.kind:
            return f"its {controller} is not a {controller.kind} object"
        try:
            pod = workloads.pod_of(dict(found), kind)
        except workloads.NotAWorkload as err:
            return f"its {controller} has no usable pod template: {err}"
        meta = pod["metadata"]
        if kind.kind == "StatefulSet":  # the replacement keeps the pod's name and ordinal
            own = pending.facts.labels
            meta["labels"] = {**(meta.get("labels") or {}), **{k: own[k] for k in STATEFUL_LABELS if k in own}}
        template = self._templates.get(_template_key(meta, pod.get("spec") or {}), lambda: self._judge(pod))
        spec = pod.get("spec") or {}
        scheduler = spec.get("schedulerName") if isinstance(spec, Mapping) else None
        return _Replacement(template, dict(meta.get("labels") or {}), str(scheduler or DEFAULT_SCHEDULER))

    def owner_lookups(self) -> set[tuple[str, str, str]]:
        """(namespace, kind, name) of each candidate's controller that may itself be owned
        (a ReplicaSet by a Deployment, a Job by a CronJob): the command reads them."""
        return {
            (p.namespace, c.kind, c.name)
            for p in self.pending
            if (c := p.facts.controller) is not None and owners.climbs(c)
        }

    def usage(self) -> dict[str, UsageTally]:
        return self._tallies


# ---------------------------------------------------------------------------------------------
# The plan


def plan(
    cluster: Inventory,
    registration: Registration,
    controllers: Mapping[tuple[str, str, str], Mapping[str, Any] | str],
    owners: Mapping[tuple[str, str, str], Owner] | None = None,
    profile: Profile = DEFAULT_PROFILE,
    budgets: evictability.Budgets | None = None,
    selectors: Selectors = NO_SELECTORS,
    profiles: Mapping[str, Profile] | None = None,
    unknown_scheduler: str = evictability.UNKNOWN_SCHEDULER,
) -> Plan:
    """Judge every candidate in order and plan the moves.

    `registration` is the live registration (a pod whose replacement it would not send to the
    webhook is never evicted); `controllers` maps (namespace, kind, name) of each controller
    `Inventory.controller_lookups` named to its API object (or why it could not be read): the
    replacement is predicted from its pod template; `owners` maps a controller to its top owner;
    `budgets` are the PodDisruptionBudgets (None: they could not be read, and the Eviction API's
    429 is the only word on them); `selectors` the Services and controllers whose selectors
    PodTopologySpread's default constraints spread a replacement by. `profiles` are the
    schedulers' profiles by schedulerName (default: `profile` alone): a replacement is predicted
    with the profile of its template's schedulerName; one of another scheduler is never evicted,
    and `unknown_scheduler` says what to do about it."""
    owners = owners or {}
    profiles = dict(profiles) if profiles is not None else {profile.scheduler_name: profile}
    context = evictability.Context(
        cluster.options,
        cluster.ready,
        registration.why_not_called,
        budgets,
        {name: _unpredictable(p) for name, p in profiles.items()},
        unknown_scheduler,
    )
    state = _State(cluster, profile, selectors, profiles)
    result = Plan(
        nodes=len(cluster.nodes),
        high_nodes=len(state.world.fast),
        notes=list(cluster.notes),
        registration=registration.problem(),
        off_high=cluster.off_high,
        pending=cluster.pending_pods,
    )
    if budgets is None:
        result.notes.append(
            "cannot read PodDisruptionBudgets (forbidden by RBAC): the plan does not know them; the Eviction API "
            "still enforces them (429)"
        )
    planned_owners: set[tuple[str, Owner]] = set()
    for pending in sorted(cluster.pending, key=lambda p: (p.since, p.namespace, p.name)):
        owner = _owner(pending, owners)
        row = _Row(pending, cluster.net.get(pending.node), owner)
        replacement = cluster.replacement(pending, controllers)
        facts = pending.facts
        if isinstance(replacement, _Replacement):
            facts = dataclasses.replace(
                facts, replacement_labels=replacement.labels, scheduler_name=replacement.scheduler
            )
        verdict = evictability.judge(facts, context)
        if verdict is not None:
            result.candidates.append(row.skip(verdict.reason, verdict.constraint))
            continue
        if isinstance(replacement, str):
            result.candidates.append(row.skip(replacement, "replacement"))
            continue
        if owner is not None and (pending.namespace, owner) in planned_owners:
            reason = f"another pod of {owner} is moved in this run (one pod per owner)"
            result.candidates.append(row.skip(reason, "one-per-owner"))
            continue
        template = replacement.template
        if template.replacement is None:
            result.candidates.append(row.skip(template.error, "replacement"))
            continue
        target, why = state.place(pending, template, replacement.scheduler)
        if target is None:
            result.candidates.append(row.skip(why, "placement"))
            continue
        if owner is not None:
            planned_owners.add((pending.namespace, owner))
        if budgets is not None:
            budgets.take(facts)
        result.candidates.append(row.evict(target, why))
    return result


@dataclass(frozen=True)
class _Row:
    pending: _Pending
    net: str | None
    owner: Owner | None

    def skip(self, reason: str, constraint: str) -> Candidate:
        p = self.pending
        return Candidate(p.namespace, p.name, p.node, self.net, self.owner, SKIP, None, reason, p.uid, constraint)

    def evict(self, target: str, reason: str) -> Candidate:
        p = self.pending
        return Candidate(p.namespace, p.name, p.node, self.net, self.owner, EVICT, target, reason, p.uid)


def _owner(pending: _Pending, found: Mapping[tuple[str, str, str], Owner]) -> Owner | None:
    controller = pending.facts.controller
    if controller is None:
        return None
    return found.get((pending.namespace, controller.kind, controller.name)) or controller


class _State:
    """The cluster during planning: the what-if world of `scheduler.incremental`, every planned
    move counted in it."""

    def __init__(
        self, cluster: Inventory, profile: Profile, selectors: Selectors, profiles: Mapping[str, Profile]
    ) -> None:
        self.world = World(cluster.nodes, cluster.usage(), profile, cluster.target)
        self.selectors = selectors
        self.profiles = profiles

    def place(self, pending: _Pending, template: _Template, scheduler: str) -> tuple[str | None, str]:
        """The target of the candidate's replacement, predicted with the profile of `scheduler`
        (its schedulerName), and the reason, or (None, why not)."""
        view = template.replacement
        assert view is not None
        controller = pending.facts.controller
        owner = (controller.kind, controller.name) if controller else None
        spread = read.spread_selector(pending.namespace, view.labels, owner, self.selectors)
        view = dataclasses.replace(view, namespace=pending.namespace, default_spread=spread)
        world = self.world
        if not world.fast:
            return None, f"no node is labelled {world.target}"
        profile = self.profiles[scheduler]
        predictor = world.predictor(view, profile)
        if not predictor.feasible_fast:
            return None, predictor.why_no_fast()
        source = world.index[pending.node]
        world.move(source, view, remove=True)  # the pod leaves its node before its replacement is scheduled
        predictor.sync()
        choice = predictor.choice()
        if choice.target is None:
            world.move(source, view, remove=False)
            return None, choice.reason
        world.move(world.index[choice.target], view, remove=False)
        by = f" ({scheduler}'s profile)" if scheduler != DEFAULT_SCHEDULER else ""
        return choice.target, choice.reason + by + _not_evaluated(view)


def _unpredictable(profile: Profile) -> str:
    """Why a replacement scheduled with `profile` cannot be predicted ("" when it can): a Score
    plugin the plugin table does not know would add scores nobody here can compute."""
    unknown = unevaluated_scores(profile)
    if not unknown:
        return ""
    return (
        f"its profile runs the Score plugin(s) {', '.join(unknown)}, not evaluated here: where it would land "
        "cannot be predicted"
    )


def _not_evaluated(view: PodInfo) -> str:
    uses = sorted(view.uses)
    return f" (not evaluated: {', '.join(uses)})" if uses else ""


# ---------------------------------------------------------------------------------------------
# Small readers


def _mapping(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _ready(status: Mapping[str, Any]) -> bool:
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _scheduled_at(meta: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    """When the pod was bound to its node: its PodScheduled condition, else its start, else its creation."""
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == "PodScheduled":
            when = condition.get("lastTransitionTime")
            if isinstance(when, str) and when:
                return when
    return str(status.get("startTime") or meta.get("creationTimestamp") or "")


def _template_key(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> bytes:
    """What the webhook's decision and the replacement's scheduling read, and nothing that differs
    between the pods of one workload (names, the node, the service account token's volume name), so
    those pods share one `_Template`: labels and the opt-out annotation; affinity, tolerations,
    node selector, scheduler name; per container its image, resources, ports and restart policy;
    overhead and pod-level resources; which kinds of volumes, and whether it has topology spread
    constraints or resource claims (`read.pod_info`'s `uses`)."""
    annotations = meta.get("annotations") or {}
    volumes = spec.get("volumes")
    kinds = (
        sorted({k for v in volumes if isinstance(v, Mapping) for k in v if k != "name"})
        if isinstance(volumes, list)
        else []
    )
    return keys.spec_key(
        spec,
        ("affinity", "tolerations", "nodeSelector", "schedulerName", "overhead", "resources"),
        ("image", *keys.USAGE_CONTAINER_FIELDS),
        meta.get("labels"),
        annotations.get(OPT_OUT_ANNOTATION) if isinstance(annotations, Mapping) else annotations,
        annotations.get(INJECTED_ANNOTATION) if isinstance(annotations, Mapping) else None,
        kinds,
        bool(spec.get("topologySpreadConstraints")),
        bool(spec.get("resourceClaims")),
    )


def summary(candidates: Sequence[Candidate], results: Iterable[Any] = ()) -> dict[str, int]:
    """The counts of `-o json`'s summary."""
    outcome = Counter(getattr(r, "result", "") for r in results)
    movable = sum(1 for c in candidates if c.action == EVICT)
    return {
        "candidates": len(candidates),
        "movable": movable,
        "evicted": outcome["evicted"],
        "blocked": outcome["blocked"],
        "skipped": len(candidates) - movable,
        "gone": outcome["gone"],
        "throttled": outcome["throttled"],
        "blocked_in_plan": sum(1 for c in candidates if c.constraint == "pdb"),
    }


def counted(plan: Plan) -> dict[str, int]:
    """The pods off the net=high nodes, as `status` counts them (`-o json`'s `off_high`)."""
    return {"pods": plan.off_high, "pending": plan.pending}
