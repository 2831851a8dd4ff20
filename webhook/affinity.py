"""Node-selector semantics: match, score, equality.

Shared by the mutation path (policy) and by `explain`, so the score we print is computed by the
code that decides what we inject. Plain data in, plain data out; no I/O.

Semantics follow k8s.io/component-helpers/scheduling/corev1/nodeaffinity:
- In / NotIn / Exists / DoesNotExist compare node labels; NotIn and DoesNotExist match a node
  that lacks the key.
- Gt / Lt parse the node's label value and the single requirement value as integers; a missing or
  non-integer label does not match.
- The requirements of one term are ANDed; a term with no requirements matches nothing.
- A preferred term contributes its weight when it matches; the raw score is the sum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


@dataclass(frozen=True)
class Requirement:
    """One NodeSelectorRequirement (`{key, operator, values}`)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
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
        if op in ("Gt", "Lt"):
            if not present:
                return False
            try:
                have, want = int(labels[self.key]), int(self.values[0])
            except (ValueError, IndexError):
                return False
            return have > want if op == "Gt" else have < want
        return False  # unknown operator: the API server would have rejected it

    def canonical(self) -> tuple[str, str, tuple[str, ...]]:
        """Order-insensitive identity: `In [a, b]` and `In [b, a]` are the same requirement."""
        return (self.key, self.operator, tuple(sorted(set(self.values))))

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        return out


@dataclass(frozen=True)
class PreferredTerm:
    """One PreferredSchedulingTerm: a weight and the requirements of its preference."""

    weight: int
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return bool(self.requirements) and all(r.matches(labels) for r in self.requirements)

    def identity(self) -> tuple[int, frozenset]:
        return (self.weight, frozenset(r.canonical() for r in self.requirements))

    def keys(self) -> frozenset[str]:
        return frozenset(r.key for r in self.requirements)

    def to_api(self) -> dict[str, Any]:
        return {
            "weight": self.weight,
            "preference": {"matchExpressions": [r.to_api() for r in self.requirements]},
        }


class ShapeError(ValueError):
    """A pod field does not have the type the Pod API gives it.

    The API server never sends such a pod (it decodes into typed structs first); only a
    hand-made review can. We report where and what, and leave the pod alone.
    """

    def __init__(self, path: str, expected: str, value: Any) -> None:
        self.path, self.expected, self.value = path, expected, value
        super().__init__(f"{path} must be {expected}, got {_describe(value)}")


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def expect(value: Any, kind: type, path: str, expected: str) -> Any:
    """`value` if it is a `kind` (bool is never an int here), else ShapeError."""
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ShapeError(path, expected, value)
    return value


def requirement_from_api(raw: Any, path: str) -> Requirement:
    """Read a NodeSelectorRequirement from a pod or node-selector object, checking its shape."""
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


def preferred_term_from_api(raw: Any, path: str) -> tuple[PreferredTerm, bool]:
    """A PreferredSchedulingTerm, and whether its preference also has `matchFields`.

    Terms with matchFields are never equal to a policy term (policies only use expressions).
    """
    expect(raw, dict, path, "an object")
    weight = expect(raw.get("weight"), int, f"{path}.weight", "an integer")
    pref = raw.get("preference")
    if pref is None:
        pref = {}
    expect(pref, dict, f"{path}.preference", "an object")
    reqs = requirements_from_api(pref.get("matchExpressions"), f"{path}.preference.matchExpressions")
    fields = pref.get("matchFields")
    return PreferredTerm(weight, reqs), bool(fields)


def raw_score(terms: Iterable[PreferredTerm], labels: Mapping[str, str]) -> int:
    """NodeAffinity's raw score: the sum of the weights of the matching preferred terms."""
    return sum(t.weight for t in terms if t.weight and t.matches(labels))
