"""What-if placement: kube-scheduler's prediction for pod after pod over one set of nodes whose
usage changes as pods are moved (`World.move`), without ranking every node again for every pod.
Iterates the same plugin tables as `cycle.rank`, and predicts what it predicts: `tests/unit/
test_rebalance` and `tests/unit/test_scheduler_table` check it against `cycle.rank`.

The nodes are split into those of a `Target` (the fast nodes) and the others; `Predictor.choice`
says whether the pod's best node is a target node, and by how much.

Per node a `Predictor` keeps the filter reasons and each Score plugin's raw score: those of the
plugins that read the node alone (`framework.Reads.NODE`) are computed once per node and shared by
every predictor whose pod has the plugin's key; those that read the node's usage are computed
again when the node's usage changes (`sync`, from the world's log). A plugin that normalises
does so by the best raw score over the feasible nodes: when that changes, every total is
recomputed. Non-target nodes' usage scores are computed lazily: until needed their totals hold
an upper bound (each usage plugin's best score, 100, times its weight).

Above 100 nodes a cycle scores a sample (`sampling.landing`); `World.landing` given the pod's
predictor answers as `sampling.landing` does from the predictor's filter verdicts and each Score
plugin's raw score per node, kept until the node's usage changes (`_Sampler`), instead of ranking
every node again for every pod.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from webhook.affinity import PREFERRED, preferred_terms_problem
from webhook.names import MAX_NODE_SCORE
from webhook.scheduler import cycle, keys, registry, sampling
from webhook.scheduler.framework import Reads, ScorePlugin
from webhook.scheduler.model import EMPTY_USAGE, Node, NodeUsage, PodInfo, Profile, Snapshot, Target, UsageTally

T = TypeVar("T")
PREDICTORS = 64  # pod specs whose per-node scores are kept at once (each holds a list per node)
STATIC_LISTS = 256  # per-node lists that do not depend on usage, shared between predictors


class World:
    """Nodes (in name order) and what the pods on them take, changed one pod at a time (`move`);
    a log of the nodes whose usage changed keeps every `Predictor` in step. `namespaces`: the
    namespaces' labels, for pod affinity's namespaceSelectors (`Snapshot.namespaces`; a namespace
    not there has its `kubernetes.io/metadata.name` label alone)."""

    def __init__(
        self,
        nodes: Sequence[Node],
        tallies: Mapping[str, UsageTally],
        profile: Profile,
        target: Target,
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
    ):
        self.nodes = sorted(nodes, key=lambda n: n.name)
        self.namespaces = namespaces or {}
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        self.target = target  # the default target; a predictor may be given another (`fast_of`)
        self._fast: dict[Target, list[int]] = {}
        self.fast = self.fast_of(target)
        self.tallies = [tallies[n.name] for n in self.nodes]
        self.usage = [t.usage() for t in self.tallies]
        # each node's usage by name, kept as pods move: a snapshot copies it rather than building it
        self._by_name = {n.name: u for n, u in zip(self.nodes, self.usage, strict=True)}
        # the nodes running a pod with pod (anti-)affinity terms (`Snapshot.with_affinity`), kept
        # as pods move rather than found again over every node for every snapshot
        self.with_affinity = {i for i, u in enumerate(self.usage) if u.with_affinity}
        self.log: list[int] = []  # indices of the nodes whose usage changed, in order
        self.fast_changes: Counter[Target] = Counter()  # per target: moves on its nodes
        self.profile = profile
        self.label_keys = _label_keys(t.usage() for t in self.tallies)
        self._predictors: OrderedDict[Hashable, Predictor] = OrderedDict()
        self._keys: OrderedDict[tuple[int, int, Target], tuple[PodInfo, Profile, Hashable]] = OrderedDict()
        self._static: OrderedDict[Hashable, Any] = OrderedDict()
        self._landing_scores: OrderedDict[Hashable, tuple[list[int | None], list[int]]] = OrderedDict()
        self._snapshot: tuple[int, Snapshot] | None = None
        self._tree_order: list[Node] | None = None

    def tree_order(self) -> list[Node]:
        """The nodes as the scheduler's node tree lists them (`sampling.tree_order`): moves do
        not change it, so every pod's walk starts from the same list."""
        if self._tree_order is None:
            self._tree_order = sampling.tree_order(self.nodes)
        return self._tree_order

    def snapshot(self) -> Snapshot:
        """The world as a cycle sees it (every node feasible; a predictor narrows that), made
        again only after a move (every predictor syncs against the same one)."""
        if self._snapshot is None or self._snapshot[0] != len(self.log):
            snapshot = Snapshot(self.nodes, dict(self._by_name), self.nodes, self.namespaces)
            snapshot.knowing(tuple(self.nodes[i] for i in sorted(self.with_affinity)))
            self._snapshot = (len(self.log), snapshot)
        return self._snapshot[1]

    def landing(self, pod: PodInfo, profile: Profile, predictor: Predictor | None = None) -> sampling.Landing | None:
        """Where one cycle binds `pod` now, over the scheduler's rotating samples of nodes
        (`sampling.landing`); None below 100 nodes, where every cycle filters every node and the
        prediction is certain. `predictor`: the pod's (`predictor(pod, profile, ...)`), whose
        filter verdicts and per-node raw scores spare ranking every node again (`_Sampler`)."""
        if len(self.nodes) < cycle.MIN_FEASIBLE_NODES_TO_FIND:
            return None
        if predictor is not None:
            predictor.sync()
            if predictor.sampler is None:
                predictor.sampler = _Sampler(predictor.pod, self, predictor.profile)
            found = predictor.sampler.landing(predictor.reasons)
            if found is not None:
                return found
        return sampling.landing(pod, self.nodes, self.snapshot().usage, profile, self.namespaces)

    def move(self, i: int, pod: PodInfo, remove: bool) -> None:
        """`pod` leaves node i (`remove`) or is placed on it."""
        if remove:
            self.tallies[i].remove(pod)
        else:
            self.tallies[i].add(pod)
        self.usage[i] = self._by_name[self.nodes[i].name] = self.tallies[i].usage()
        if self.usage[i].with_affinity:
            self.with_affinity.add(i)
        else:
            self.with_affinity.discard(i)
        self.log.append(i)
        for target in self._fast:
            if target.matches(self.nodes[i].labels):
                self.fast_changes[target] += 1

    def fast_of(self, target: Target) -> list[int]:
        """The indices of `target`'s nodes (a policy's rules may each have their own target)."""
        found = self._fast.get(target)
        if found is None:
            found = self._fast[target] = [i for i, n in enumerate(self.nodes) if target.matches(n.labels)]
        return found

    def predictor(self, pod: PodInfo, profile: Profile | None = None, target: Target | None = None) -> Predictor:
        """The predictor for `pod`'s spec under `profile` (the world's by default: a pod of
        another scheduler is predicted with that scheduler's profile over the same nodes and
        moves) towards `target` (the world's by default: the target of the pod's rule), up to
        date with every move (pods of one `keys.scheduling_key`, profile and target share it)."""
        profile = profile or self.profile
        target = target or self.target
        key = self._predictor_key(pod, profile, target)
        predictor = self._predictors.get(key)
        if predictor is None:
            predictor = self._predictors[key] = Predictor(pod, self, profile, target)
            if len(self._predictors) > PREDICTORS:
                self._predictors.popitem(last=False)
        else:
            self._predictors.move_to_end(key)
        predictor.sync()
        return predictor

    def _predictor_key(self, pod: PodInfo, profile: Profile, target: Target) -> Hashable:
        """The key of `pod`'s predictor, remembered by the pod and profile objects: a plan asks
        again for each candidate whose replacement is the same view, and the key reads the whole
        spec. The pod and profile are held with it, so their ids cannot be reused meanwhile."""
        memo = (id(pod), id(profile), target)
        found = self._keys.get(memo)
        if found is None or found[0] is not pod or found[1] is not profile:
            key = (profile.scheduler_name, target, keys.scheduling_key(pod, profile, self.label_keys))
            found = self._keys[memo] = (pod, profile, key)
            if len(self._keys) > STATIC_LISTS:
                self._keys.popitem(last=False)
        else:
            self._keys.move_to_end(memo)
        return found[2]

    # What does not depend on the pods on the nodes, per node, shared by every Predictor whose pod
    # reads the same fields (all of them read the policy's terms, most the same tolerations).

    def node_only(self, pod: PodInfo, profile: Profile) -> list[tuple[str, ...]]:
        """PreFilter, then the Filter plugins that read the pod and the node alone (NodeAffinity
        reads the profile's addedAffinity too)."""
        key = ("node-only", keys.node_filter_key(pod, profile), profile.added_required)
        return self.shared(key, lambda: cycle.FilterChain(pod, profile).node_only(self.nodes)[1])

    def static_scores(self, plugin: ScorePlugin, pod: PodInfo, profile: Profile, state: Any) -> list[int]:
        """The raw scores of a plugin that reads the node alone, per node."""
        key = ("score", plugin, plugin.key(pod, profile))
        return self.shared(key, lambda: [plugin.score(state, n, EMPTY_USAGE) for n in self.nodes])

    def landing_scores(
        self, plugin: ScorePlugin, pod: PodInfo, profile: Profile, state: Any, indices: Iterable[int]
    ) -> list[int]:
        """The raw scores of the nodes `indices` for a plugin that reads the node or its usage,
        prepared as `_Sampler` prepares it; each node's is kept until its usage changes, shared
        by the pods of one `plugin.key` and profile."""
        key = ("landing", plugin, plugin.key(pod, profile), profile.scheduler_name)
        kept = self._landing_scores.get(key)
        if kept is None:
            kept = self._landing_scores[key] = ([None] * len(self.nodes), [len(self.log)])
            if len(self._landing_scores) > STATIC_LISTS:
                self._landing_scores.popitem(last=False)
        else:
            self._landing_scores.move_to_end(key)
        raw, seen = kept
        for i in self.log[seen[0] :]:
            raw[i] = None
        seen[0] = len(self.log)
        found: list[int] = []
        for i in indices:
            value = raw[i]
            if value is None:
                value = raw[i] = plugin.score(state, self.nodes[i], self.usage[i])
            found.append(value)
        return found

    def shared(self, key: Hashable, compute: Callable[[], list[T]]) -> list[T]:
        found = self._static.get(key)
        if found is None:
            found = self._static[key] = compute()
            if len(self._static) > STATIC_LISTS:
                self._static.popitem(last=False)
        else:
            self._static.move_to_end(key)
        return found


