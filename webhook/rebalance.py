"""`rebalance`: which latency-sensitive pods stranded on slower nodes can move back to a `net=high`
node now, and where. Pure: the cluster's API JSON in, a `Plan` out; the command reads and evicts.

The preference the webhook injects is IgnoredDuringExecution: a pod that landed on a slower node
while every fast node was full stays there. This module plans the moves, one pod at a time in a
stable order (longest on a slow node first), against one model of the cluster that every planned
move updates:

- **Candidates** are the running pods the policy selects (`policy.evaluate` on the pod as it is:
  `MUTATED` for a pod created while the webhook was down, `UNCHANGED` for one that carries the
  terms; a pod mutated under an earlier policy is judged as created, without those terms
  (`policy.injected_earlier`); opted-out pods and pods with their own `net` affinity are not
  candidates), on a node that is not of its rule's best class (`Inventory.target_of`: `net=high`
  by default; each rule of a policy against its own table's top-scoring values).
- **Never evicted**, each with its reason: what `webhook.evictability`'s named constraints
  protect (terminating, mirror, no controller, DaemonSet, system-critical priority, the live
  registration's scope, local storage, min age, replicas), a second pod of one owner (the
  top owner: a Deployment over its ReplicaSets), and a pod of an owner whose last eviction was
  wasted, its replacement on a slower node in the world the plan still sees (`repeat`: the
  records `webhook.evictions` reads, given to the `Inventory`). Without an active registration
  nothing moves.
- **The replacement** is the pod its controller would create in its place, from the controller's
  pod template (`workloads.pod_of`; not from the running pod, which may carry an older policy's
  terms or an older spec): the webhook's outcome for it (its terms), no nodeName.
  It is filtered and scored, with the profile of its template's `schedulerName` (kube-scheduler's
  default profile for `default-scheduler`; another scheduler's from the KubeSchedulerConfiguration
  the command was given, the NetQoS scheduler plugin's profile among them; a scheduler whose
  profile is not known is the `scheduler` constraint's), over every node by
  `webhook.scheduler.incremental`, given what the
  pods on each node take, with the candidate itself still on its node, Terminating (as the
  scheduler's cache holds an evicted pod for its grace period while its replacement is placed:
  its requests, host ports and pod affinity still count, spreading leaves it out), and every move
  planned so far counted on its target. The move is planned when kube-scheduler's prediction (the best total,
  as `explain` computes it) is a `net=high` node, which becomes the target; otherwise it is skipped
  with the reason: no `net=high` node passes the filters (their reasons, counted as the
  scheduler's FitError counts them), or a slower node scores better.

**`--missing`** (`Options.missing`) plans recreations instead of moves: the pods created without
the preference while the webhook was down (it registers with `failurePolicy: Ignore`) keep lacking
it, as affinity cannot change on a running pod. The candidates are then the running pods the
policy selects for which `policy.evaluate` gives `MUTATED` on the pod as it is (the pods `status`
lists as missing), on any node, `net=high` ones included: the point is the preference, not the
node. They are judged by the same constraints (`evictability.MISSING_CONSTRAINTS`: all but
`scheduler`), the replacement the webhook would mutate, `repeat` (a recreation whose replacements
came back without the preference too: `evictions.Seen.repeat`), one pod per owner and the
budgets. No prediction justifies a recreation: where the replacement is predicted to land (the
same prediction, over every node, with the candidate Terminating) is said in the row as
information, and the room it takes there is counted for the candidates after it. One constraint
of the plan's own is added: `unschedulable`, a replacement no node passes the filters for even
once the candidate is gone (recreating it would leave its owner a pod short).

Pod affinity's namespaceSelectors match the namespaces' labels (`Inventory.add_namespaces`: the
Namespaces the registration's reading lists anyway); where RBAC hides them, each namespace has its
`kubernetes.io/metadata.name` label alone, and a note says so when a selector is in play.

Nothing here does I/O; pods and nodes are folded in one at a time (`Inventory.add_node`,
`Inventory.add_pod`), so memory holds a usage tally per node and a small record per candidate.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook import admitted, evictability, evictions, owners, placement, workloads
from webhook.apidata import MAPPING, ShapeError
from webhook.evictability import DEFAULT_MIN_AGE, DEFAULT_MIN_REPLICAS, Facts
from webhook.names import DEFAULT_NAMESPACE, DEFAULT_SCHEDULER, INJECTED_ANNOTATION, OPT_OUT_ANNOTATION
from webhook.owners import Owner
from webhook.policy import Decision, Policy, evaluate, injected, injected_earlier, without_injected
from webhook.scheduler import keys, read
from webhook.scheduler.config import profile_notes, unevaluated_scores
from webhook.scheduler.incremental import Predictor, World
from webhook.scheduler.model import Node, PodInfo, Profile, Target, UsageTally, selects_namespaces
from webhook.scheduler.plugins.netqos import NETQOS_NODE_LABEL, NETQOS_TARGET, fast_target
from webhook.scheduler.read import NO_SELECTORS, Selectors
from webhook.scheduler.registry import DEFAULT_PROFILE
from webhook.scheduler.sampling import Landing
from webhook.scope import ALWAYS_EXCLUDED_NAMESPACES, Registration

__all__ = ["DEFAULT_MIN_AGE", "DEFAULT_MIN_REPLICAS", "Candidate", "Inventory", "Options", "Owner", "Plan", "plan"]

EVICT = "evict"
# How a replacement's scheduling view was made: by the API server's dry-run create, or by the model
# of its admission (`webhook.admitted`).
DRY_RUN, MODELLED = "dry-run", "model"
# A move is planned only where its replacement lands on a target node with at least this
# probability over the scheduler's rotating samples of nodes (`scheduler.sampling`).
DEFAULT_MIN_PROBABILITY = 0.9
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
# `--missing`: a replacement no node passes the filters for, even once the candidate is gone
UNSCHEDULABLE = "unschedulable"
RECREATED = "created without the preference: its replacement gets it"  # how a recreation's reason starts


@dataclass(frozen=True)
class Options(evictability.Options):
    webhook_namespace: str = DEFAULT_NAMESPACE  # the webhook is never called for its own namespace
    min_probability: float = DEFAULT_MIN_PROBABILITY
    missing: bool = False  # `--missing`: recreate the pods created without the preference, wherever they run


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
    # for a skip because no net=high node passes the filters: each reason, counted over those nodes
    unfit: tuple[str, ...] = ()
    # for a move, and a skip for too low a one: that its replacement lands on a net=high node
    probability: float | None = None
    # how the replacement was admitted: DRY_RUN (the API server's own answer), MODELLED, or "" (never built)
    admission: str = ""
    controller: Owner | None = None  # for a move: the pod's controller, with its uid (`evictions.Record`)
    target_net: str | None = None  # the target's net label (None: none, or no target)
    # a recreation (`--missing`): the pod lacks the preference, and `target`, where its replacement
    # is predicted to land, is information (any node; None when not predicted)
    missing: bool = False


@dataclass
class Plan:
    candidates: list[Candidate] = field(default_factory=list)
    nodes: int = 0
    high_nodes: int = 0
    notes: list[str] = field(default_factory=list)  # objects left out (unreadable), and why
    registration: str = ""  # why no registration is active: nothing may be evicted ("" when one is)
    off_high: int = 0  # selected pods not on a net=high node, Pending ones included, as status counts them
    pending: int = 0  # of those, the pods no node is bound to yet (the scheduler still places them)
    world: str = ""  # the digest of the net=high nodes and the pods on them (`evictions.Seen.world`)
    # for each move's controller uid: when its newest pod was created (`evictions.Record.newest`)
    newest: dict[str, dt.datetime] = field(default_factory=dict)
    missing: bool = False  # planned by `--missing`: recreations of pods created without the preference

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
    admission: str = ""  # for a replacement: DRY_RUN or MODELLED


@dataclass(frozen=True)
class DryRun:
    """The API server's answer to a dry-run create of a replacement: the pod as it would store it,
    or why it refuses to create it."""

    pod: Mapping[str, Any] | None = None
    refused: str = ""


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
    counted: PodInfo | None = None  # the pod as its node's usage counts it (None: it takes nothing there)
    target: Target = NETQOS_TARGET  # the best class of its rule (`Inventory.target_of`)

    @property
    def namespace(self) -> str:
        return self.facts.namespace

    @property
    def name(self) -> str:
        return self.facts.name


class Inventory:
    """The cluster as the plan needs it, folded from API objects one at a time: `add_node` for
    every Node, then `add_pod` for every pod bound to a node and not finished; and the namespaces'
    labels (`add_namespaces`), which pod affinity's namespaceSelectors match."""

    def __init__(
        self,
        policy: Policy,
        options: Options,
        target: Target | None = None,
        history: evictions.History = evictions.NO_HISTORY,
    ) -> None:
        self.policy = policy
        self.options = options
        self.target = target or fast_target(policy)  # the policy's top-scoring nodes: net=high by default
        self._given = target  # one target for every pod; None: each pod's rule's (`target_of`)
        self._classes = placement.by_rule(policy)
        # each target's nodes, and (`fast`) the nodes of any: the world the eviction records digest
        self._fast: dict[Target, set[str]] = {c.target: set() for c in placement.every_classes(policy)}
        self._fast.setdefault(self.target, set())
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
        # None: not read (RBAC forbids listing them); each namespace then has its name label alone
        self.namespaces: dict[str, dict[str, str]] | None = None
        # What the model of admission reads (LimitRanges, RuntimeClasses), and the API server's own
        # answers for the replacements it admitted in dry run, by `replacement_key`: the command's.
        self.admission = admitted.Objects()
        self.dry_runs: dict[bytes, DryRun] = {}
        self._replacements: keys.Memo[bytes, _Template] = keys.Memo()
        # each replacement pod and its `replacement_key`, made once per controller object and
        # namespace (a StatefulSet's per candidate's ordinal labels too): `_replacement_pod`
        self._replacement_pods: dict[tuple[Any, ...], tuple[object, dict[str, Any] | str, bytes]] = {}
        # the evictions made before (`history`): the net=high nodes' world, the recorded controllers' pods
        self.seen = evictions.Seen(history)

    def add_namespaces(self, labels: Mapping[str, Mapping[str, str]]) -> None:
        """Every namespace's labels, by name (the Namespaces listed)."""
        self.namespaces = {**(self.namespaces or {}), **{name: dict(of) for name, of in labels.items()}}

    def selects_namespaces(self) -> bool:
        """Whether the namespaces' labels can change a prediction: a term of a pod on a node or of
        a candidate's replacement has a namespaceSelector (`model.selects_namespaces`)."""
        replacements = [p.template.replacement for p in self.pending if p.template.replacement is not None]
        on_nodes = [p for tally in self._tallies.values() for p in tally.with_affinity]
        return selects_namespaces((*replacements, *on_nodes))

    def add_node(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        try:
            node = read.node_info(obj)
        except ShapeError as err:  # the scheduler could not place a pod there either
            self.notes.append(f"node {meta.get('name', '?')} left out: {err}")
            return
        self.nodes.append(node)
        self.net[node.name] = node.labels.get(NETQOS_NODE_LABEL)
        for target, names in self._fast.items():
            if target.matches(node.labels):
                names.add(node.name)
                self.fast.add(node.name)
        self.seen.add_node(node, node.name in self.fast)
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
        self.seen.add_pod(meta, controller, node, node in self.fast, self._seen_missing(pod, meta, spec, controller))
        if controller is not None and _ready(status):
            self.ready[controller.uid] += 1
        if not self._selected(meta):
            return  # no rule selects it: neither counted off the net=high nodes nor a candidate
        fast = self.fast_of(self.target_of(meta.get("labels") or {}))
        if node not in fast:
            self.off_high += 1
        if (self.options.missing or node not in fast) and status.get("phase") == "Running":
            self._consider(pod, meta, spec, status, node, view)

    def add_unbound_pod(self, pod: Mapping[str, Any]) -> None:
        """A pod no node is bound to yet (Pending): counted off the net=high nodes, as `status`
        counts it; never a candidate (the scheduler has yet to place it)."""
        meta, spec = _mapping(pod, "metadata"), _mapping(pod, "spec")
        if not spec.get("nodeName"):
            controller = owners.controller_of(pod)
            self.seen.add_pod(meta, controller, "", False, self._seen_missing(pod, meta, spec, controller))
        if not spec.get("nodeName") and meta.get("deletionTimestamp") is None and self._selected(meta):
            self.off_high += 1
            self.pending_pods += 1

    def _seen_missing(
        self, pod: Mapping[str, Any], meta: Mapping[str, Any], spec: Mapping[str, Any], controller: Owner | None
    ) -> bool:
        """For a pod of a controller `--missing` recreated a pod of before: whether it lacks the
        preference too (`evictions.Seen.repeat`); False for every other pod, never asked."""
        if not self.options.missing or not self.seen.watches(controller):
            return False
        return self._template(pod, meta, spec).decision == Decision.MUTATED

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
        counted: PodInfo | None,
    ) -> None:
        """A selected pod, running: a candidate unless the webhook would leave its replacement alone."""
        labels = meta.get("labels") or {}
        template = self._template(pod, meta, spec)
        if template.decision not in (Decision.MUTATED, Decision.UNCHANGED):
            return  # opted out, its own net affinity, or not a pod the webhook can read
        if self.options.missing and template.decision != Decision.MUTATED:
            return  # it carries the preference: nothing to recreate
        self.pending.append(
            _Pending(
                facts=Facts.of(pod),
                uid=str(meta.get("uid") or ""),
                node=node,
                since=_scheduled_at(meta, status),
                template=template,
                counted=counted,
                target=self.target_of(labels),
            )
        )

    def target_of(self, labels: Mapping[str, str]) -> Target:
        """The nodes a pod with `labels` belongs on: the best class of the rule that places it
        (`placement.by_rule`: a rule preferring `net In [low]` is judged against net=low), or the
        target the inventory was given for every pod."""
        if self._given is not None or len(self._fast) == 1:
            return self.target  # every rule has the policy's target: no selector to match
        return self._classes(labels).target

    def fast_of(self, target: Target) -> set[str]:
        """The nodes of `target`."""
        found = self._fast.get(target)
        if found is None:  # a target given to the inventory after its nodes: read them again
            found = self._fast[target] = {n.name for n in self.nodes if target.matches(n.labels)}
        return found

    def _template(self, pod: Mapping[str, Any], meta: Mapping[str, Any], spec: Mapping[str, Any]) -> _Template:
        return self._templates.get(_template_key(meta, spec), lambda: self._judge(pod))

    def _judge(self, pod: Mapping[str, Any]) -> _Template:
        outcome = evaluate(self.policy, pod)
        if injected_earlier(self.policy, pod, outcome):
            # terms of an earlier policy: the pod as created, which its replacement is, gets the current ones
            outcome = evaluate(self.policy, without_injected(pod, injected(self.policy, pod)))
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
        carry terms of an older policy), as the API server would admit it (`_admit`); or why it
        cannot be known."""
        pod, key = self._replacement_pod(pending, controllers)
        if isinstance(pod, str):
            return pod
        meta = pod["metadata"]
        template = self._replacements.get(key, lambda: self._admit(pod, self.dry_runs.get(key)))
        spec = pod.get("spec") or {}
        scheduler = spec.get("schedulerName") if isinstance(spec, MAPPING) else None
        return _Replacement(template, dict(meta.get("labels") or {}), str(scheduler or DEFAULT_SCHEDULER))

    def replacement_pods(
        self, controllers: Mapping[tuple[str, str, str], Mapping[str, Any] | str]
    ) -> dict[bytes, dict[str, Any]]:
        """Each distinct replacement pod by `replacement_key`, in plan order: what the command may
        have the API server admit in dry run (`dry_runs`)."""
        pods: dict[bytes, dict[str, Any]] = {}
        for pending in sorted(self.pending, key=lambda p: (p.since, p.namespace, p.name)):
            pod, key = self._replacement_pod(pending, controllers)
            if isinstance(pod, dict):
                pods.setdefault(key, pod)
        return pods

    def _replacement_pod(
        self, pending: _Pending, controllers: Mapping[tuple[str, str, str], Mapping[str, Any] | str]
    ) -> tuple[dict[str, Any] | str, bytes]:
        """`replacement_pod` and its `replacement_key` (b"" for a reason), made once for the
        candidates of one controller object in one namespace: a plan asks twice per candidate,
        and copying and keying a template per candidate was much of its cost. The pod is shared:
        its readers never change it."""
        controller = pending.facts.controller
        found = controllers.get((pending.namespace, controller.kind, controller.name)) if controller else None
        own = pending.facts.labels
        stateful = controller is not None and controller.kind == "StatefulSet"
        ordinal = tuple(own.get(k) for k in STATEFUL_LABELS) if stateful else ()
        memo = (pending.namespace, controller, id(found), ordinal)
        kept = self._replacement_pods.get(memo)
        if kept is None or kept[0] is not found:  # held with it: its id is not reused meanwhile
            pod = self.replacement_pod(pending, controllers)
            kept = self._replacement_pods[memo] = (found, pod, b"" if isinstance(pod, str) else replacement_key(pod))
        return kept[1], kept[2]

    def replacement_pod(
        self, pending: _Pending, controllers: Mapping[tuple[str, str, str], Mapping[str, Any] | str]
    ) -> dict[str, Any] | str:
        """The pod the candidate's controller would send to the API server in its place (its
        template's, in its namespace; a StatefulSet's with the candidate's name and ordinal
        labels), or why it cannot be known."""
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
        meta["namespace"] = pending.namespace  # where the controller creates it (a template may name none)
        uid = (found.get("metadata") or {}).get("uid")
        for ref in meta.get("ownerReferences") or ():  # the controller's own uid, as it sets it
            if uid:
                ref["uid"] = uid
        if kind.kind == "StatefulSet":  # the replacement keeps the pod's name and ordinal
            own = pending.facts.labels
            meta["labels"] = {**(meta.get("labels") or {}), **{k: own[k] for k in STATEFUL_LABELS if k in own}}
            meta.pop("name", None)  # its name is the candidate's, still taken: a dry run generates one
            meta["generateName"] = f"{controller.name}-"
        return pod

    def _admit(self, pod: Mapping[str, Any], answer: DryRun | None) -> _Template:
        """The replacement as the API server would store it, and the webhook's decision for it.

        The webhook's decision is taken on the pod as the mutating webhooks receive it (the
        template's pod through `admitted.before_webhooks`). Its scheduling view is the API
        server's dry-run answer where the command got one (every admission plugin and webhook
        applied; where it lacks the policy's terms, the webhook was not called for it, and the
        policy's outcome on it is used, as the registration's constraint judges that case);
        else the model: the policy's outcome through `admitted.on_create`."""
        local = admitted.before_webhooks(pod, self.admission)
        if local.rejected:
            error = f"the API server would refuse to create its replacement: {local.rejected}"
            return _Template(Decision.ERROR, None, error, MODELLED)
        outcome = evaluate(self.policy, local.pod)
        if outcome.decision not in (Decision.MUTATED, Decision.UNCHANGED):
            error = f"the webhook would not give its replacement the preference: {NOT_MUTATED[outcome.decision]}"
            return _Template(outcome.decision, None, error, MODELLED)
        if answer is not None and answer.refused:
            error = f"the API server refuses to create its replacement (dry run): {answer.refused}"
            return _Template(outcome.decision, None, error, DRY_RUN)
        if answer is not None and answer.pod is not None:
            stored, admission = dict(answer.pod), DRY_RUN
            served = evaluate(self.policy, stored)
            if served.decision == Decision.MUTATED:
                stored = served.pod
        else:
            stored, admission = admitted.on_create(outcome.pod), MODELLED
        try:
            replacement = dataclasses.replace(read.pod_info(stored), node_name="")
        except ShapeError as err:
            error = f"cannot evaluate the replacement's scheduling fields: {err}"
            return _Template(outcome.decision, None, error, admission)
        return _Template(outcome.decision, replacement, "", admission)

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
        high_nodes=len(cluster.fast),
        notes=[*cluster.notes, *profile_notes(profiles.values())],
        registration=registration.problem(),
        off_high=cluster.off_high,
        pending=cluster.pending_pods,
        world=cluster.seen.world(str(cluster.target)),
        missing=cluster.options.missing,
    )
    if budgets is None:
        result.notes.append(
            "cannot read PodDisruptionBudgets (forbidden by RBAC): the plan does not know them; the Eviction API "
            "still enforces them (429)"
        )
    if cluster.namespaces is None and cluster.selects_namespaces():
        result.notes.append(
            "cannot list namespaces (forbidden by RBAC): pod affinity's namespaceSelector is matched against each "
            "namespace's kubernetes.io/metadata.name label alone"
        )
    planned_owners: set[tuple[str, Owner]] = set()
    missing = cluster.options.missing
    constraints = evictability.MISSING_CONSTRAINTS if missing else evictability.CONSTRAINTS
    mode = evictions.MISSING if missing else ""
    for pending in sorted(cluster.pending, key=lambda p: (p.since, p.namespace, p.name)):
        owner = _owner(pending, owners)
        row = _Row(pending, cluster.net.get(pending.node), owner, missing=missing)
        replacement = cluster.replacement(pending, controllers)
        if isinstance(replacement, _Replacement):
            row = dataclasses.replace(row, admission=replacement.template.admission)
        facts = pending.facts
        if isinstance(replacement, _Replacement):
            facts = dataclasses.replace(
                facts, replacement_labels=replacement.labels, scheduler_name=replacement.scheduler
            )
        verdict = evictability.judge(facts, context, constraints)
        if verdict is not None:
            result.candidates.append(row.skip(verdict.reason, verdict.constraint, state.unfit(pending, replacement)))
            continue
        if isinstance(replacement, str):
            result.candidates.append(row.skip(replacement, "replacement"))
            continue
        repeat = cluster.seen.repeat(pending.namespace, owner, cluster.fast_of(pending.target), result.world, mode)
        if repeat:  # its owner's last eviction was wasted, in the world the plan sees now
            result.candidates.append(row.skip(repeat, evictions.REPEAT))
            continue
        if owner is not None and (pending.namespace, owner) in planned_owners:
            reason = f"another pod of {owner} is moved in this run (one pod per owner)"
            result.candidates.append(row.skip(reason, "one-per-owner", state.unfit(pending, replacement)))
            continue
        template = replacement.template
        if template.replacement is None:
            result.candidates.append(row.skip(template.error, "replacement"))
            continue
        placed = (state.predict if missing else state.place)(pending, template, replacement.scheduler)
        if placed.constraint == UNSCHEDULABLE or (placed.target is None and not missing):
            probability = placed.probability if placed.constraint == "probability" else None
            result.candidates.append(row.skip(placed.reason, placed.constraint, placed.unfit, probability))
            continue
        if owner is not None:
            planned_owners.add((pending.namespace, owner))
        if budgets is not None:
            budgets.take(facts)
        target_net = cluster.net.get(placed.target) if placed.target is not None else None
        result.candidates.append(row.evict(placed.target, target_net, placed.reason, placed.probability))
    for move in result.movable:
        if move.controller is not None and (newest := cluster.seen.newest(move.controller.uid)) is not None:
            result.newest[move.controller.uid] = newest
    return result


