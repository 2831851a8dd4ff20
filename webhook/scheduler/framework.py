"""The framework the plugins plug into: what a Filter and a Score plugin are (`FilterPlugin`,
`ScorePlugin`), what their verdicts read (`Reads`), NormalizeScore (`Normalize`,
helper.DefaultNormalizeScore) and Go's integer arithmetic, which the plugins' scores follow.

Sources (kubernetes/kubernetes v1.36): pkg/scheduler/framework/interface.go (FilterPlugin,
PreFilterPlugin, ScorePlugin, ScoreExtensions), pkg/scheduler/framework/plugins/helper/
normalize_score.go (DefaultNormalizeScore).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.names import MAX_NODE_SCORE
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Profile, Snapshot


class Reads(enum.Enum):
    """What a plugin's verdict on a node depends on besides the pod."""

    NODE = "the node"  # its labels, taints, images, allocatable
    USAGE = "the node and what the pods on it take"  # NodeUsage: requests, pods, host ports
    CLUSTER = "every node and the pods on them"  # the Snapshot: other pods' labels and terms


FilterFunction = Callable[[PodInfo, Node, NodeUsage, Profile], tuple[str, ...]]
# PreFilter over the whole snapshot, then the Filter of one node; None when PreFilter skips the pod
PreFilterFunction = Callable[[PodInfo, Snapshot, Profile], Callable[[Node], tuple[str, ...]] | None]
# A PreFilter's PreFilterResult.NodeNames: the only nodes the cycle filters (None: every node)
NodeNamesFunction = Callable[[PodInfo], frozenset[str] | None]


def not_in_prefilter(plugins: Sequence[str]) -> str:
    """The reason of a node the PreFilters of `plugins` left out (schedule_one.go
    findNodesThatFitPod, SetAbsentNodesStatus: the plugins' names sorted, as Go prints a slice)."""
    return f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(plugins))}]"


def no_node_in_prefilter(plugins: Sequence[str]) -> str:
    """The PreFilter failure when the node names of `plugins` have no node in common
    (framework/runtime/framework.go RunPreFilterPlugins)."""
    if len(plugins) == 1:
        return f"node(s) didn't satisfy plugin {plugins[0]}"
    return f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(plugins))}] simultaneously"


def no_filter(pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile) -> tuple[str, ...]:
    """The Filter of a plugin whose PreFilter does its work (`FilterPlugin.prefilter`)."""
    return ()


@dataclass(frozen=True)
class FilterPlugin:
    """One Filter plugin: `filter` gives a node's reasons, () when it passes; a plugin that
    reads the whole cluster has a `prefilter` instead, which returns that function for one
    cycle. `key` is what of the pod its verdict depends on (pods with one key are filtered
    alike), `labels` whether other pods' selectors read the pod's own labels too.

    `node_names` is a PreFilter that narrows the nodes the cycle filters (PreFilterResult); an
    empty set is the plugin rejecting the pod with `conflict`. `variant` names an entry that is
    a release's version of plugin `name` (a profile picks it through `Profile.variants`)."""

    name: str
    filter: FilterFunction
    reads: Reads
    key: Callable[[PodInfo], Hashable]
    prefilter: PreFilterFunction | None = None
    labels: bool = False
    node_names: NodeNamesFunction | None = None
    conflict: str = ""
    variant: str = ""
    # a plugin that filters with the last ones whose PreFilter reads the pod alone and whose Filter
    # reads the node alone: judged without the snapshot, as `status` judges (`late_node_filters`)
    snapshot_free: bool = False

    @property
    def entry(self) -> str:
        """The entry's name in the table: the variant's, else the plugin's."""
        return self.variant or self.name


@dataclass(frozen=True)
class Normalize:
    """A NormalizeScore: `scale` gives one node's score from its raw score and the lowest and
    highest raw scores over the nodes normalised (None when there are none); with
    `ignore_negative`, a negative raw score marks a node the plugin ignores (it is left out of
    the range)."""

    scale: Callable[[int, int | None, int | None], int]
    ignore_negative: bool = False

    def extremes(self, values: Iterable[int]) -> tuple[int | None, int | None]:
        kept = [v for v in values if v >= 0] if self.ignore_negative else list(values)
        return (min(kept), max(kept)) if kept else (None, None)

    def __call__(self, raw: Sequence[int]) -> list[int]:
        low, high = self.extremes(raw)
        return [self.scale(r, low, high) for r in raw]


@dataclass(frozen=True)
class ScorePlugin:
    """One Score plugin: `prepare` is its PreScore (the state its scores share for one pod over
    the snapshot; None when PreScore skips the pod), `score` the raw score of a node given that
    state, `normalize` its NormalizeScore (None: already 0-100), `key` what of the pod and the
    profile its state depends on (pods with one key score alike), `labels` whether other pods'
    selectors read the pod's own labels too."""

    name: str
    prepare: Callable[[PodInfo, Snapshot, Profile], Any]
    score: Callable[[Any, Node, NodeUsage], int]
    normalize: Normalize | None
    reads: Reads
    key: Callable[[PodInfo, Profile], Hashable]
    labels: bool = False


def default_normalize(scores: Sequence[int], reverse: bool = False) -> list[int]:
    """helper.DefaultNormalizeScore(MaxNodeScore, reverse) over non-negative scores."""
    top = max(scores, default=0)
    return [normalized(score, top, reverse) for score in scores]


def normalized(score: int, top: int, reverse: bool = False) -> int:
    """One score of `default_normalize`, given the best raw score `top` of the nodes normalised."""
    if top == 0:
        return MAX_NODE_SCORE if reverse else 0
    value = MAX_NODE_SCORE * score // top
    return MAX_NODE_SCORE - value if reverse else value


def normalize(raw_scores: Sequence[int]) -> list[int]:
    """NodeAffinity's normalisation: DefaultNormalizeScore(MaxNodeScore, reverse=false)."""
    return default_normalize(raw_scores)


# helper.DefaultNormalizeScore: the best feasible node has 100 (reversed: a node scoring 0 has 100)
DEFAULT_NORMALIZE = Normalize(lambda raw, low, high: normalized(raw, high or 0))
DEFAULT_NORMALIZE_REVERSE = Normalize(lambda raw, low, high: normalized(raw, high or 0, reverse=True))


def go_div(a: int, b: int) -> int:
    """Go's integer division, which truncates toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def go_round(x: float) -> int:
    """math.Round: half away from zero."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)
