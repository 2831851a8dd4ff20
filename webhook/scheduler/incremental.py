"""What-if placement: kube-scheduler's prediction for pod after pod over one set of nodes whose
usage changes as pods are moved (`World.move`), without ranking every node again for every pod.
Iterates the same plugin tables as `cycle.rank`, and predicts what it predicts: `tests/unit/
test_rebalance` and `tests/unit/test_scheduler_table` check it against `cycle.rank`.

The nodes are split into those of a `Target` (the fast nodes) and the others; `Predictor.choice`
says whether the pod's best node is a target node, and by how much.

Per node a `Predictor` keeps the filter reasons and each Score plugin's raw score: those of the
plugins that read the node alone (`plugins.Reads.NODE`) are computed once per node and shared by
every predictor whose pod has the plugin's key; those that read the node's usage are computed
again when the node's usage changes (`sync`, from the world's log). A plugin that normalises
does so by the best raw score over the feasible nodes: when that changes, every total is
recomputed. Non-target nodes' usage scores are computed lazily: until needed their totals hold
an upper bound (each usage plugin's best score, 100, times its weight).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from webhook.names import MAX_NODE_SCORE
from webhook.scheduler import cycle, keys, plugins
from webhook.scheduler.model import EMPTY_USAGE, Node, PodInfo, Profile, Target, UsageTally
from webhook.scheduler.plugins import Reads, ScorePlugin

T = TypeVar("T")
PREDICTORS = 64  # pod specs whose per-node scores are kept at once (each holds a list per node)
STATIC_LISTS = 256  # per-node lists that do not depend on usage, shared between predictors


class World:
    """Nodes (in name order) and what the pods on them take, changed one pod at a time (`move`);
    a log of the nodes whose usage changed keeps every `Predictor` in step."""

    def __init__(self, nodes: Sequence[Node], tallies: Mapping[str, UsageTally], profile: Profile, target: Target):
        self.nodes = sorted(nodes, key=lambda n: n.name)
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        self.target = target
        self.fast = [i for i, n in enumerate(self.nodes) if target.matches(n.labels)]
        self.tallies = [tallies[n.name] for n in self.nodes]
        self.usage = [t.usage() for t in self.tallies]
        self.log: list[int] = []  # indices of the nodes whose usage changed, in order
        self.fast_changes = 0
        self.profile = profile
        self._predictors: OrderedDict[Hashable, Predictor] = OrderedDict()
        self._static: OrderedDict[Hashable, Any] = OrderedDict()

    def move(self, i: int, pod: PodInfo, remove: bool) -> None:
        """`pod` leaves node i (`remove`) or is placed on it."""
        if remove:
            self.tallies[i].remove(pod)
        else:
            self.tallies[i].add(pod)
        self.usage[i] = self.tallies[i].usage()
        self.log.append(i)
        if self.target.matches(self.nodes[i].labels):
            self.fast_changes += 1

    def predictor(self, pod: PodInfo) -> Predictor:
        """The predictor for `pod`'s spec, up to date with every move (pods of one
        `keys.scheduling_key` share it)."""
        key = keys.scheduling_key(pod, self.profile)
        predictor = self._predictors.get(key)
        if predictor is None:
            predictor = self._predictors[key] = Predictor(pod, self)
            if len(self._predictors) > PREDICTORS:
                self._predictors.popitem(last=False)
        else:
            self._predictors.move_to_end(key)
        predictor.sync()
        return predictor

    # What does not depend on the pods on the nodes, per node, shared by every Predictor whose pod
    # reads the same fields (all of them read the policy's terms, most the same tolerations).

    def node_only(self, pod: PodInfo) -> list[tuple[str, ...]]:
        """PreFilter, then the Filter plugins that read the pod and the node alone."""
        key = ("node-only", keys.node_filter_key(pod, self.profile))
        return self.shared(key, lambda: cycle.node_only_filter(pod, self.nodes, self.profile)[1])

    def static_scores(self, plugin: ScorePlugin, pod: PodInfo, state: Any) -> list[int]:
        """The raw scores of a plugin that reads the node alone, per node."""
        key = ("score", plugin, plugin.key(pod, self.profile))
        return self.shared(key, lambda: [plugin.score(state, n, EMPTY_USAGE) for n in self.nodes])

    def shared(self, key: Hashable, compute: Callable[[], list[T]]) -> list[T]:
        found = self._static.get(key)
        if found is None:
            found = self._static[key] = compute()
            if len(self._static) > STATIC_LISTS:
                self._static.popitem(last=False)
        else:
            self._static.move_to_end(key)
        return found


@dataclass(frozen=True)
class Choice:
    target: str | None
    reason: str


@dataclass
class _Column:
    """One Score plugin of the profile for one pod: its state, weight and raw scores per node."""

    plugin: ScorePlugin
    state: Any
    weight: int
    raw: list[int]
    feasible: Counter[int]  # for a plugin that normalises: raw score -> feasible nodes with it
    top: int = 0


class Predictor:
    """kube-scheduler's prediction for one pod spec over the world's nodes, kept up to date as
    their usage changes: `cycle.rank`'s result (the feasible nodes, each plugin's score
    normalised and weighted, the best total) without ranking every node again for every pod.
    The totals of the target nodes and of the others are kept apart, so the best of each is one
    `max` over a list."""

    def __init__(self, pod: PodInfo, world: World) -> None:
        self.pod = pod
        self.world = world
        profile = world.profile
        nodes = world.nodes
        self.node_only = world.node_only(pod)
        self.static: list[_Column] = []
        self.dynamic: list[_Column] = []
        for plugin, weight in plugins.score_plugins(profile):
            state = plugin.prepare(pod, nodes, profile)
            if state is None:
                continue  # PreScore skips it for this pod
            if plugin.reads is Reads.NODE:
                self.static.append(_Column(plugin, state, weight, world.static_scores(plugin, pod, state), Counter()))
            else:
                self.dynamic.append(_Column(plugin, state, weight, [0] * len(nodes), Counter()))
        self.normalising = [c for c in (*self.static, *self.dynamic) if c.plugin.normalize is not None]
        # Usage scores of non-target nodes are bounded until needed; normalising ones are exact.
        self.lazy_columns = [c for c in self.dynamic if c.plugin.normalize is None]
        self.usage_bound = MAX_NODE_SCORE * sum(c.weight for c in self.lazy_columns)
        self.reasons: list[tuple[str, ...]] = [()] * len(nodes)
        self.usage_scores = [0] * len(nodes)  # the weighted sum of the lazy columns
        self.fast = set(world.fast)
        self.position = {i: k for k, i in enumerate(world.fast)}
        others = [i for i in range(len(nodes)) if i not in self.fast]
        self.position.update({i: k for k, i in enumerate(others)})
        self.others = others
        self.totals_fast = [-1] * len(world.fast)  # -1: infeasible
        self.totals_other = [-1] * len(others)
        self.feasible_fast = 0
        self.feasible: set[int] = set()
        self.lazy: set[int] = set()  # feasible non-target nodes whose totals hold the bound
        for i in range(len(nodes)):
            self._evaluate(i)
        self.tops = self._tops()
        for i in range(len(nodes)):
            self._total(i)
        self.seen = len(world.log)
        self._why: tuple[int, str] | None = None

    def sync(self) -> None:
        """Evaluate again every node whose usage changed since the last call."""
        log = self.world.log
        if self.seen == len(log):
            return
        changed = set(log[self.seen :])
        self.seen = len(log)
        for i in changed:
            self._evaluate(i)
        tops = self._tops()
        if tops != self.tops:
            self.tops = tops
            changed = set(range(len(self.world.nodes)))
        for i in changed:
            self._total(i)

    def _evaluate(self, i: int) -> None:
        node, usage = self.world.nodes[i], self.world.usage[i]
        was = i in self.feasible
        if was:
            for column in self.normalising:
                column.feasible[column.raw[i]] -= 1
        # cycle.filter_reasons, in two halves: the node-only verdict is shared (`World.node_only`)
        reasons = self.node_only[i] or cycle.usage_reasons(self.pod, node, usage, self.world.profile)
        self.reasons[i] = reasons
        feasible = not reasons
        if feasible != was and i in self.fast:
            self.feasible_fast += 1 if feasible else -1
        if not feasible:
            self.feasible.discard(i)
            self.lazy.discard(i)
            return
        self.feasible.add(i)
        for column in self.dynamic:
            if column.plugin.normalize is not None:
                column.raw[i] = column.plugin.score(column.state, node, usage)
        for column in self.normalising:
            column.feasible[column.raw[i]] += 1
        if i not in self.fast:  # scored when it could beat the best target node (`choice`)
            self.lazy.add(i)
            self.usage_scores[i] = self.usage_bound
            return
        self._score_usage(i)

    def _score_usage(self, i: int) -> None:
        """The weighted usage scores of node i, exactly."""
        self.lazy.discard(i)
        node, usage = self.world.nodes[i], self.world.usage[i]
        self.usage_scores[i] = sum(c.plugin.score(c.state, node, usage) * c.weight for c in self.lazy_columns)

    def _tops(self) -> tuple[int, ...]:
        return tuple(max((raw for raw, n in c.feasible.items() if n > 0), default=0) for c in self.normalising)

    def _total(self, i: int) -> None:
        """The node's total as `cycle.rank` sums it: each plugin's normalised score times its weight."""
        totals = self.totals_fast if i in self.fast else self.totals_other
        if self.reasons[i]:
            totals[self.position[i]] = -1
            return
        total = self.usage_scores[i]
        for column, top in zip(self.normalising, self.tops, strict=True):
            assert column.plugin.normalize is not None
            total += column.plugin.normalize.one(column.raw[i], top) * column.weight
        for column in self.static:
            if column.plugin.normalize is None:
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
        names = [nodes[i].name for i, k in zip(self.world.fast, self.totals_fast, strict=True) if k == best]
        names += [nodes[i].name for i, k in zip(self.others, self.totals_other, strict=True) if k == best]
        return sorted(names)

    def choice(self) -> Choice:
        """The target node the pod is predicted on, or why it is not predicted on one."""
        nodes, target = self.world.nodes, self.world.target
        best_fast = max(self.totals_fast, default=-1)
        if best_fast < 0:
            return Choice(None, self.why_no_fast())
        fast = nodes[self.world.fast[self.totals_fast.index(best_fast)]]
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
                f"kube-scheduler would place the replacement on {fast.name} ({target}): total {best_fast}{against}",
            )
        other = nodes[self.others[self.totals_other.index(best_other)]]
        if best_other == best_fast:
            return Choice(
                None,
                f"kube-scheduler would pick at random between {fast.name} ({target}) and "
                f"{target.describe(other)}: total {best_fast} each",
            )
        return Choice(
            None,
            f"kube-scheduler would place the replacement on {target.describe(other)}: total {best_other} against "
            f"{best_fast} on {fast.name} ({target}), the best {target} node",
        )

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
        """The filter reasons of every target node, counted as the scheduler's FitError counts
        them; recomputed only when a target node's usage changed."""
        world = self.world
        if self._why is None or self._why[0] != world.fast_changes:
            counts = Counter(r for i in world.fast for r in self.reasons[i])
            total = len(world.fast)
            text = "; ".join(sorted(f"{c}/{total} {world.target} node(s): {r}" for r, c in counts.items()))
            self._why = (world.fast_changes, f"no {world.target} node fits the replacement: {text}")
        return self._why[1]
