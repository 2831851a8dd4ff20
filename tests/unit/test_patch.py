"""The patch derived from before/after: the minimal RFC 6902 operations, which turn `before` into
`after` (applied here by Python's JSON-patch; tests/process/test_patch_kubectl.py applies the same
table with Go's, as the API server does)."""

import pytest

from harness.patches import apply_python
from webhook.patch import diff, escape

BASE = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}


def changed(**parts):
    return {**BASE, **parts}


# (case, before, after, the operations)
CASES = [
    ("identical documents", BASE, dict(BASE), []),
    (
        "a new member whose parent is missing is added whole",
        BASE,
        changed(spec={**BASE["spec"], "affinity": {"nodeAffinity": {"x": [1]}}}),
        [{"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {"x": [1]}}}],
    ),
    (
        "a key with / and ~ is escaped",
        BASE,
        changed(metadata={"name": "p", "annotations": {"a/b~c": "v"}}),
        [{"op": "add", "path": "/metadata/annotations", "value": {"a/b~c": "v"}}],
    ),
    (
        "a member of an existing map with / in its key",
        changed(metadata={"name": "p", "annotations": {"x": "1"}}),
        changed(metadata={"name": "p", "annotations": {"x": "1", "netqos.io/injected": "a"}}),
        [{"op": "add", "path": "/metadata/annotations/netqos.io~1injected", "value": "a"}],
    ),
    (
        "items appended to a list are added at their index",
        changed(spec={"containers": [{"name": "c"}], "l": [1, 2]}),
        changed(spec={"containers": [{"name": "c"}], "l": [1, 2, 3, 4]}),
        [{"op": "add", "path": "/spec/l/2", "value": 3}, {"op": "add", "path": "/spec/l/3", "value": 4}],
    ),
    (
        "a null parent is replaced",
        changed(metadata={"name": "p", "annotations": None}),
        changed(metadata={"name": "p", "annotations": {"k": "v"}}),
        [{"op": "replace", "path": "/metadata/annotations", "value": {"k": "v"}}],
    ),
    (
        "a reordered list is replaced, not patched item by item",
        changed(spec={"l": [1, 2]}),
        changed(spec={"l": [2, 1]}),
        [{"op": "replace", "path": "/spec/l", "value": [2, 1]}],
    ),
    (
        "a removed member is removed",
        changed(spec={"a": 1, "b": 2}),
        changed(spec={"a": 1}),
        [{"op": "remove", "path": "/spec/b"}],
    ),
    (
        "true is not 1",
        changed(spec={"a": 1}),
        changed(spec={"a": True}),
        [{"op": "replace", "path": "/spec/a", "value": True}],
    ),
]


@pytest.mark.parametrize("case, before, after, ops", CASES, ids=[c[0] for c in CASES])
def test_diff_gives_the_minimal_patch_that_turns_before_into_after(case, before, after, ops):
    assert diff(before, after) == ops, case
    assert apply_python(before, ops) == after


@pytest.mark.parametrize(
    "token, escaped", [("plain", "plain"), ("a/b", "a~1b"), ("a~b", "a~0b"), ("~/", "~0~1"), ("~1", "~01")]
)
def test_pointer_tokens_are_escaped_per_rfc6901(token, escaped):
    assert escape(token) == escaped
