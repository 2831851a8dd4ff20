"""scripts/test --all-versions: the end-to-end suite once per Kubernetes release the harness knows,
each session told its release, every release run even when one fails, an outcome per release and a
record per release (docs/evidence/kubernetes-<minor>-<date>.md: the fixed header, then passed /
failed / skipped per test file, counted from pytest's JUnit XML). The README's support matrix is
generated from the newest records (scripts/support-matrix) and a test keeps the two in step.

Collection only for the loop (no control plane is started); the counting runs a real pytest session
on a few planted test files; the tag check runs on a git repository made in a temporary directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import supportmatrix
from harness.gobuild import RELEASES
from harness.supportmatrix import BEGIN, END, Counts
from tests.fixtures import REPO


def all_versions(evidence: Path, *pytest_args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "NETQOS_CLUSTER_DIR": "/nonexistent/a-cluster-of-one-release",
        "NETQOS_KUBERNETES": "1.36",
        "NETQOS_EVIDENCE_DIR": str(evidence),
    }
    return subprocess.run(
        [str(REPO / "scripts" / "test"), "--all-versions", *pytest_args, "-p", "no:cacheprovider"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_each_release_gets_a_session_of_its_own_an_outcome_and_a_record(tmp_path: Path) -> None:
    done = all_versions(tmp_path, "--collect-only", "tests/e2e/test_admission_policy.py")
    assert done.returncode == 0, done.stderr[-2000:]
    for minor, of in RELEASES.items():
        assert f"Kubernetes {minor} ({of.version})" in done.stdout  # the session's header: the release
        assert f"scripts/test --all-versions: Kubernetes {minor}: pytest tests/e2e" in done.stderr
        assert f"scripts/test --all-versions: {minor} passed" in done.stderr
        record = supportmatrix.read_record(next(tmp_path.glob(f"kubernetes-{minor}-*.md")))
        text = record.path.read_text()
        assert "- command: `scripts/test --all-versions --collect-only tests/e2e/test_admission_policy.py" in text
        assert f"- session: `NETQOS_KUBERNETES={minor} " in text
        # collecting runs no test, and a record of no test is no proof
        assert (record.outcome, record.total) == ("failed: no test ran (pytest exit 0)", Counts())
    assert list(RELEASES) == ["1.34", "1.35", "1.36", "1.37"]


def test_a_failing_release_fails_the_run_after_every_release_ran(tmp_path: Path) -> None:
    done = all_versions(tmp_path, "--no-such-option")  # pytest refuses it at once, exit 4
    assert done.returncode == 1
    assert [line.split(": ", 1)[1].split(" (")[0] for line in done.stderr.splitlines() if " FAILED (" in line] == [
        f"{minor} FAILED" for minor in RELEASES
    ]
    assert sorted(p.name.split("-")[1] for p in tmp_path.glob("kubernetes-*.md")) == list(RELEASES)


# A session as the e2e suite's would be: two files, one with a class, every outcome pytest reports.
PLANTED = {
    "tests/__init__.py": "",
    "tests/e2e/__init__.py": "",
    "tests/e2e/test_alpha.py": """
import pytest

def test_passes(): pass
def test_fails(): assert False
@pytest.mark.skip(reason="planted")
def test_skipped(): pass
@pytest.fixture
def broken(): raise RuntimeError("planted")
def test_errors_in_setup(broken): pass
""",
    "tests/e2e/test_beta.py": """
class TestGroup:
    def test_one(self): pass
    def test_two(self): pass
