"""Node-selector semantics: match, score, equality.

Shared by the mutation path (policy) and by `explain`, so the score we print is computed by the
code that decides what we inject. Plain data in, plain data out; no I/O.

Semantics follow k8s.io/component-helpers/scheduling/corev1/nodeaffinity:
- In / NotIn / Exists / DoesNotExist compare node labels; NotIn and DoesNotExist match a node
  that lacks the key.
- Gt / Lt parse the node's label value and the single requirement value as base-10 int64 (Go's
  strconv.ParseInt: optional sign, digits only); a missing or non-integer label does not match.
- A requirement labels.NewRequirement refuses (In/NotIn without values, Exists/DoesNotExist with
  values, Gt/Lt without exactly one integer, an unknown operator, a key that is not a qualified
  name, a value that is not a label value: `webhook.validation`) does not parse. The scheduler
  treats such a term differently by where it is: a required term matches no node; one bad
  preferred term makes NodeAffinity's PreScore fail for the whole scheduling cycle
  (`PreferredTerm.valid` says which; `webhook.scheduler.cycle` predicts the outcome).
- matchFields compare node fields; the only one is `metadata.name` (operators In/NotIn with exactly
  one value). A node without a name has no fields, and then matchFields are not checked.
- The requirements of one term are ANDed; a term with neither expressions nor fields matches
  nothing. The terms of a required NodeSelector are ORed.
- A preferred term contributes its weight when it matches; NodeAffinity's raw score is the sum.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

from webhook.apidata import expect, show
from webhook.validation import is_qualified_name, is_valid_label_value, parse_int64

NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
FIELD_SELECTOR_OPERATORS = ("In", "NotIn")
NODE_NAME_FIELD = "metadata.name"
T = TypeVar("T")

Canonical = tuple[str, str, tuple[str, ...]]
TermIdentity = tuple[int, frozenset[Canonical], frozenset[Canonical]]


@dataclass(frozen=True)
class Requirement:
    """One NodeSelectorRequirement (`{key, operator, values}`)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def problem(self) -> str | None:
        """Why labels.NewRequirement would refuse this requirement (as the scheduler builds it in
        nodeSelectorRequirementsAsSelector), or None if it is valid. The message starts with the
        field at fault: `operator`, `key` or `values`."""
        if self.operator not in NODE_SELECTOR_OPERATORS:
            return f"operator {show(self.operator)} is unknown; use one of {', '.join(NODE_SELECTOR_OPERATORS)}"
        key_errors = is_qualified_name(self.key)
        if key_errors:
            return f"key {show(self.key)} is not a valid label key: {'; '.join(key_errors)}"
        problem = self.values_problem()
        if problem:
            return f"values {show(list(self.values))} {problem}"
        for i, value in enumerate(self.values):
            errors = is_valid_label_value(value)
            if errors:
                return f"values[{i}] {show(value)} is not a valid label value: {'; '.join(errors)}"
        return None

    def values_problem(self) -> str | None:
        """Why the values do not suit the operator: labels.NewRequirement checks the count per
        operator and strconv.ParseInt for Gt/Lt; it also checks that every value is a label value
        (problem() reports which one), so a Gt/Lt value carries no sign: "-1" parses as an integer
        but is not a label value."""
        op, n = self.operator, len(self.values)
        if op in ("In", "NotIn") and n == 0:
            return f"must not be empty for operator {op}"
        if op in ("Exists", "DoesNotExist") and n:
            return f"must be empty for operator {op}"
        if op in ("Gt", "Lt") and (
            n != 1 or parse_int64(self.values[0]) is None or is_valid_label_value(self.values[0])
        ):
            return (
                f"must be exactly one integer for operator {op}: ASCII digits within 64 bits, without a sign "
                "(the scheduler reads it with strconv.ParseInt and also requires a label value, which cannot "
                "start with '-' or '+')"
            )
        return None

    @cached_property
    def valid(self) -> bool:
        """problem() is None; computed once, as the scheduler parses a term once."""
        return self.problem() is None

    def matches(self, labels: Mapping[str, str]) -> bool:
        if not self.valid:
            return False
        present = self.key in labels
        op = self.operator
        if op == "In":
            return present and labels[self.key] in self.values
        if op == "NotIn":
            return not present or labels[self.key] not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        # Gt / Lt
        have = parse_int64(labels[self.key]) if present else None
        if have is None:
            return False
        want = parse_int64(self.values[0])
        if want is None:  # unreachable: problem() checked it; kept for the type checker
            return False
        return have > want if op == "Gt" else have < want

    def canonical(self) -> Canonical:
        """Order-insensitive identity: `In [a, b]` and `In [b, a]` are the same requirement."""
        return (self.key, self.operator, tuple(sorted(set(self.values))))

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        return out


