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
  protect (terminating, mirror, no controller, DaemonSet, system-critical priority, local
  storage, min age, replicas), and a second pod of one owner (the top owner: a Deployment over
  its ReplicaSets).
- **The replacement** is the pod recreated: the webhook's outcome for it (its terms), no nodeName.
  It is filtered and scored over every node by `webhook.scheduling` (`Predictor`), given what the
  pods on each node take, with the candidate itself gone from its node and every move planned so
  far counted on its target. The move is planned when kube-scheduler's prediction (the best total,
  as `explain` computes it) is a `net=high` node, which becomes the target; otherwise it is skipped
  with the reason: no `net=high` node passes the filters (their reasons, counted as the
  scheduler's FitError counts them), or a slower node scores better.

Nothing here does I/O; pods and nodes are folded in one at a time (`Cluster.add_node`,
`Cluster.add_pod`), so memory holds a usage tally per node and a small record per candidate.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from webhook import evictability, owners, scheduling
from webhook.affinity import preferred_score
from webhook.apidata import ShapeError
from webhook.evictability import DEFAULT_MIN_AGE, DEFAULT_MIN_REPLICAS, Facts
from webhook.names import DEFAULT_NAMESPACE, INJECTED_ANNOTATION, OPT_OUT_ANNOTATION
from webhook.owners import Owner
from webhook.policy import Decision, Policy, evaluate
from webhook.scope import ALWAYS_EXCLUDED_NAMESPACES

__all__ = ["DEFAULT_MIN_AGE", "DEFAULT_MIN_REPLICAS", "Candidate", "Cluster", "Options", "Owner", "Plan", "plan"]

T = TypeVar("T")
EVICT = "evict"
SKIP = "skip"
HIGH = "high"
TEMPLATES = 4096  # distinct pod specs remembered while reading pods
PREDICTORS = 64  # replacement specs whose per-node scores are kept at once (each holds a list per node)
STATIC_LISTS = 256  # per-node lists that do not depend on usage, shared between predictors


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
    replacement: scheduling.PodView | None
    error: str = ""


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


class Cluster:
    """The cluster as the plan needs it, folded from API objects one at a time: `add_node` for
    every Node, then `add_pod` for every pod bound to a node and not finished."""

    def __init__(self, policy: Policy, options: Options) -> None:
        self.policy = policy
        self.options = options
        self.nodes: list[scheduling.Node] = []
        self.net: dict[str, str | None] = {}
        self._tallies: dict[str, scheduling.UsageTally] = {}
        self._usage_views: dict[bytes, scheduling.PodView] = {}
        self._templates: dict[bytes, _Template] = {}
        self.pending: list[_Pending] = []
        self.ready: Counter[str] = Counter()  # controller uid -> its ready pods
        self.notes: list[str] = []
        self._excluded = {*ALWAYS_EXCLUDED_NAMESPACES, options.webhook_namespace}

    def add_node(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        try:
            node = scheduling.node_from_api(obj)
        except ShapeError as err:  # the scheduler could not place a pod there either
            self.notes.append(f"node {meta.get('name', '?')} left out: {err}")
            return
        self.nodes.append(node)
        self.net[node.name] = node.labels.get(scheduling.NETQOS_NODE_LABEL)
        self._tallies[node.name] = scheduling.UsageTally()

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
        if self.net[node] != HIGH and status.get("phase") == "Running":
            self._consider(pod, meta, spec, status, node)

    def _usage_view(self, pod: Mapping[str, Any], spec: Mapping[str, Any]) -> scheduling.PodView | None:
        """What the pod takes of its node; pods of one template are read once."""
        key = orjson.dumps([spec.get(f) for f in ("containers", "initContainers", "overhead", "resources")])
        view = self._usage_views.get(key)
        if view is None:
            try:
                view = scheduling.pod_view(pod)
            except ShapeError:  # the API server stores no such pod; one that slipped in takes nothing here
                return None
            if len(self._usage_views) < TEMPLATES:
                self._usage_views[key] = view
        return view

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
        key = _template_key(meta, spec)
        found = self._templates.get(key)
        if found is not None:
            return found
        outcome = evaluate(self.policy, pod)
        replacement = None
        error = ""
        if outcome.decision in (Decision.MUTATED, Decision.UNCHANGED):
            try:
                replacement = dataclasses.replace(scheduling.pod_view(outcome.pod), node_name="")
            except ShapeError as err:
                error = f"cannot evaluate the pod's scheduling fields: {err}"
        template = _Template(outcome.decision, replacement, error)
        if len(self._templates) < TEMPLATES:
            self._templates[key] = template
        return template

    def owner_lookups(self) -> set[tuple[str, str, str]]:
        """(namespace, kind, name) of each candidate's controller that may itself be owned
        (a ReplicaSet by a Deployment, a Job by a CronJob): the command reads them."""
        return {
            (p.namespace, c.kind, c.name)
            for p in self.pending
            if (c := p.facts.controller) is not None and owners.climbs(c)
        }

    def usage(self) -> dict[str, scheduling.UsageTally]:
        return self._tallies


# ---------------------------------------------------------------------------------------------
# The plan


def plan(
    cluster: Cluster,
    owners: Mapping[tuple[str, str, str], Owner] | None = None,
    profile: scheduling.Profile = scheduling.DEFAULT_PROFILE,
) -> Plan:
    """Judge every candidate in order and plan the moves; `owners` maps (namespace, kind, name) of
    a controller to its top owner, for the controllers `Cluster.owner_lookups` named."""
    owners = owners or {}
    context = evictability.Context(cluster.options, cluster.ready)
    state = _State(cluster, profile)
    result = Plan(nodes=len(cluster.nodes), high_nodes=len(state.high), notes=list(cluster.notes))
    planned_owners: set[tuple[str, Owner]] = set()
    for pending in sorted(cluster.pending, key=lambda p: (p.since, p.namespace, p.name)):
        owner = _owner(pending, owners)
        row = _Row(pending, cluster.net.get(pending.node), owner)
        verdict = evictability.judge(pending.facts, context)
        if verdict is not None:
            result.candidates.append(row.skip(verdict.reason, verdict.constraint))
            continue
        if owner is not None and (pending.namespace, owner) in planned_owners:
            reason = f"another pod of {owner} is moved in this run (one pod per owner)"
            result.candidates.append(row.skip(reason, "one-per-owner"))
            continue
        template = pending.template
        if template.replacement is None:
            reason = template.error or "the webhook would not mutate its replacement"
            result.candidates.append(row.skip(reason, "replacement"))
            continue
        target, why = state.place(pending, template)
        if target is None:
            result.candidates.append(row.skip(why, "placement"))
            continue
        if owner is not None:
            planned_owners.add((pending.namespace, owner))
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
    """The cluster during planning: each node's usage, updated by every planned move, and one
    `Predictor` per replacement spec, kept in step through a log of the nodes that changed."""

    def __init__(self, cluster: Cluster, profile: scheduling.Profile) -> None:
        self.nodes = sorted(cluster.nodes, key=lambda n: n.name)
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        self.high = [i for i, n in enumerate(self.nodes) if cluster.net.get(n.name) == HIGH]
        tallies = cluster.usage()
        self.tallies = [tallies[n.name] for n in self.nodes]
        self.usage = [t.usage() for t in self.tallies]
        self.log: list[int] = []  # indices of the nodes whose usage changed, in order
        self.high_changes = 0
        self.profile = profile
        self._predictors: OrderedDict[Hashable, Predictor] = OrderedDict()
        self._static: OrderedDict[Hashable, Any] = OrderedDict()

    def place(self, pending: _Pending, template: _Template) -> tuple[str | None, str]:
        """The target of the candidate's replacement and the reason, or (None, why not)."""
        view = template.replacement
        assert view is not None
        if not self.high:
            return None, "no node is labelled net=high"
        predictor = self._predictor(_scheduling_key(view), view)
        predictor.sync()
        if not predictor.feasible_high:
            return None, predictor.why_no_high()
        source = self.index[pending.node]
        self._change(source, view, remove=True)  # the pod leaves its node before its replacement is scheduled
        predictor.sync()
        choice = predictor.choice()
        if choice.target is None:
            self._change(source, view, remove=False)
            return None, choice.reason
        self._change(self.index[choice.target], view, remove=False)
        return choice.target, choice.reason + _not_evaluated(view)

    def _change(self, i: int, view: scheduling.PodView, remove: bool) -> None:
        if remove:
            self.tallies[i].remove(view)
        else:
            self.tallies[i].add(view)
        self.usage[i] = self.tallies[i].usage()
        self.log.append(i)
        if self.net_high(i):
            self.high_changes += 1

    def net_high(self, i: int) -> bool:
        return self.nodes[i].labels.get(scheduling.NETQOS_NODE_LABEL) == HIGH

    # What does not depend on the pods on the nodes, per node, shared by every Predictor whose pod
    # reads the same fields (all of them read the policy's terms, most the same tolerations).

    def node_only(self, view: scheduling.PodView) -> list[tuple[str, ...]]:
        """PreFilter, then the Filter plugins that read the pod and the node alone."""
        key = ("node-only", view.node_name, view.tolerations, tuple(sorted(view.node_selector.items())), view.required)

        def compute() -> list[tuple[str, ...]]:
            allowed = scheduling.prefilter_node_names(view)
            if allowed is not None and not allowed:
                return [(scheduling.REASON_TERMS_CONFLICT,)] * len(self.nodes)
            return [
                (scheduling.REASON_NOT_IN_PREFILTER,)
                if allowed is not None and n.name not in allowed
                else scheduling.node_only_reasons(view, n, self.profile)
                for n in self.nodes
            ]

        return self._shared(key, compute)

    def raw_affinity(self, view: scheduling.PodView) -> list[int]:
        preferred = (*view.preferred, *self.profile.added_preferred)
        return self._shared(
            ("affinity", preferred), lambda: [preferred_score(preferred, n.labels, n.name) for n in self.nodes]
        )

    def raw_taints(self, view: scheduling.PodView) -> list[int]:
        return self._shared(
            ("taints", view.tolerations),
            lambda: [scheduling.intolerable_prefer_no_schedule(view.tolerations, n.taints) for n in self.nodes],
        )

    def image_scores(self, view: scheduling.PodView) -> list[int]:
        images = view.images

        def compute() -> list[int]:
            nodes_with = Counter(name for n in self.nodes for name in set(n.images) & set(images))
            if scheduling.IMAGE_LOCALITY not in self.profile.weights or not nodes_with:
                return [0] * len(self.nodes)  # no node has one of its images: every node scores 0
            return [scheduling.image_locality(images, n, nodes_with, len(self.nodes)) for n in self.nodes]

        return self._shared(("images", images), compute)

    def _shared(self, key: Hashable, compute: Callable[[], list[T]]) -> list[T]:
        found = self._static.get(key)
        if found is None:
            found = self._static[key] = compute()
            if len(self._static) > STATIC_LISTS:
                self._static.popitem(last=False)
        else:
            self._static.move_to_end(key)
        return found

    def _predictor(self, key: Hashable, view: scheduling.PodView) -> Predictor:
        predictor = self._predictors.get(key)
        if predictor is None:
            predictor = Predictor(view, self)
            self._predictors[key] = predictor
            if len(self._predictors) > PREDICTORS:
                self._predictors.popitem(last=False)
        else:
            self._predictors.move_to_end(key)
        return predictor


@dataclass(frozen=True)
class Choice:
    target: str | None
    reason: str


class Predictor:
    """kube-scheduler's prediction for one pod spec over every node, kept up to date as nodes'
    usage changes: `scheduling.rank`'s result (the feasible nodes, each plugin's score normalised
    and weighted, the best total) without ranking every node again for every pod.

    Per node it keeps the filter reasons, the raw scores that do not depend on usage (NodeAffinity,
    TaintToleration, ImageLocality) and those that do (NodeResourcesFit, BalancedAllocation); a
    node whose usage changed is evaluated again (`sync`, from the state's log). The plugins that
    normalise (NodeAffinity, TaintToleration) do so by the best raw score over the feasible nodes:
    when that changes, every total is recomputed. The totals of the net=high nodes and of the
    others are kept apart, so the best of each is one `max` over a list. `tests/unit/test_rebalance`
    checks the prediction against `scheduling.rank` on random clusters.
    """

    def __init__(self, view: scheduling.PodView, state: _State) -> None:
        self.view = view
        self.state = state
        profile = state.profile
        self.weights = profile.weights
        nodes = state.nodes
        self.node_only = state.node_only(view)
        self.raw_affinity = state.raw_affinity(view)
        self.raw_taints = state.raw_taints(view)
        self.image = state.image_scores(view)
        self.skip_balanced = scheduling.is_best_effort(view.requests, profile.balanced_resources)
        self.reasons: list[tuple[str, ...]] = [()] * len(nodes)
        self.usage_scores = [0] * len(nodes)  # weighted NodeResourcesFit + BalancedAllocation
        self.feasible_affinity: Counter[int] = Counter()  # raw NodeAffinity score -> feasible nodes with it
        self.feasible_taints: Counter[int] = Counter()
        self.high = set(state.high)
        self.position = {i: k for k, i in enumerate(state.high)}
        others = [i for i in range(len(nodes)) if i not in self.high]
        self.position.update({i: k for k, i in enumerate(others)})
        self.others = others
        self.totals_high = [-1] * len(state.high)  # -1: infeasible
        self.totals_other = [-1] * len(others)
        self.feasible_high = 0
        self.feasible: set[int] = set()  # the nodes counted as feasible
        # Feasible nodes other than net=high ones whose usage scores are not computed yet: their
        # totals hold an upper bound (each usage plugin's best score, 100, times its weight).
        self.lazy: set[int] = set()
        self.usage_bound = scheduling.MAX_NODE_SCORE * (
            self.weights.get(scheduling.NODE_RESOURCES_FIT, 0)
            + (0 if self.skip_balanced else self.weights.get(scheduling.BALANCED_ALLOCATION, 0))
        )
        for i in range(len(nodes)):
            self._evaluate(i)
        self.maxima = self._maxima()
        for i in range(len(nodes)):
            self._total(i)
        self.seen = len(state.log)
        self._why: tuple[int, str] | None = None

    def sync(self) -> None:
        """Evaluate again every node whose usage changed since the last call."""
        log = self.state.log
        if self.seen == len(log):
            return
        changed = set(log[self.seen :])
        self.seen = len(log)
        for i in changed:
            self._evaluate(i)
        maxima = self._maxima()
        if maxima != self.maxima:
            self.maxima = maxima
            changed = set(range(len(self.state.nodes)))
        for i in changed:
            self._total(i)

    def _evaluate(self, i: int) -> None:
        node, usage = self.state.nodes[i], self.state.usage[i]
        was = i in self.feasible
        # filter_reasons, in two halves: the node-only filters' verdict is shared (`_State.node_only`)
        reasons = self.node_only[i] or scheduling.usage_reasons(self.view, node, usage)
        self.reasons[i] = reasons
        feasible = not reasons
        if was != feasible:
            step = 1 if feasible else -1
            self.feasible_affinity[self.raw_affinity[i]] += step
            self.feasible_taints[self.raw_taints[i]] += step
            if i in self.high:
                self.feasible_high += step
        if not feasible:
            self.feasible.discard(i)
            self.lazy.discard(i)
            return
        self.feasible.add(i)
        if i not in self.high:  # scored when it could beat the best net=high node (`choice`)
            self.lazy.add(i)
            self.usage_scores[i] = self.usage_bound
            return
        self._score_usage(i)

    def _score_usage(self, i: int) -> None:
        """NodeResourcesFit's and BalancedAllocation's weighted scores of node i, exactly."""
        self.lazy.discard(i)
        node, usage = self.state.nodes[i], self.state.usage[i]
        weights, view, profile = self.weights, self.view, self.state.profile
        score = 0
        if scheduling.NODE_RESOURCES_FIT in weights:
            fit = scheduling.fit_score(view.non_zero_requests, node, usage, profile.scoring_strategy)
            score += fit * weights[scheduling.NODE_RESOURCES_FIT]
        if scheduling.BALANCED_ALLOCATION in weights and not self.skip_balanced:
            balanced = scheduling.balanced_score(view.requests, node, usage, profile.balanced_resources)
            score += balanced * weights[scheduling.BALANCED_ALLOCATION]
        self.usage_scores[i] = score

    def _maxima(self) -> tuple[int, int]:
        def top(counter: Counter[int]) -> int:
            return max((raw for raw, count in counter.items() if count > 0), default=0)

        return top(self.feasible_affinity), top(self.feasible_taints)

    def _total(self, i: int) -> None:
        """The node's total as `scheduling.rank` sums it: each plugin's normalised score times its weight."""
        totals = self.totals_high if i in self.high else self.totals_other
        if self.reasons[i]:
            totals[self.position[i]] = -1
            return
        weights = self.weights
        top_affinity, top_taints = self.maxima
        total = self.usage_scores[i]
        if scheduling.TAINT_TOLERATION in weights:
            # DefaultNormalizeScore(reverse): no node with an intolerable taint scores them all 100
            raw = self.raw_taints[i]
            normalised = scheduling.MAX_NODE_SCORE - (
                scheduling.MAX_NODE_SCORE * raw // top_taints if top_taints else 0
            )
            total += normalised * weights[scheduling.TAINT_TOLERATION]
        if scheduling.NODE_AFFINITY in weights and top_affinity:
            total += (
                scheduling.MAX_NODE_SCORE * self.raw_affinity[i] // top_affinity * weights[scheduling.NODE_AFFINITY]
            )
        if scheduling.IMAGE_LOCALITY in weights:
            total += self.image[i] * weights[scheduling.IMAGE_LOCALITY]
        if scheduling.NETQOS in weights:
            node = self.state.nodes[i]
            total += scheduling.netqos_score(self.view.labels, node.labels) * weights[scheduling.NETQOS]
        totals[self.position[i]] = total

    def predicted(self) -> list[str]:
        """The feasible node(s) with the best total, by name: `scheduling.rank(...).predicted`."""
        for i in list(self.lazy):
            self._score_usage(i)
            self._total(i)
        best = max(max(self.totals_high, default=-1), max(self.totals_other, default=-1))
        if best < 0:
            return []
        names = [self.state.nodes[i].name for i, k in zip(self.state.high, self.totals_high, strict=True) if k == best]
        names += [self.state.nodes[i].name for i, k in zip(self.others, self.totals_other, strict=True) if k == best]
        return sorted(names)

    def choice(self) -> Choice:
        """The net=high node the replacement is predicted on, or why it is not predicted on one."""
        nodes = self.state.nodes
        best_high = max(self.totals_high, default=-1)
        if best_high < 0:
            return Choice(None, self.why_no_high())
        high = nodes[self.state.high[self.totals_high.index(best_high)]]
        best_other = self._best_other(best_high)
        if best_other < best_high:
            top = self.others[self.totals_other.index(best_other)] if best_other >= 0 else -1
            if best_other < 0:
                against = ", the only feasible nodes are net=high"
            elif top in self.lazy:
                against = f", more than any other node can score (at most {best_other})"
            else:
                against = f" against {best_other} on {self._describe(nodes[top])}"
            return Choice(
                high.name,
                f"kube-scheduler would place the replacement on {high.name} (net=high): total {best_high}{against}",
            )
        other = nodes[self.others[self.totals_other.index(best_other)]]
        if best_other == best_high:
            return Choice(
                None,
                f"kube-scheduler would pick at random between {high.name} (net=high) and {self._describe(other)}: "
                f"total {best_high} each",
            )
        return Choice(
            None,
            f"kube-scheduler would place the replacement on {self._describe(other)}: total {best_other} against "
            f"{best_high} on {high.name} (net=high), the best net=high node",
        )

    def _best_other(self, best_high: int) -> int:
        """The best total over the nodes that are not net=high, exact wherever it could reach
        `best_high`: the node with the highest bound is scored until the top is exact or below."""
        while True:
            best = max(self.totals_other, default=-1)
            top = self.others[self.totals_other.index(best)] if best >= 0 else -1
            if best < best_high or top not in self.lazy:
                return best
            self._score_usage(top)
            self._total(top)

    def why_no_high(self) -> str:
        """The filter reasons of every net=high node, counted as the scheduler's FitError counts
        them; recomputed only when a net=high node's usage changed."""
        if self._why is None or self._why[0] != self.state.high_changes:
            counts = Counter(r for i in self.state.high for r in self.reasons[i])
            total = len(self.state.high)
            text = "; ".join(sorted(f"{c}/{total} net=high node(s): {r}" for r, c in counts.items()))
            self._why = (self.state.high_changes, f"no net=high node fits the replacement: {text}")
        return self._why[1]

    def _describe(self, node: scheduling.Node) -> str:
        net = node.labels.get(scheduling.NETQOS_NODE_LABEL)
        return f"{node.name} (net={net})" if net is not None else f"{node.name} (no net label)"


def _scheduling_key(view: scheduling.PodView) -> Hashable:
    """What the filters and scores read of a pod: pods that differ only in their labels (a
    StatefulSet's pod names, a rollout's template hash) share one `Predictor`."""
    return (
        view.preferred,
        view.required,
        tuple(sorted(view.node_selector.items())),
        view.tolerations,
        tuple(sorted(view.requests.items())),
        tuple(sorted(view.non_zero_requests.items())),
        view.host_ports,
        view.images,
        view.uses,
        view.labels.get(scheduling.NETQOS_POD_LABEL[0]),  # the NetQoS plugin's score, in a profile with it
    )


def _not_evaluated(view: scheduling.PodView) -> str:
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
    constraints or resource claims (`scheduling.pod_view`'s `uses`)."""
    annotations = meta.get("annotations") or {}

    def containers(key: str) -> list[Any]:
        items = spec.get(key)
        return [
            [c.get(f) for f in ("image", "resources", "ports", "restartPolicy")] if isinstance(c, Mapping) else c
            for c in (items if isinstance(items, list) else ())
        ]

    volumes = spec.get("volumes")
    kinds = (
        sorted({k for v in volumes if isinstance(v, Mapping) for k in v if k != "name"})
        if isinstance(volumes, list)
        else []
    )
    return orjson.dumps(
        [
            meta.get("labels"),
            annotations.get(OPT_OUT_ANNOTATION) if isinstance(annotations, Mapping) else annotations,
            annotations.get(INJECTED_ANNOTATION) if isinstance(annotations, Mapping) else None,
            *(spec.get(f) for f in ("affinity", "tolerations", "nodeSelector", "schedulerName", "overhead")),
            spec.get("resources"),
            containers("containers"),
            containers("initContainers"),
            kinds,
            bool(spec.get("topologySpreadConstraints")),
            bool(spec.get("resourceClaims")),
        ],
        option=orjson.OPT_SORT_KEYS,
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
    }
