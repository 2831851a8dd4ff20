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

from webhook.affinity import Requirement, requirements_from_api
from webhook.apidata import InvalidValue, expect, string_map
from webhook.validation import is_qualified_name, is_valid_label_value

LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True)
class LabelSelector:
    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def is_empty(self) -> bool:
        """`{}`: selects every object."""
        return not self.match_labels and not self.match_expressions

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


def label_selector_from_api(raw: Any, path: str) -> LabelSelector:
    """A LabelSelector from API data (an objectSelector, a namespaceSelector), checked as
    metav1.LabelSelectorAsSelector checks it: keys are qualified names, values label values,
    operators the four of a label selector. Absent or null selects everything."""
    if raw is None:
        return LabelSelector()
    expect(raw, dict, path, "an object")
    labels = string_map(raw, "matchLabels", f"{path}.matchLabels")
    for key, value in labels.items():
        key_errors = is_qualified_name(key)
        if key_errors:
            raise InvalidValue(f"{path}.matchLabels", f"keyed by label keys ({'; '.join(key_errors)})", key)
        value_errors = is_valid_label_value(value)
        if value_errors:
            raise InvalidValue(f"{path}.matchLabels[{key!r}]", f"a label value ({'; '.join(value_errors)})", value)
    expressions = requirements_from_api(raw.get("matchExpressions"), f"{path}.matchExpressions")
    for i, requirement in enumerate(expressions):
        where = f"{path}.matchExpressions[{i}]"
        if requirement.operator not in LABEL_SELECTOR_OPERATORS:
            raise InvalidValue(f"{where}.operator", "In, NotIn, Exists or DoesNotExist", requirement.operator)
        problem = requirement.problem()
        if problem:
            raise InvalidValue(where, f"a valid requirement ({problem})", requirement.to_api())
    return LabelSelector(tuple(labels.items()), expressions)