def requirement_from_api(raw: Any, path: str) -> Requirement:
    """A NodeSelectorRequirement (`{key, operator, values}`) from API data, shape-checked."""
    expect(raw, dict, path, "an object")
    key = expect(raw.get("key"), str, f"{path}.key", "a string")
    operator = expect(raw.get("operator"), str, f"{path}.operator", "a string")
    values = raw.get("values")
    if values is None:
        values = []
    expect(values, list, f"{path}.values", "a list of strings")
    for i, v in enumerate(values):
        expect(v, str, f"{path}.values[{i}]", "a string")
    return Requirement(key, operator, tuple(values))


def requirements_from_api(raw: Any, path: str) -> tuple[Requirement, ...]:
    if raw is None:
        return ()
    expect(raw, list, path, "a list")
    return tuple(requirement_from_api(r, f"{path}[{i}]") for i, r in enumerate(raw))


def field_problem(req: Requirement) -> str | None:
    """Why a matchFields requirement would not parse (nodeSelectorRequirementsAsFieldSelector)."""
    if req.operator not in FIELD_SELECTOR_OPERATORS:
        return f"matchFields operator {req.operator!r} is not supported; use In or NotIn"
    if len(req.values) != 1:
        return f"matchFields operator {req.operator} needs exactly one value"
    return None


def _field_matches(req: Requirement, fields: Mapping[str, str]) -> bool:
    # A fields.Set answers "" for a field it does not have, as Go's selector does.
    have = fields.get(req.key, "")
    return have == req.values[0] if req.operator == "In" else have != req.values[0]


@dataclass(frozen=True)
class NodeSelectorTerm:
    """One NodeSelectorTerm: `matchExpressions` on node labels AND `matchFields` on node fields."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    def is_empty(self) -> bool:
        return not self.expressions and not self.fields

    def problems(self) -> tuple[str, ...]:
        """Why the scheduler cannot parse this term (newNodeSelectorTerm), each message led by the
        requirement's path inside the term; () when it parses."""
        found = [f"matchExpressions[{i}]: {p}" for i, p in enumerate(r.problem() for r in self.expressions) if p]
        found += [f"matchFields[{i}]: {p}" for i, p in enumerate(field_problem(f) for f in self.fields) if p]
        return tuple(found)

    @cached_property
    def valid(self) -> bool:
        """Not empty and every requirement parses: a term the scheduler can match at all."""
        return not self.is_empty() and not self.problems()

    def matches(self, labels: Mapping[str, str], name: str = "") -> bool:
        if not self.valid:
            return False
        if not all(r.matches(labels) for r in self.expressions):
            return False
        # extractNodeFields: a node with an empty name has no fields, and the scheduler then
        # skips matchFields entirely (`len(nodeFields) > 0`).
        node_fields = {NODE_NAME_FIELD: name} if name else {}
        if self.fields and node_fields:
            return all(_field_matches(f, node_fields) for f in self.fields)
        return True


def node_selector_matches(terms: Sequence[NodeSelectorTerm], labels: Mapping[str, str], name: str = "") -> bool:
    """A required NodeSelector: its terms ORed; empty terms are skipped; no terms match nothing."""
    return any(t.matches(labels, name) for t in terms if not t.is_empty())


def preferred_terms_problem(terms: Sequence[PreferredTerm], path: str) -> str | None:
    """Why NewPreferredSchedulingTerms refuses `terms`, naming the first term at fault (`path[i]`),
    or None. Terms of weight 0 and empty terms are skipped before parsing, as there; one term
    that does not parse refuses the whole list, so NodeAffinity's PreScore fails for the pod."""
    for i, term in enumerate(terms):
        if not term.weight or term.term.is_empty():
            continue
        problems = term.term.problems()
        if problems:
            return f"{path}[{i}].preference.{problems[0]}"
    return None


