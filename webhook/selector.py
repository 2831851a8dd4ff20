"""Kubernetes LabelSelector (`matchLabels` + `matchExpressions`), compiled once.

Semantics follow k8s.io/apimachinery/pkg/labels: all clauses are ANDed; `NotIn` and
`DoesNotExist` match objects that lack the key; an empty selector matches everything. The
expressions are the same `Requirement`s node selectors use (the loader admits only the four
label-selector operators here), so both kinds of selector share one implementation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.affinity import Requirement

LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True)
class LabelSelector:
    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(e.matches(labels) for e in self.match_expressions)

    def to_api(self) -> dict[str, Any]:
        """The selector in API shape, e.g. for a webhook's objectSelector."""
        out: dict[str, Any] = {}
        if self.match_labels:
            out["matchLabels"] = dict(self.match_labels)
        if self.match_expressions:
            out["matchExpressions"] = [e.to_api() for e in self.match_expressions]
        return out
