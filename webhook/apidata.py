"""Typed readers of Kubernetes API data (decoded JSON or YAML): one place that says what shape a
field must have, and one error that names the field when it has another.

The API server never sends a malformed object (it decodes into typed structs first), so a
`ShapeError` always means hand-made input: a review sent by a test or a script, a manifest or a
`kubectl get -o yaml` file edited by hand. Readers take the parent object, the key and the path
to report; an absent or null field reads as the type's empty value, as Go's decoder leaves it.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")

# For isinstance on the hot paths that read every pod: dict first, since every decoded API object is
# one and the check against the Mapping ABC alone costs about three times as much.
MAPPING = (dict, Mapping)

STRING_IN_YAML = "a string (quote numbers and booleans in YAML)"


class ShapeError(ValueError):
    """A field does not have the type the Kubernetes API gives it; says where and what."""

    def __init__(self, path: str, expected: str, value: Any) -> None:
        self.path, self.expected, self.value = path, expected, value
        super().__init__(f"{path} must be {expected}, got {describe(value)}")


class InvalidValue(ShapeError):
    """A field of the right type whose value Kubernetes refuses (Go's field.Invalid): says what
    it must be and shows the value as the user wrote it."""

    def __init__(self, path: str, expected: str, value: Any) -> None:
        ValueError.__init__(self, f"{path} must be {expected}, got {show(value)}")
        self.path, self.expected, self.value = path, expected, value


def show(value: Any, limit: int = 80) -> str:
    """`value` as the user wrote it in YAML or JSON (true, null, "a\\n"), not as Python prints it
    (True, None, 'a\\n'); cut to `limit` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=False, default=str)
    except (TypeError, ValueError):
        text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(value: Any) -> str:
    """A decoded value's type in the words of JSON and YAML, never Python's: "an object", "a list",
    "a string", "a number", "a boolean", "null", "a timestamp" (an unquoted YAML date). The one
    place every message that says what a document or field is instead gets its words."""
    if value is None:
        return "null"
    if isinstance(value, bool):  # before int: a boolean is an int to Python
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, datetime.date):  # datetime is a date
        return "a timestamp"
    names: tuple[tuple[type, str], ...] = ((dict, "an object"), (list, "a list"), (str, "a string"))
    return next((name for kind, name in names if isinstance(value, kind)), "a scalar")


def expect(value: Any, kind: type[T], path: str, expected: str) -> T:
    """`value` if it is a `kind` (a boolean is never an integer here), else ShapeError."""
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ShapeError(path, expected, value)
    return value


def obj(parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    """An object field; {} when absent or null."""
    value = parent.get(key)
    return {} if value is None else expect(value, dict, path, "an object")


def items(parent: Mapping[str, Any], key: str, path: str) -> list[Any]:
    """A list field; [] when absent or null."""
    value = parent.get(key)
    return [] if value is None else expect(value, list, path, "a list")


def text(parent: Mapping[str, Any], key: str, path: str) -> str:
    """A string field; "" when absent or null (Go's zero value)."""
    value = parent.get(key)
    return "" if value is None else expect(value, str, path, "a string")


def integer(parent: Mapping[str, Any], key: str, path: str, default: int = 0) -> int:
    """An integer field; `default` when absent or null."""
    value = parent.get(key)
    return default if value is None else expect(value, int, path, "an integer")


def string_map(parent: Mapping[str, Any], key: str, path: str, expected: str = "a string") -> Mapping[str, str]:
    """A map of strings (labels, annotations, nodeSelector); {} when absent or null."""
    value = obj(parent, key, path)
    for k, v in value.items():
        expect(v, str, f"{path}[{k!r}]", expected)
    return value


def string_or_empty(value: Any) -> str:
    """`value` if it is a string, else "": for fields only shown or logged, never decided on."""
    return value if isinstance(value, str) else ""


def boolean(parent: Mapping[str, Any], key: str, path: str) -> bool | None:
    """A boolean field; None when absent or null (an unset `*bool` in Go, often meaning "true")."""
    value = parent.get(key)
    return None if value is None else expect(value, bool, path, "a boolean")


def pod_type_problem(obj: Mapping[str, Any]) -> str | None:
    """Why the API server would refuse `obj` as a Pod ("Object 'apiVersion' is missing"), or None
    for apiVersion v1 and kind Pod: explain and review turn such a manifest away alike."""
    kind = obj.get("kind")
    if obj.get("apiVersion") == "v1" and kind == "Pod":
        return None
    return (
        f"apiVersion is {show(obj.get('apiVersion'))} and kind {show(kind)}: the API server only takes a Pod as "
        "apiVersion: v1, kind: Pod; add both"
    )