@dataclass(frozen=True)
class _Row:
    pending: _Pending
    net: str | None
    owner: Owner | None
    admission: str = ""  # how its replacement was admitted (DRY_RUN, MODELLED)
    missing: bool = False  # a row of `--missing`: a recreation

    def skip(
        self, reason: str, constraint: str, unfit: tuple[str, ...] = (), probability: float | None = None
    ) -> Candidate:
        p = self.pending
        return Candidate(
            p.namespace,
            p.name,
            p.node,
            self.net,
            self.owner,
            SKIP,
            None,
            reason,
            p.uid,
            constraint,
            unfit,
            probability,
            self.admission,
            missing=self.missing,
        )

    def evict(self, target: str | None, target_net: str | None, reason: str, probability: float | None) -> Candidate:
        p = self.pending
        return Candidate(
            p.namespace,
            p.name,
            p.node,
            self.net,
            self.owner,
            EVICT,
            target,
            reason,
            p.uid,
            probability=probability,
            admission=self.admission,
            controller=p.facts.controller,
            target_net=target_net,
            missing=self.missing,
        )


def _owner(pending: _Pending, found: Mapping[tuple[str, str, str], Owner]) -> Owner | None:
    controller = pending.facts.controller
    if controller is None:
        return None
    return found.get((pending.namespace, controller.kind, controller.name)) or controller