""",
    "tests/e2e/test_gamma.py": "import no_such_module_planted\n",  # a collection error
}


@pytest.fixture(scope="module")
def junit(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("session")
    for name, text in PLANTED.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    xml = root / "junit.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/e2e", "-p", "no:cacheprovider", "--continue-on-collection-errors"]
        + ["-q", f"--junitxml={xml}", "--rootdir", str(root), "-c", os.devnull],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return xml, done.returncode


def test_the_record_counts_each_test_file_from_pytests_junit_xml(junit: tuple[Path, int]) -> None:
    xml, exit_status = junit
    counts = {path: (c.passed, c.failed, c.skipped) for path, c in supportmatrix.counts_by_file(xml).items()}
    assert counts == {
        "tests/e2e/test_gamma.py": (0, 1, 0),  # pytest reports collection errors first
        "tests/e2e/test_alpha.py": (1, 2, 1),  # a failure and a setup error both fail
        "tests/e2e/test_beta.py": (2, 0, 0),
    }
    assert exit_status == 1


@pytest.mark.parametrize(
    ("exit_status", "total", "outcome"),
    [
        (0, Counts(passed=3), "passed"),
        (0, Counts(passed=2, skipped=1), "passed"),
        (1, Counts(passed=2, failed=1), "failed (pytest exit 1)"),
        (5, Counts(), "failed: no test ran (pytest exit 5)"),
        (4, Counts(), "failed: no test ran (pytest exit 4)"),
    ],
)
def test_a_release_passes_only_when_pytest_exits_0_having_run_tests(
    exit_status: int, total: Counts, outcome: str
) -> None:
    assert supportmatrix.outcome(exit_status, total) == outcome


README_WITH_MARKERS = f"# a project\n\nabove\n\n{BEGIN}\nwhatever was here\n{END}\n\nbelow\n"


def records(directory: Path, junit: Path) -> None:
    """A record for 1.34 and 1.37 from the planted session, as scripts/test --all-versions writes them."""
    for minor in ("1.34", "1.37"):
        supportmatrix.write_record(minor, junit, 1, "scripts/test --all-versions", "pytest", 754, 0.5, directory)


def test_the_matrix_is_generated_between_the_markers_from_the_newest_records(
    tmp_path: Path, junit: tuple[Path, int]
) -> None:
    evidence, readme = tmp_path / "docs" / "evidence", tmp_path / "README.md"
    readme.write_text(README_WITH_MARKERS)
    records(evidence, junit[0])
    assert supportmatrix.regenerate(readme, evidence, tmp_path) is True
    text = readme.read_text()
    assert text.startswith(f"# a project\n\nabove\n\n{BEGIN}\n") and text.endswith(f"{END}\n\nbelow\n")
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| 1.")}
    assert list(rows) == [of.version.lstrip("v") + (" (default)" if m == "1.37" else "") for m, of in RELEASES.items()]
    assert " | failed (pytest exit 1) | 3 | 3 | 1 | 12 min 34 s | " in rows["1.34.4"]
    assert "](docs/evidence/kubernetes-1.34-" in rows["1.34.4"]
    assert "| no recorded run |" in rows["1.35.4"]
    assert supportmatrix.check(readme, evidence, tmp_path) == []
    assert supportmatrix.regenerate(readme, evidence, tmp_path) is False  # nothing left to change


@pytest.mark.parametrize(
    ("plant", "what"),
    [
        ("record", "a record's counts changed after the matrix was made"),
        ("readme", "the matrix edited by hand"),
    ],
)
def test_the_guard_fails_when_the_matrix_and_the_records_disagree(
    tmp_path: Path, junit: tuple[Path, int], plant: str, what: str
) -> None:
    evidence, readme = tmp_path / "docs" / "evidence", tmp_path / "README.md"
    readme.write_text(README_WITH_MARKERS)
    records(evidence, junit[0])
    supportmatrix.regenerate(readme, evidence, tmp_path)
    if plant == "record":
        path = next(evidence.glob("kubernetes-1.37-*.md"))
        path.write_text(path.read_text().replace("- tests: 3 passed, 3 failed", "- tests: 6 passed, 0 failed"))
    else:
        readme.write_text(readme.read_text().replace("| 3 | 3 | 1 |", "| 6 | 0 | 1 |", 1))
    assert supportmatrix.check(readme, evidence, tmp_path) == [
        "README.md: the support matrix is not the one the records give; run scripts/support-matrix"
    ], what


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def set_commit(record: Path, sha: str) -> None:
    lines = record.read_text().splitlines()
    record.write_text("\n".join(f"- commit: {sha}" if line.startswith("- commit: ") else line for line in lines))


def test_a_record_of_a_commit_older_than_the_newest_tag_is_stale(tmp_path: Path, junit: tuple[Path, int]) -> None:
    git(tmp_path, "init", "-q")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "before the release")
    before = git(tmp_path, "rev-parse", "HEAD")
    evidence = tmp_path / "docs" / "evidence"
    records(evidence, junit[0])
    old, new = (next(evidence.glob(f"kubernetes-{minor}-*.md")) for minor in ("1.34", "1.37"))
    set_commit(old, before)
    set_commit(new, before)
    assert supportmatrix.older_than_tag(supportmatrix.newest_records(evidence).values(), tmp_path) == []  # no tag
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "the release")
    git(tmp_path, "tag", "v0.2.0")
    set_commit(new, git(tmp_path, "rev-parse", "HEAD"))
    assert supportmatrix.older_than_tag(supportmatrix.newest_records(evidence).values(), tmp_path) == [
        f"{old.name}: its commit {before[:12]} is older than the tag v0.2.0"
    ]


def test_the_readmes_support_matrix_is_the_one_the_newest_records_give() -> None:
    done = subprocess.run(
        [str(REPO / "scripts" / "support-matrix"), "--check"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
