"""A node-label score table, as the NetQoS scheduler plugin scored nodes, compiled into preferred
node affinity terms that make kube-scheduler's NodeAffinity reproduce its *differences*.

Pure: a `ScoreTable` and the scheduler's weights in, `PreferredTerm`s out (or a `TableError`
naming the field that makes the table inexpressible and what would work).

The arithmetic (docs/scheduling.md, "The constant"). NodeAffinity scores a node with the sum of
the weights of the matching terms (raw), normalises it to `100 * raw // M` where M is the best
raw score among the feasible nodes, and weighs it `Wa` (2 in the default profile); the plugin's
score `s` counted `Wp * s` (Wp = 1 by default). Only differences between nodes decide, so the
terms must give `raw = K * (s + c)` for some scale K > 0 and a constant c with
`100 * K / M * Wa = Wp`, i.e. `M = K * 100 * Wa / Wp`. When the table's top class is feasible
M = K * (top + c), so c = 100 * Wa / Wp - top. The terms:

- per score level above the lowest, one term matching the classes scoring at least that level
  (`In [values]`, or `NotIn [values below]` when the unlisted class is among them: NotIn also
  matches nodes without the key), weight K x the step;
- the constant: `key Exists` plus `key DoesNotExist`, each weight K x (lowest + c); every node
  matches exactly one of the two.

Exact when `Wa` divides `Wp * (top - s)` for every score s (NodeAffinity's weighted score moves
in steps of Wa); expressible when every weight is an integer from 1 to 100, which another K
(n / d: 1/2, 1/3, ..., or 3 when Wp = 3 makes 100 x Wa / Wp a fraction) often achieves when K = 1
does not. The largest such K is used: it keeps the terms heavy beside a pod's own preferences.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from webhook.affinity import PreferredTerm, Requirement

MAX_SCORE = 100  # framework.MaxNodeScore: the plugin's scores and NodeAffinity's normalised range
MAX_TERM_WEIGHT = 100  # a PreferredSchedulingTerm's weight is 1-100 (API validation)
DEFAULT_NODE_AFFINITY_WEIGHT = 2  # the default profile (default_plugins.go)
DEFAULT_NETQOS_WEIGHT = 1  # the NetQoS plugin's weight when a profile enables it without one
_MAX_DIVISOR = 100  # K = 1/d for d up to this: beyond it every step rounds to 0


@dataclass(frozen=True)
class SchedulerWeights:
    """The Score weights the terms are compiled for: NodeAffinity's in the scheduler that binds
    the pods, and the NetQoS plugin's in the scheduler being reproduced."""

    node_affinity: int = DEFAULT_NODE_AFFINITY_WEIGHT
    netqos: int = DEFAULT_NETQOS_WEIGHT


@dataclass(frozen=True)
class ScoreTable:
    """Scores by the value of one node label: `scores` for listed values, `unlisted` for every
    other value and for nodes without the label."""

    key: str
    scores: tuple[tuple[str, int], ...]
    unlisted: int

    def score(self, labels: Mapping[str, str]) -> int:
        value = labels.get(self.key)
        return next((s for v, s in self.scores if v == value), self.unlisted)

    def to_api(self) -> dict[str, object]:
        """As the policy file writes it."""
        return {
            "key": self.key,
            "scores": [{"value": v, "score": s} for v, s in self.scores],
            "unlistedScore": self.unlisted,
        }


