"""The patch derived from before/after turns `before` into `after` in Go too: every case of
tests/unit/test_patch.py applied by `kubectl patch --local` (Go's JSON-patch, the library the API
server applies webhook patches with)."""

import pytest

from harness.patches import apply_kubectl
from tests.unit.test_patch import CASES

pytestmark = pytest.mark.process
PATCHED = [case for case in CASES if case[3]]  # an empty patch is not sent


@pytest.mark.parametrize("case, before, after, ops", PATCHED, ids=[c[0] for c in PATCHED])
def test_go_applies_the_derived_patch_as_python_does(case, before, after, ops, tmp_path):
    assert apply_kubectl(before, ops, tmp_path) == after
