""".ci/run tests the default Kubernetes release in full and, on the oldest supported release, the
end-to-end tests whose subject differs between releases: those are the files this table names, and
each exists (a renamed file would otherwise be found missing only by CI's run). It records each
phase's wall time in docs/evidence/ci-<date>.md, with the fixed header every run record has."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.fixtures import REPO

# What differs between releases, and the files that test it on a real control plane.
DIFFERS = {
    "admission through the real API server": ["tests/e2e/test_admission.py"],
    "the admission policy's API (v1beta1 before 1.36)": ["tests/e2e/test_admission_policy.py"],
    "explain against the real scheduler on random clusters, both profiles": ["tests/e2e/test_explain_real.py"],
    "status": ["tests/e2e/test_status.py"],
    "rebalance": ["tests/e2e/test_rebalance*.py"],
    "the scheduler's plugins per release": ["tests/e2e/test_scheduler_versions.py"],
    "a chart upgrade from the previous revision": ["tests/e2e/realnodes/test_upgrade.py"],
}


def oldest_subset() -> list[str]:
    text = (REPO / ".ci" / "run").read_text()
    found = re.search(r"^OLDEST_SUBSET=\((.*?)\)$", text, re.MULTILINE | re.DOTALL)
    assert found, ".ci/run has no OLDEST_SUBSET=(...) array"
    return shlex.split(found[1].replace("\\\n", " "))


def test_ci_runs_on_the_oldest_release_exactly_the_tests_that_differ_between_releases() -> None:
    assert oldest_subset() == [path for paths in DIFFERS.values() for path in paths]


def test_every_file_of_the_oldest_release_subset_exists() -> None:
    for pattern in oldest_subset():
        assert sorted(REPO.glob(pattern)), f".ci/run names {pattern}, which matches no file"
    rebalance = sorted(p.name for p in REPO.glob("tests/e2e/test_rebalance*.py"))
    assert "test_rebalance.py" in rebalance and len(rebalance) >= 2


def test_ci_writes_its_phase_times_as_a_record_with_the_fixed_header(tmp_path: Path) -> None:
    table = "| phase | seconds |\n|---|--:|\n| control plane build, Kubernetes 1.34 | 512 |\n"
    done = subprocess.run(
        [sys.executable, "-m", "harness.evidence", "--name", "ci", "--title", "CI (.ci/run): wall time per phase"]
        + ["--command", ".ci/run", "--seconds", "2400", "--load-before", "0.5", "--directory", str(tmp_path)],
        input=table,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    [record] = tmp_path.glob("ci-*.md")
    lines = record.read_text().splitlines()
    assert lines[0].startswith("# CI (.ci/run): wall time per phase, ")
    assert [line.split(":")[0] for line in lines[2:8]] == [
        "- commit",
        "- date",
        "- machine",
        "- load average (1 min) before and after",
        "- command",
        "- duration",
    ]
    assert lines[7:] == ["- duration: 2400 s", "", *table.splitlines()]