class _Sampler:
    """`sampling.landing` for one pod spec over the world, from its `Predictor`'s filter verdicts
    and each Score plugin's raw score per node, kept until the node's usage changes (a move
    changes one node, so each landing scores the nodes moves changed, not every node). The walk
    (the node tree's order, PreFilter's names, the nodes a cycle stops at) does not depend on
    usage. It answers only while every Score plugin whose PreScore keeps the pod reads the node
    alone or its usage, with more feasible nodes than a cycle scores and preferred terms that
    parse; otherwise (None) `sampling.landing` ranks every node."""

    def __init__(self, pod: PodInfo, world: World, profile: Profile) -> None:
        self.pod, self.world, self.profile = pod, world, profile
        self.order, walked, self.wanted = sampling.walk(pod, world.nodes, profile, order=world.tree_order())
        self.walked = len(walked)
        self.tree = [world.index[n.name] for n in self.order]
        self.rank = [0] * len(self.tree)  # each node's place in the tree's order, by its index
        for k, i in enumerate(self.tree):
            self.rank[i] = k
        position = {n.name: k for k, n in enumerate(walked)}
        self.position = [position.get(n.name, -1) for n in world.nodes]
        # PreScore of the plugins that read no other pod reads the pod, the profile and the
        # node list (ImageLocality), the same for every landing; raw_columns' order is kept.
        snapshot = Snapshot(self.order, world.snapshot().usage, self.order, world.namespaces)
        snapshot.knowing(self._with_affinity())
        self.plugins: list[tuple[ScorePlugin, int, Any]] = []
        self.cluster: list[ScorePlugin] = []
        for plugin, weight in registry.score_plugins(profile):
            if plugin.reads is Reads.CLUSTER:
                self.cluster.append(plugin)
                continue
            state = plugin.prepare(pod, snapshot, profile)
            if state is not None:
                self.plugins.append((plugin, weight, state))
        self.fails = preferred_terms_problem(pod.preferred, f"spec.affinity.nodeAffinity.{PREFERRED}") is not None

    def landing(self, reasons: Sequence[tuple[str, ...]]) -> sampling.Landing | None:
        """The landing given every node's filter reasons now (the predictor's, up to date)."""
        world = self.world
        chosen = [i for i in self.tree if not reasons[i]]
        if len(chosen) <= self.wanted or self.fails:
            return None
        nodes = world.nodes
        if self.cluster:
            snapshot = Snapshot(self.order, world.snapshot().usage, [nodes[i] for i in chosen], world.namespaces)
            snapshot.knowing(self._with_affinity())
            if any(p.prepare(self.pod, snapshot, self.profile) is not None for p in self.cluster):
                return None
        columns = []
        for plugin, weight, state in self.plugins:
            raw = world.landing_scores(plugin, self.pod, self.profile, state, chosen)
            columns.append(cycle.Column(plugin.name, weight, raw, plugin.normalize))
        names = [nodes[i].name for i in chosen]
        return sampling.windowed(self.walked, self.wanted, columns, names, [self.position[i] for i in chosen])

    def _with_affinity(self) -> tuple[Node, ...]:
        """The world's nodes running a pod with pod (anti-)affinity terms, in the tree's order: what
        a snapshot over `order` would find again over every node (`Snapshot.with_affinity`)."""
        return tuple(self.world.nodes[i] for i in sorted(self.world.with_affinity, key=self.rank.__getitem__))