class TableError(ValueError):
    """A table that the weights cannot express. `field` is the policy field to change, relative
    to the rule's `nodeScore` ("scores[1].score") or the policy ("schedulerWeights.nodeAffinity")."""

    def __init__(self, field: str, value: object, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.value = value
        self.problem = problem


def compile_table(table: ScoreTable, weights: SchedulerWeights) -> tuple[PreferredTerm, ...]:
    """The preferred terms whose NodeAffinity score, weighted, differs between nodes exactly as
    the table's score times the NetQoS weight does whenever a top-scoring node is feasible."""
    wa, wp = weights.node_affinity, weights.netqos
    top, low = _top(table), _low(table)
    if top == low:
        raise TableError("scores", [s for _, s in table.scores], f"every class scores {top}: the table prefers no node")
    if wp * (top - low) > MAX_SCORE * wa:
        need = -(-wp * (top - low) // MAX_SCORE)
        raise TableError(
            "schedulerWeights.nodeAffinity",
            wa,
            f"NodeAffinity at weight {wa} moves a node at most {MAX_SCORE * wa} points, the table at netqos weight "
            f"{wp} needs {wp * (top - low)} (top {top} - lowest {low}); set it to at least {need} or lower netqos",
        )
    for field, score in _scored_fields(table):
        if (wp * (top - score)) % wa:
            raise TableError(
                field,
                score,
                f"NodeAffinity's weighted score moves in steps of its weight {wa}, so (top score {top} - score) x "
                f"netqos weight {wp} must be a multiple of {wa}; {_near(score, top, wa, wp)} would be exact",
            )
    # The constant every node gets at scale K = n / d: K x (low + 100 Wa / Wp - top), whole.
    numerator = wp * (low - top) + MAX_SCORE * wa  # the constant at K = 1, times wp
    n, d = _best_scale(numerator, wa, wp, [step for _, step in _steps(table)])
    return _terms(table, n, d) + _constant(table.key, n * numerator // (wp * d))


def _best_scale(numerator: int, wa: int, wp: int, steps: list[int]) -> tuple[int, int]:
    """The largest scale n / d (n up to wp, d up to 100) at which the constant and every step are
    whole and fit a term; the largest keeps the terms heavy beside a pod's own preferences.

    K = b / a always fits, with Wa = a x g and Wp = b x g (g their gcd): exactness makes every
    step a multiple of a, so the steps b x step / a are whole and sum to at most 100 (the spread
    check), and the constant is 100 - (top - low) x b / a, from 0 to 100. So the constant a table
    needs never exceeds what the terms carry once the spread and exactness checks pass.
    """
    g = math.gcd(wa, wp)
    best = (wp // g, wa // g)
    for n in range(1, wp + 1):
        for d in range(1, _MAX_DIVISOR + 1):
            if n * best[1] <= best[0] * d:
                break  # no larger than the best from here on
            if (n * numerator) % (wp * d) or any((n * step) % d or n * step // d > MAX_TERM_WEIGHT for step in steps):
                continue
            if n * numerator // (wp * d) <= MAX_TERM_WEIGHT:
                best = (n, d)
                break
    return best


def classic_terms(table: ScoreTable) -> tuple[PreferredTerm, ...]:
    """The table without the constant (K = 1): raw scores equal to the table minus its lowest
    score. Exact only when NodeAffinity and NetQoS weigh alike; the webhook's earlier default."""
    return _terms(table, 1, 1)


def scaled_terms(table: ScoreTable, weights: SchedulerWeights, own_max: int) -> tuple[PreferredTerm, ...]:
    """The table without the constant, scaled for a pod whose own preferred terms give a node at
    most `own_max` raw points (docs/scheduling.md, "The pod's own node affinity").

    The NetQoS scheduler normalised the pod's own terms by their best feasible node, `own_max`
    when that node matches them all, and added the plugin's score: `Wa x 100 x own / own_max +
    Wp x s`. NodeAffinity normalises the pod's terms and ours together, so the two are in the
    plugin's proportion when ours give `K x s` with `K = own_max x Wp / (100 x Wa)`: the stock
    scheduler's affinity is then the plugin's sum times `own_max / M` (M the best joint raw score,
    from own_max to own_max + K x top), the same ranking at a smaller margin. Each step's weight
    is rounded to the nearest whole number (half up); a step that rounds to 0 is left out, but the
    heaviest weighs at least 1, so the table always goes in. A weight above 100 is carried by
    several terms of distinct weights (100, 99, ...: distinct, so that each is its own identity),
    at most `MAX_SPLIT` of them; beyond that the scale stops growing.
    """
    steps = list(reversed(_steps(table)))
    wa, wp = weights.node_affinity, weights.netqos
    # K as a fraction num / den, capped so that the heaviest step fits MAX_SPLIT terms.
    num, den = own_max * wp, MAX_SCORE * wa
    heaviest = max(step for _, step in steps)
    if num * heaviest > SPLIT_CAPACITY * den:
        num, den = SPLIT_CAPACITY, heaviest
    terms: list[PreferredTerm] = []
    for shape, (_, step) in zip(_terms(table, 1, 1), steps, strict=True):
        weight = (2 * num * step + den) // (2 * den)
        if step == heaviest:
            weight = max(weight, 1)  # the table always goes in, however light the pod's terms
        terms += [PreferredTerm(part, shape.term) for part in split_weight(weight) if part]
    return tuple(terms)


MAX_SPLIT = 10  # terms per step at most: a review stays small whatever the pod's own weights
SPLIT_CAPACITY = sum(range(MAX_TERM_WEIGHT - MAX_SPLIT + 1, MAX_TERM_WEIGHT + 1))  # 100 + 99 + ... + 91


def split_weight(weight: int) -> list[int]:
    """`weight` as distinct term weights of at most 100 each: 100, 99, ... and the remainder,
    which is then smaller than every part before it (250: 100, 99, 51)."""
    parts: list[int] = []
    part = MAX_TERM_WEIGHT
    while weight > part:
        parts.append(part)
        weight -= part
        part -= 1
    return [*parts, weight]


def _terms(table: ScoreTable, n: int, d: int) -> tuple[PreferredTerm, ...]:
    """One term per score level above the lowest, highest first, weight step x n / d."""
    terms = []
    for level, step in reversed(_steps(table)):
        below = [v for v, s in table.scores if s < level]
        if table.unlisted >= level:
            req = Requirement(table.key, "NotIn", tuple(below))
        else:
            req = Requirement(table.key, "In", tuple(v for v, s in table.scores if s >= level))
        terms.append(PreferredTerm.of(step * n // d, req))
    return tuple(terms)


def _constant(key: str, weight: int) -> tuple[PreferredTerm, ...]:
    if weight == 0:
        return ()
    return (
        PreferredTerm.of(weight, Requirement(key, "Exists")),
        PreferredTerm.of(weight, Requirement(key, "DoesNotExist")),
    )


def _steps(table: ScoreTable) -> list[tuple[int, int]]:
    """(level, step from the level below) for each distinct score above the lowest, ascending."""
    levels = sorted({s for _, s in table.scores} | {table.unlisted})
    return [(b, b - a) for a, b in zip(levels, levels[1:], strict=False)]


def _top(table: ScoreTable) -> int:
    return max(table.unlisted, *(s for _, s in table.scores))


def _low(table: ScoreTable) -> int:
    return min(table.unlisted, *(s for _, s in table.scores))


def _scored_fields(table: ScoreTable) -> list[tuple[str, int]]:
    return [(f"scores[{i}].score", s) for i, (_, s) in enumerate(table.scores)] + [("unlistedScore", table.unlisted)]


def _near(score: int, top: int, wa: int, wp: int) -> str:
    """The nearest scores to `score` that are exact at these weights."""
    exact = [s for s in range(0, MAX_SCORE + 1) if (wp * (top - s)) % wa == 0 and s <= top]
    below = [s for s in exact if s < score]
    above = [s for s in exact if s > score]
    near = ([below[-1]] if below else []) + ([above[0]] if above else [])
    return " or ".join(map(str, near)) if near else "no score"
