"""The JSON patch (RFC 6902) that turns one JSON document into another.

The one place a patch is made: admission diffs the pod as it was against the pod the policy says
it should become (as controller-runtime's PatchResponseFromRaw and kopf do), so the patch cannot
disagree with the intended result. The ops are the conservative subset the API server's Go
JSON-patch applies exactly as Python's `jsonpatch` does: `add` for new object members (the
whole missing parent at once, never a pointer into a missing parent), `add` at index `len` for
appended list items, `replace` for changed values, `remove` for dropped members.
"""

from __future__ import annotations

from typing import Any


def diff(before: Any, after: Any) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    _diff(before, after, "", ops)
    return ops


def escape(token: str) -> str:
    """A JSON pointer reference token (RFC 6901): `~` is `~0`, `/` is `~1`."""
    return token.replace("~", "~0").replace("/", "~1")


def _diff(before: Any, after: Any, path: str, ops: list[dict[str, Any]]) -> None:
    # Identity first: the policy shares unchanged subtrees with the input, so a 200-container pod
    # costs a handful of pointer comparisons rather than a deep walk.
    if before is after:
        return
    if type(before) is dict and type(after) is dict:
        for key, value in after.items():
            child = f"{path}/{escape(key)}"
            if key not in before:
                ops.append({"op": "add", "path": child, "value": value})
            else:
                _diff(before[key], value, child, ops)
        for key in before:
            if key not in after:
                ops.append({"op": "remove", "path": f"{path}/{escape(key)}"})
        return
    if type(before) is list and type(after) is list and _is_prefix(before, after):
        for index in range(len(before), len(after)):
            ops.append({"op": "add", "path": f"{path}/{index}", "value": after[index]})
        return
    if before != after or type(before) is not type(after):
        ops.append({"op": "replace", "path": path, "value": after})


def _is_prefix(short: list[Any], long: list[Any]) -> bool:
    return len(short) <= len(long) and all(a is b or a == b for a, b in zip(short, long, strict=False))