def _label_keys(usages: Iterable[NodeUsage]) -> frozenset[str]:
    """Every label key the pod affinity terms of the pods on the nodes select by: a pod's labels
    beyond these are read by no other pod's terms. (Moves never bring a new pod into the world,
    so the set stays right as pods move.)"""
    found: set[str] = set()
    for usage in usages:
        for pod in usage.with_affinity:
            terms = pod.pod_affinity
            every = [
                *terms.required,
                *terms.required_anti,
                *(w.term for w in (*terms.preferred, *terms.preferred_anti)),
            ]
            for term in every:
                if term.selector is not None:
                    found.update(k for k, _ in term.selector.match_labels)
                    found.update(r.key for r in term.selector.match_expressions)
    return frozenset(found)


@dataclass(frozen=True)
class Choice:
    target: str | None
    reason: str
    unfit: tuple[str, ...] = ()  # no target node passes the filters: their reasons (`Predictor.unfit`)


@dataclass
class _Column:
    """One Score plugin of the profile for one pod: its state, weight and raw scores per node."""

    plugin: ScorePlugin
    state: Any
    weight: int
    raw: list[int]
    feasible: Counter[int]  # for a plugin that normalises: raw score -> feasible nodes with it

    def extremes(self) -> tuple[int | None, int | None]:
        assert self.plugin.normalize is not None
        return self.plugin.normalize.extremes(v for v, n in self.feasible.items() if n > 0)