@dataclass(frozen=True)
class _Placement:
    """Where a candidate's replacement lands: its target (None: no move, `constraint` says why),
    the reason, the net=high nodes' filter reasons when none passes, and the probability that
    it lands on one of them."""

    target: str | None
    reason: str
    constraint: str = "placement"
    unfit: tuple[str, ...] = ()
    probability: float | None = 0.0  # None: not computed (`--missing`)


class _State:
    """The cluster during planning: the what-if world of `scheduler.incremental`, every planned
    move counted in it."""

    def __init__(
        self, cluster: Inventory, profile: Profile, selectors: Selectors, profiles: Mapping[str, Profile]
    ) -> None:
        self.world = World(cluster.nodes, cluster.usage(), profile, cluster.target, cluster.namespaces)
        self.selectors = selectors
        self.profiles = profiles
        self.min_probability = cluster.options.min_probability
        # each replacement view in a namespace, spread as a controller's (`_view`), made once: the
        # candidates of one controller share it, and so `World.predictor` knows it again
        self._views: dict[tuple[int, str, tuple[str, str] | None], tuple[PodInfo, PodInfo]] = {}

    def unfit(self, pending: _Pending, replacement: _Replacement | str) -> tuple[str, ...]:
        """For a candidate kept for another reason: the net=high nodes' filter reasons when none
        passes for its replacement now, else (); `status` says them rather than calling a
        net=high node feasible. Nothing moves."""
        world = self.world
        if isinstance(replacement, str) or replacement.template.replacement is None:
            return ()
        profile = self.profiles.get(replacement.scheduler)
        if profile is None or not world.fast_of(pending.target):
            return ()
        predictor = world.predictor(self._view(pending, replacement.template.replacement), profile, pending.target)
        return () if predictor.feasible_fast else predictor.unfit()

    def _view(self, pending: _Pending, view: PodInfo) -> PodInfo:
        """The replacement's scheduling view in the candidate's namespace, spread as its controller's."""
        controller = pending.facts.controller
        owner = (controller.kind, controller.name) if controller else None
        memo = (id(view), pending.namespace, owner)
        found = self._views.get(memo)
        if found is None or found[0] is not view:  # held with it: its id is not reused meanwhile
            spread = read.spread_selector(pending.namespace, view.labels, owner, self.selectors)
            spread_view = dataclasses.replace(view, namespace=pending.namespace, default_spread=spread)
            found = self._views[memo] = (view, spread_view)
        return found[1]

    def place(self, pending: _Pending, template: _Template, scheduler: str) -> _Placement:
        """The target of the candidate's replacement, predicted with the profile of `scheduler`
        (its schedulerName), or why there is none. A target is kube-scheduler's prediction over
        every feasible node; in a cluster of 100 nodes or more it must also win often enough
        among the nodes one cycle samples (`World.landing`, at least `min_probability`)."""
        assert template.replacement is not None
        view = self._view(pending, template.replacement)
        world, target = self.world, pending.target
        fast = world.fast_of(target)
        if not fast:
            return _Placement(None, f"no node is labelled {target}")
        profile = self.profiles[scheduler]
        predictor = world.predictor(view, profile, target)
        if not predictor.feasible_fast:
            return _Placement(None, predictor.why_no_fast(), unfit=predictor.unfit())
        leaving = _Terminating(world, world.index[pending.node], pending.counted)
        leaving.begin()
        predictor.sync()
        choice = predictor.choice()
        if choice.target is None:
            leaving.undo()
            return _Placement(None, choice.reason, unfit=choice.unfit)
        landing = world.landing(view, profile, predictor)
        probability = landing.of(world.nodes[i].name for i in fast) if landing is not None else 1.0
        sampled = "" if landing is None else _sampled(landing, probability, target)
        if probability < self.min_probability:
            leaving.undo()
            reason = f"{sampled}, below --min-probability {self.min_probability:g}"
            return _Placement(None, reason, "probability", probability=probability)
        world.move(world.index[choice.target], view, remove=False)
        by = f" ({scheduler}'s profile)" if scheduler != DEFAULT_SCHEDULER else ""
        sampled = f"; {sampled}" if sampled else ""
        return _Placement(choice.target, choice.reason + by + sampled + _not_evaluated(view), probability=probability)

    def predict(self, pending: _Pending, template: _Template, scheduler: str) -> _Placement:
        """For `--missing`: where the candidate's replacement is predicted to land, on any node, as
        information (kube-scheduler's best total over every node, the candidate Terminating on its
        node; once it is gone when no node has room before); the replacement's room is then
        counted there. `UNSCHEDULABLE` when no node passes the filters for it even once the
        candidate is gone. A replacement of a scheduler whose profile is not known, or not
        evaluated here, is not predicted: it is recreated all the same."""
        assert template.replacement is not None
        view = self._view(pending, template.replacement)
        world = self.world
        leaving = _Terminating(world, world.index[pending.node], pending.counted)
        profile = self.profiles.get(scheduler)
        unknown = "its profile is not known (--scheduler-config FILE gives it)" if profile is None else ""
        if profile is None or (unknown := _unpredictable(profile)):
            leaving.begin()
            why = f"where it lands is not predicted: it is scheduled by {scheduler}, and {unknown}"
            return _Placement(None, f"{RECREATED}; {why}", "", probability=None)
        predictor = world.predictor(view, profile)
        leaving.begin()
        predictor.sync()
        by = (f" ({scheduler}'s profile)" if scheduler != DEFAULT_SCHEDULER else "") + _not_evaluated(view)
        if names := predictor.predicted():
            return self._landed(names, view, f"{RECREATED}; kube-scheduler would place it on", by)
        leaving.gone()
        predictor.sync()
        if names := predictor.predicted():
            later = "no node has room for it while this pod terminates, then kube-scheduler would place it on"
            return self._landed(names, view, f"{RECREATED}; {later}", by)
        unfit = _fit_error(predictor)
        leaving.back()
        leaving.undo()
        return _Placement(
            None,
            f"no node fits its replacement, even once this pod is gone: {unfit} Recreating it would leave its owner a "
            "pod short",
            UNSCHEDULABLE,
            probability=None,
        )

    def _landed(self, names: Sequence[str], view: PodInfo, lead: str, by: str) -> _Placement:
        """The predicted node (its room taken by the replacement), or the tie, for `predict`."""
        world = self.world
        described = [world.target.describe(world.nodes[world.index[n]]) for n in names]
        if len(names) > 1:  # which one the scheduler binds depends on the order its filtering found them
            return _Placement(None, f"{lead} one of {', '.join(described)}: their totals tie{by}", "", probability=None)
        world.move(world.index[names[0]], view, remove=False)
        return _Placement(names[0], f"{lead} {described[0]}{by}", "", probability=None)