def required_term_problems(terms: Sequence[NodeSelectorTerm], path: str) -> tuple[str, ...]:
    """Each required term the scheduler cannot parse (NewLazyErrorNodeSelector keeps the others:
    a bad term matches no node, and the pod still fits a node another term matches)."""
    return tuple(
        f"{path}[{i}].{term.problems()[0]}" for i, term in enumerate(terms) if not term.is_empty() and term.problems()
    )


def preferred_score(terms: Iterable[PreferredTerm], labels: Mapping[str, str], name: str = "") -> int:
    """NodeAffinity's Score for one node: the sum of the weights of the matching terms.

    Terms of weight 0 and empty terms are skipped (NewPreferredSchedulingTerms).
    """
    return sum(t.weight for t in terms if t.weight and t.matches(labels, name))


# Terms that share a key, above this many, are summed instead of searched (an upper bound):
# the exact search tries up to 2^n combinations and a review must stay cheap for any pod.
_EXACT_TERMS = 12
# Beyond this many terms, not even grouped: their sum (no real pod prefers 1,000 things).
GROUPED_TERMS = 1000


# What a node field constrains, as a key no label key can be (a label key has no NUL).
FIELD_DIMENSION = "\0fields"


def most_matched_weight(terms: Sequence[PreferredTerm]) -> int:
    """The largest NodeAffinity raw score the terms can give one node: the most weight that terms
    matching together can sum to, whatever the node's labels and name (`matched_weight`)."""
    scored = [(t.weight, term_dimensions(t.keys(), bool(t.term.fields)), t) for t in terms if t.weight > 0]
    return matched_weight([w for w in scored if w[1]], lambda t: t)


def term_dimensions(keys: frozenset[str], has_fields: bool) -> frozenset[str]:
    """What a term constrains: its label keys, and FIELD_DIMENSION when it has matchFields."""
    return keys | {FIELD_DIMENSION} if has_fields else keys


def matched_weight(terms: Sequence[tuple[int, frozenset[str], T]], parse: Callable[[T], PreferredTerm]) -> int:
    """`most_matched_weight` of terms given as (weight > 0, `term_dimensions`, what `parse` makes
    the term of).

    Terms that share no key never exclude each other, so each group of terms linked by shared
    keys counts on its own: a lone term its weight, a group the best set of its terms whose
    requirements one node satisfies together (`zone In [a]` and `zone In [b]` never do). A group
    of more than `_EXACT_TERMS` terms counts all its weight, an upper bound, and only searched
    groups are parsed; more than `GROUPED_TERMS` terms count all their weight, so that a review
    of the largest pod stays one pass. A requirement that does not
    parse constrains nothing here (the scheduler then scores no node for the pod at all).
    """
    if len(terms) > GROUPED_TERMS:
        return sum(weight for weight, _, _ in terms)
    total = 0
    for group in _linked_groups([dims for _, dims, _ in terms]):
        if len(group) == 1 or len(group) > _EXACT_TERMS:
            total += sum(terms[i][0] for i in group)
        else:
            total += _group_best([parse(terms[i][2]) for i in group])
    return total