class Predictor:
    """kube-scheduler's prediction for one pod spec over the world's nodes, kept up to date as
    their usage changes: `cycle.rank`'s result (the feasible nodes, each plugin's score
    normalised and weighted, the best total) without ranking every node again for every pod.
    The totals of the target nodes and of the others are kept apart, so the best of each is one
    `max` over a list. The plugins that read the whole cluster (`Reads.CLUSTER`: their PreFilter
    and PreScore count other pods on every node) are evaluated again over every node whenever a
    node changed."""

    def __init__(
        self, pod: PodInfo, world: World, profile: Profile | None = None, target: Target | None = None
    ) -> None:
        self.pod = pod
        self.world = world
        self.profile = profile = profile or world.profile
        self.target = target = target or world.target
        self.fast_nodes = fast_nodes = world.fast_of(target)
        nodes = world.nodes
        self.node_only = world.node_only(pod, profile)
        self.static: list[_Column] = []
        self.dynamic: list[_Column] = []
        self.cluster_plugins: list[tuple[ScorePlugin, int]] = []
        snapshot = world.snapshot()
        for plugin, weight in registry.score_plugins(profile):
            if plugin.reads is Reads.CLUSTER:
                self.cluster_plugins.append((plugin, weight))
                continue
            state = plugin.prepare(pod, snapshot, profile)
            if state is None:
                continue  # PreScore skips it for this pod
            if plugin.reads is Reads.NODE:
                self.static.append(
                    _Column(plugin, state, weight, world.static_scores(plugin, pod, profile, state), Counter())
                )
            else:
                self.dynamic.append(_Column(plugin, state, weight, [0] * len(nodes), Counter()))
        self.cluster: list[_Column] = []  # the cluster plugins' columns of the last evaluation
        self.normalising = [c for c in (*self.static, *self.dynamic) if c.plugin.normalize is not None]
        # Usage scores of non-target nodes are bounded until needed; normalising ones are exact.
        self.lazy_columns = [c for c in self.dynamic if c.plugin.normalize is None]
        self.usage_bound = MAX_NODE_SCORE * sum(c.weight for c in self.lazy_columns)
        self.base: list[tuple[str, ...]] = [()] * len(nodes)  # the reasons of the node and usage filters
        self.reasons: list[tuple[str, ...]] = [()] * len(nodes)
        self.usage_scores = [0] * len(nodes)  # the weighted sum of the lazy columns
        self.fast = set(fast_nodes)
        self.position = {i: k for k, i in enumerate(fast_nodes)}
        others = [i for i in range(len(nodes)) if i not in self.fast]
        self.position.update({i: k for k, i in enumerate(others)})
        self.others = others
        self.totals_fast = [-1] * len(fast_nodes)  # -1: infeasible
        self.totals_other = [-1] * len(others)
        self.feasible_fast = 0
        self.feasible: set[int] = set()
        self.lazy: set[int] = set()  # feasible non-target nodes whose totals hold the bound
        self.tops: tuple[tuple[int | None, int | None], ...] = ()
        self.seen = -1
        self._why: tuple[int, tuple[str, ...]] | None = None
        self.sampler: _Sampler | None = None  # `World.landing`'s, made on its first landing
        self._refresh(set(range(len(nodes))))

    def sync(self) -> None:
        """Evaluate again every node whose usage changed since the last call."""
        log = self.world.log
        if self.seen == len(log):
            return
        self._refresh(set(log[self.seen :]))

    def _refresh(self, changed: set[int]) -> None:
        self.seen = len(self.world.log)
        everything = set(range(len(self.world.nodes)))
        snapshot = self.world.snapshot()
        chain = cycle.FilterChain.over(self.pod, self.profile, snapshot)
        for i in changed:
            # the node-only verdict is shared (`World.node_only`); the usage verdict is kept per
            # node until its usage changes
            self.base[i] = chain.through_usage(self.world.nodes[i], self.world.usage[i], self.node_only[i])
        judged = everything if chain.checks or self._cluster_filtered else changed
        self._cluster_filtered = bool(chain.checks)
        for i in judged:
            self._judge(i, chain.through_cluster(self.world.nodes[i], self.base[i]))
        for i in changed:
            self._score_changed(i)
        cluster = self._cluster_columns(snapshot)
        tops = self._tops()
        if tops != self.tops or cluster or self.cluster:
            self.tops = tops
            changed = everything
        self.cluster = cluster
        for i in changed | judged:
            self._total(i)

    _cluster_filtered = False

    def _judge(self, i: int, why: tuple[str, ...]) -> None:
        """Node i's reasons are `why`: keep the feasible counts and the normalising columns' ranges."""
        was, feasible = i in self.feasible, not why
        self.reasons[i] = why
        if was:
            for column in self.normalising:
                column.feasible[column.raw[i]] -= 1
        if feasible != was and i in self.fast:
            self.feasible_fast += 1 if feasible else -1
        if not feasible:
            self.feasible.discard(i)
            self.lazy.discard(i)
            return
        self.feasible.add(i)
        for column in self.normalising:
            column.feasible[column.raw[i]] += 1

    def _score_changed(self, i: int) -> None:
        """The usage columns of a node whose usage changed."""
        if i not in self.feasible:
            return
        node, usage = self.world.nodes[i], self.world.usage[i]
        for column in self.dynamic:
            if column.plugin.normalize is not None:
                column.feasible[column.raw[i]] -= 1
                column.raw[i] = column.plugin.score(column.state, node, usage)
                column.feasible[column.raw[i]] += 1
        if i not in self.fast:  # scored when it could beat the best target node (`choice`)
            self.lazy.add(i)
            self.usage_scores[i] = self.usage_bound
            return
        self._score_usage(i)

    def _cluster_columns(self, snapshot: Snapshot) -> list[_Column]:
        """The cluster plugins' columns over the feasible nodes, normalised among them."""
        if not self.cluster_plugins:
            return []
        nodes = self.world.nodes
        feasible = sorted(self.feasible)
        snapshot = snapshot.narrowed([nodes[i] for i in feasible])
        columns = []
        for plugin, weight in self.cluster_plugins:
            state = plugin.prepare(self.pod, snapshot, self.profile)
            if state is None:
                continue
            raw = [0] * len(nodes)
            for i in feasible:
                raw[i] = plugin.score(state, nodes[i], self.world.usage[i])
            values = [raw[i] for i in feasible]
            normalized = plugin.normalize(values) if plugin.normalize else values
            for i, value in zip(feasible, normalized, strict=True):
                raw[i] = value  # kept normalised: the totals add them as they are
            columns.append(_Column(plugin, state, weight, raw, Counter()))
        return columns

    def _score_usage(self, i: int) -> None:
        """The weighted usage scores of node i, exactly."""
        self.lazy.discard(i)
        node, usage = self.world.nodes[i], self.world.usage[i]
        self.usage_scores[i] = sum(c.plugin.score(c.state, node, usage) * c.weight for c in self.lazy_columns)

    def _tops(self) -> tuple[tuple[int | None, int | None], ...]:
        return tuple(c.extremes() for c in self.normalising)

    def _total(self, i: int) -> None:
        """The node's total as `cycle.rank` sums it: each plugin's normalised score times its weight."""
        totals = self.totals_fast if i in self.fast else self.totals_other
        if self.reasons[i]:
            totals[self.position[i]] = -1
            return
        total = self.usage_scores[i]
        for column, (low, high) in zip(self.normalising, self.tops, strict=True):
            assert column.plugin.normalize is not None
            total += column.plugin.normalize.scale(column.raw[i], low, high) * column.weight
        for column in self.static:
            if column.plugin.normalize is None:
                total += column.raw[i] * column.weight
        for column in self.cluster:
            total += column.raw[i] * column.weight
        totals[self.position[i]] = total

    def predicted(self) -> list[str]:
        """The feasible node(s) with the best total, by name: `cycle.rank(...).predicted`."""
        for i in list(self.lazy):
            self._score_usage(i)
            self._total(i)
        best = max(max(self.totals_fast, default=-1), max(self.totals_other, default=-1))
        if best < 0:
            return []
        nodes = self.world.nodes
        names = [nodes[i].name for i, k in zip(self.fast_nodes, self.totals_fast, strict=True) if k == best]
        names += [nodes[i].name for i, k in zip(self.others, self.totals_other, strict=True) if k == best]
        return sorted(names)

    def choice(self) -> Choice:
        """The target node the pod is predicted on, or why it is not predicted on one."""
        nodes, target = self.world.nodes, self.target
        best_fast = max(self.totals_fast, default=-1)
        if best_fast < 0:
            return Choice(None, self.why_no_fast(), self.unfit())
        fast = nodes[self.fast_nodes[self.totals_fast.index(best_fast)]]
        best_other = self._best_other(best_fast)
        if best_other < best_fast:
            top = self.others[self.totals_other.index(best_other)] if best_other >= 0 else -1
            if best_other < 0:
                against = f", the only feasible nodes are {target}"
            elif top in self.lazy:
                against = f", more than any other node can score (at most {best_other})"
            else:
                against = f" against {best_other} on {target.describe(nodes[top])}"
            return Choice(
                fast.name,
                f"kube-scheduler would place the replacement on {fast.name} ({target}): total {best_fast}{against}"
                f"{self._lead(best_fast, best_other, bounded=top in self.lazy)}",
            )
        other = nodes[self.others[self.totals_other.index(best_other)]]
        if best_other == best_fast:
            return Choice(
                None,
                f"kube-scheduler would pick one of {fast.name} ({target}) and "
                f"{target.describe(other)}: total {best_fast} each",
            )
        return Choice(
            None,
            f"kube-scheduler would place the replacement on {target.describe(other)}: total {best_other} against "
            f"{best_fast} on {fast.name} ({target}), the best {target} node",
        )

    def _lead(self, best_fast: int, best_other: int, bounded: bool) -> str:
        """The lead of the target node (over a bound: at least that), and the plugins it holds under."""
        if best_other < 0:
            return ""
        scored = [p.name for p, _ in registry.score_plugins(self.profile)]
        least = "at least " if bounded else ""
        return f"; a lead of {least}{best_fast - best_other} with every plugin evaluated scored ({', '.join(scored)})"

    def _best_other(self, best_fast: int) -> int:
        """The best total over the non-target nodes, exact wherever it could reach `best_fast`:
        the node with the highest bound is scored until the top is exact or below."""
        while True:
            best = max(self.totals_other, default=-1)
            top = self.others[self.totals_other.index(best)] if best >= 0 else -1
            if best < best_fast or top not in self.lazy:
                return best
            self._score_usage(top)
            self._total(top)

    def why_no_fast(self) -> str:
        """Why no target node fits: `unfit`, as one sentence."""
        return f"no {self.target} node fits the replacement: {'; '.join(self.unfit())}"

    def unfit(self) -> tuple[str, ...]:
        """The filter reasons of every target node, counted as the scheduler's FitError counts
        them ("1/2 net=high node(s): <reason>", sorted, as `placement.WhyNotHigh` says them);
        recomputed only when a target node's usage changed."""
        changes = self.world.fast_changes[self.target]
        if self._why is None or self._why[0] != changes:
            counts = Counter(r for i in self.fast_nodes for r in self.reasons[i])
            total = len(self.fast_nodes)
            self._why = (
                changes,
                tuple(sorted(f"{c}/{total} {self.target} node(s): {r}" for r, c in counts.items())),
            )
        return self._why[1]
