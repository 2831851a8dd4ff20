"""Kubernetes LabelSelector (`matchLabels` + `matchExpressions`), compiled once.

Semantics follow k8s.io/apimachinery/pkg/labels: all clauses are ANDed; `NotIn` and
`DoesNotExist` match objects that lack the key; an empty selector matches everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True)
class Expression:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        return not present  # DoesNotExist; the loader admits nothing else


@dataclass(frozen=True)
class LabelSelector:
    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Expression, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(e.matches(labels) for e in self.match_expressions)

    def to_api(self) -> dict[str, Any]:
        """The selector in API shape, for objectSelector in the webhook configuration."""
        out: dict[str, Any] = {}
        if self.match_labels:
            out["matchLabels"] = dict(self.match_labels)
        if self.match_expressions:
            out["matchExpressions"] = [
                {"key": e.key, "operator": e.operator, **({"values": list(e.values)} if e.values else {})}
                for e in self.match_expressions
            ]
        return out