def _linked_groups(dimensions: Sequence[frozenset[str]]) -> list[list[int]]:
    """The indexes of the terms in groups, two in one group when a chain of shared keys links them.
    Keys are joined (union-find) only by terms on several keys; a term on one key, the usual
    kind, is one dictionary look-up."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while (up := parent.get(key, key)) != key:
            parent[key] = parent.get(up, up)
            key = up
        return key

    for dims in dimensions:
        if len(dims) > 1:
            keys = iter(dims)
            first = root(next(keys))
            for key in keys:
                other = root(key)
                if other != first:
                    parent[other] = first
    groups: dict[str, list[int]] = {}
    for i, dims in enumerate(dimensions):
        key = next(iter(dims))
        groups.setdefault(root(key) if parent else key, []).append(i)
    return list(groups.values())


def _group_best(group: list[PreferredTerm]) -> int:
    ordered = sorted(group, key=lambda t: -t.weight)
    rest = [sum(t.weight for t in ordered[i:]) for i in range(len(ordered) + 1)]
    best = 0

    def search(i: int, chosen: list[PreferredTerm], weight: int) -> None:
        nonlocal best
        if weight + rest[i] <= best:
            return  # even every remaining term would not beat the best found
        if i == len(ordered):
            best = weight
            return
        with_term = [*chosen, ordered[i]]
        if _together(with_term):
            search(i + 1, with_term, weight + ordered[i].weight)
        search(i + 1, chosen, weight)

    search(0, [], 0)
    return best


def _together(terms: Sequence[PreferredTerm]) -> bool:
    """Some node matches every one of `terms`: per key, some value (or none) satisfies every
    requirement on it. Keys are independent, so each is tried on its own."""
    by_dim: dict[tuple[bool, str], list[Requirement]] = {}
    for term in terms:
        for req in term.term.expressions:
            if req.valid:
                by_dim.setdefault((False, req.key), []).append(req)
        for req in term.term.fields:
            if field_problem(req) is None:
                by_dim.setdefault((True, req.key), []).append(req)
    return all(_satisfiable(is_field, key, reqs) for (is_field, key), reqs in by_dim.items())


def _satisfiable(is_field: bool, key: str, reqs: Sequence[Requirement]) -> bool:
    """Some value of `key` satisfies all of `reqs`. The values that can differ in outcome: no
    value (a label only: a node always has a name), each value the requirements name, one they
    do not name, and integers just inside and outside every Gt/Lt bound."""
    named = {v for r in reqs for v in r.values}
    candidates: list[str | None] = [None] if not is_field else []
    candidates += sorted(named)
    candidates.append(next(f"v{i}" for i in range(len(named) + 1) if f"v{i}" not in named))
    for r in reqs:
        bound = parse_int64(r.values[0]) if r.operator in ("Gt", "Lt") and r.values else None
        if bound is not None:
            candidates += [str(bound + d) for d in range(-len(named) - 1, len(named) + 2)]
    for value in candidates:
        have = {} if value is None else {key: value}
        if all(_field_matches(r, have) if is_field else r.matches(have) for r in reqs):
            return True
    return False


def node_selector_term_from_api(raw: Any, path: str) -> NodeSelectorTerm:
    """A NodeSelectorTerm (`{matchExpressions, matchFields}`) from API data, shape-checked."""
    if raw is None:
        return NodeSelectorTerm()
    expect(raw, dict, path, "an object")
    return NodeSelectorTerm(
        requirements_from_api(raw.get("matchExpressions"), f"{path}.matchExpressions"),
        requirements_from_api(raw.get("matchFields"), f"{path}.matchFields"),
    )


@dataclass(frozen=True)
class PreferredTerm:
    """One PreferredSchedulingTerm (`{weight, preference}`): what the policy injects, and what the
    scheduler scores (a pod's own terms may also carry matchFields)."""

    weight: int
    term: NodeSelectorTerm

    @classmethod
    def of(cls, weight: int, *expressions: Requirement) -> PreferredTerm:
        """A term on node labels only, as a policy writes it."""
        return cls(weight, NodeSelectorTerm(tuple(expressions)))

    def matches(self, labels: Mapping[str, str], name: str = "") -> bool:
        return self.term.matches(labels, name)

    @cached_property
    def identity(self) -> TermIdentity:
        """Order-insensitive identity; a term with matchFields never equals one without.
        Computed once per term: the policy compares its own terms with every pod's."""
        return (
            self.weight,
            frozenset(r.canonical() for r in self.term.expressions),
            frozenset(f.canonical() for f in self.term.fields),
        )

    def keys(self) -> frozenset[str]:
        """The node-label keys the term is about (matchFields name node fields, not labels)."""
        return frozenset(r.key for r in self.term.expressions)

    def to_api(self) -> dict[str, Any]:
        preference: dict[str, Any] = {"matchExpressions": [r.to_api() for r in self.term.expressions]}
        if self.term.fields:
            preference["matchFields"] = [f.to_api() for f in self.term.fields]
        return {"weight": self.weight, "preference": preference}


def preferred_term_from_api(raw: Any, path: str) -> PreferredTerm:
    """A PreferredSchedulingTerm (`{weight, preference}`) from API data, shape-checked."""
    expect(raw, dict, path, "an object")
    weight = expect(raw.get("weight"), int, f"{path}.weight", "an integer")
    return PreferredTerm(weight, node_selector_term_from_api(raw.get("preference"), f"{path}.preference"))


REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


# What the policy reads of one of a pod's preferred terms (`preferred_sketches_from_api`): its
# weight, its node-label keys, whether it has matchFields, and the term as given, from which
# `sketch_identity` computes the identity only when the policy might hold the same term. A plain
# tuple: one is made per term of every pod reviewed, and a tuple costs the least to make.
TermSketch = tuple[int, frozenset[str], bool, Mapping[str, Any]]


def sketch_identity(sketch: TermSketch) -> TermIdentity:
    """`PreferredTerm.identity` of a sketched term (its shape was checked when it was sketched)."""
    weight, _, _, raw = sketch
    preference = raw.get("preference") or {}
    return (
        weight,
        frozenset(_canonical_requirement(r) for r in preference.get("matchExpressions") or ()),
        frozenset(_canonical_requirement(r) for r in preference.get("matchFields") or ()),
    )


def _canonical_requirement(raw: Mapping[str, Any]) -> Canonical:
    return (raw["key"], raw["operator"], tuple(sorted(set(raw.get("values") or ()))))


def _requirement_keys(raw: Any) -> list[str] | None:
    """The keys of a list of NodeSelectorRequirements, or None when any part has another shape
    than the API's. Builds no path strings: it runs for every term of a pod."""
    if type(raw) is not list:
        return [] if raw is None else None
    keys = []
    for r in raw:
        if type(r) is not dict:
            return None
        key = r.get("key")
        values = r.get("values")
        if type(key) is not str or type(r.get("operator")) is not str:
            return None
        if values is not None and (type(values) is not list or not all(type(v) is str for v in values)):
            return None
        keys.append(key)
    return keys


def preferred_sketches_from_api(raw: Any, path: str) -> list[TermSketch]:
    """Each PreferredSchedulingTerm of a list, sketched in one walk over the API data with small
    constants: what the policy asks of a pod's own terms (ours already there? which keys does
    the author use?) without building a model of each term. Shapes are checked as
    preferred_term_from_api checks them; when one is wrong, that reader names the field."""
    if raw is None:
        return []
    expect(raw, list, path, "a list")
    out: list[TermSketch] = []
    append = out.append
    for i, term in enumerate(raw):
        if type(term) is dict:
            weight = term.get("weight")
            preference = term.get("preference")
            if type(weight) is int:
                if preference is None:
                    append((weight, frozenset(), False, term))
                    continue
                if type(preference) is dict:
                    keys = _requirement_keys(preference.get("matchExpressions"))
                    fields = preference.get("matchFields")
                    if keys is not None and (fields is None or _requirement_keys(fields) is not None):
                        append((weight, frozenset(keys), bool(fields), term))
                        continue
        preferred_term_from_api(term, f"{path}[{i}]")  # raises ShapeError naming the field
        raise AssertionError(f"{path}[{i}]: a shape the sketch refused and the reader accepts")
    return out


def node_affinity_from_api(
    raw: Mapping[str, Any], path: str
) -> tuple[tuple[NodeSelectorTerm, ...] | None, tuple[PreferredTerm, ...]]:
    """A NodeAffinity (`{required..., preferred...}`), as a pod or NodeAffinityArgs.addedAffinity
    carries it: the required terms (None when there is no required NodeSelector) and the
    preferred terms, shape-checked."""
    required = required_terms_from_api(raw, path)
    raw_preferred = raw.get(PREFERRED)
    raw_preferred = [] if raw_preferred is None else expect(raw_preferred, list, f"{path}.{PREFERRED}", "a list")
    preferred = tuple(preferred_term_from_api(t, f"{path}.{PREFERRED}[{i}]") for i, t in enumerate(raw_preferred))
    return required, preferred


def required_terms_from_api(raw: Mapping[str, Any], path: str) -> tuple[NodeSelectorTerm, ...] | None:
    """A NodeAffinity's required NodeSelector terms (None when there is none), shape-checked."""
    required = None
    raw_required = raw.get(REQUIRED)
    if raw_required is not None:
        where = f"{path}.{REQUIRED}"
        expect(raw_required, dict, where, "an object")
        terms = raw_required.get("nodeSelectorTerms")
        terms = [] if terms is None else expect(terms, list, f"{where}.nodeSelectorTerms", "a list")
        required = tuple(node_selector_term_from_api(t, f"{where}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms))
    return required