def _fit_error(predictor: Predictor) -> str:
    """kube-scheduler's FitError text over every node: each Filter reason with its count of nodes,
    sorted as strings (kubernetes v1.36.3 pkg/scheduler/framework/types.go, `FitError.Error`; as
    `cycle.Ranking.filter_message` words it for `explain`)."""
    counts = Counter(r for why in predictor.reasons for r in why)
    head = f"0/{len(predictor.reasons)} nodes are available"
    return f"{head}: {', '.join(sorted(f'{c} {r}' for r, c in counts.items()))}." if counts else f"{head}."


def _sampled(landing: Landing, probability: float, target: Target) -> str:
    """What sampling does to the move, for its reason."""
    return (
        f"kube-scheduler scores {landing.wanted} of the {landing.feasible} feasible nodes in a cycle, from a "
        f"rotating start: the replacement lands on a {target} node with probability {probability:.2f}"
    )


class _Terminating:
    """An evicted pod as the scheduler's cache holds it while its replacement is scheduled: still
    on its node, Terminating, for its grace period. The ReplicaSet (or StatefulSet, Job) controller
    creates the replacement as soon as the pod is marked for deletion, and the scheduler places it
    while the old pod still takes its requests and host ports and still counts for InterPodAffinity
    (every pod of the NodeInfo); only PodTopologySpread leaves terminating pods out of its counts
    (kubernetes v1.36.3 pkg/scheduler/backend/cache/cache.go: a pod leaves the cache on its
    delete event, not on its deletionTimestamp; podtopologyspread/common.go countPodsMatchSelector).
    Planned moves keep it so for the rest of the run: the pod's grace period outlasts the plan."""

    def __init__(self, world: World, node: int, pod: PodInfo | None) -> None:
        self.world, self.node, self.pod = world, node, pod

    def begin(self) -> None:
        """The pod turns Terminating on its node: counted as before but for spreading."""
        if self.pod is not None and not self.pod.terminating:
            self.world.move(self.node, self.pod, remove=True)
            self.world.move(self.node, dataclasses.replace(self.pod, terminating=True), remove=False)

    def undo(self) -> None:
        """The pod is not evicted after all: it counts as it did."""
        if self.pod is not None and not self.pod.terminating:
            self.world.move(self.node, dataclasses.replace(self.pod, terminating=True), remove=True)
            self.world.move(self.node, self.pod, remove=False)

    def gone(self) -> None:
        """After `begin`: its grace period is over, the pod has left its node."""
        if self.pod is not None and not self.pod.terminating:
            self.world.move(self.node, dataclasses.replace(self.pod, terminating=True), remove=True)

    def back(self) -> None:
        """Undo `gone`: the pod is on its node again, Terminating."""
        if self.pod is not None and not self.pod.terminating:
            self.world.move(self.node, dataclasses.replace(self.pod, terminating=True), remove=False)


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
    return value if isinstance(value, MAPPING) else {}


def _ready(status: Mapping[str, Any]) -> bool:
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, MAPPING) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _scheduled_at(meta: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    """When the pod was bound to its node: its PodScheduled condition, else its start, else its creation."""
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, MAPPING) and condition.get("type") == "PodScheduled":
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
        sorted({k for v in volumes if isinstance(v, MAPPING) for k in v if k != "name"})
        if isinstance(volumes, list)
        else []
    )
    return keys.spec_key(
        spec,
        ("affinity", "tolerations", "nodeSelector", "schedulerName", "overhead", "resources"),
        ("image", *keys.USAGE_CONTAINER_FIELDS),
        meta.get("labels"),
        annotations.get(OPT_OUT_ANNOTATION) if isinstance(annotations, MAPPING) else annotations,
        annotations.get(INJECTED_ANNOTATION) if isinstance(annotations, MAPPING) else None,
        kinds,
        bool(spec.get("topologySpreadConstraints")),
        bool(spec.get("resourceClaims")),
    )


def replacement_key(pod: Mapping[str, Any]) -> bytes:
    """What a replacement's admission and scheduling view read: its template's key (`_template_key`)
    and what admission reads besides: its namespace (its LimitRanges, a dry run's answer), its
    RuntimeClass and PriorityClass."""
    meta, spec = _mapping(pod, "metadata"), _mapping(pod, "spec")
    extra = [meta.get("namespace"), spec.get("runtimeClassName"), spec.get("priorityClassName")]
    return _template_key(meta, spec) + keys.spec_key({}, (), None, *extra)


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
