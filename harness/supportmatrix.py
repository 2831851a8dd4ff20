"""The Kubernetes releases proven by recorded runs: one record per release of the end-to-end suite
(docs/evidence/kubernetes-<minor>-<date>.md, written by `scripts/test --all-versions`), and the
README's support matrix generated from the newest record of each release (`scripts/support-matrix`).

A record is the fixed header of harness/evidence.py, then the release, the outcome, and passed /
failed / skipped per test file, counted from pytest's JUnit XML. The matrix is the block between
`BEGIN` and `END` in README.md; `check` says where it and the records disagree, and which records
describe code older than the newest tag.

    python -m harness.supportmatrix record --release 1.34 --junit FILE --exit-status N --seconds S ...
    python -m harness.supportmatrix matrix [--check]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import evidence
from harness.gobuild import DEFAULT_MINOR, RELEASES

README = evidence.REPO / "README.md"
BEGIN = "<!-- support-matrix:begin -->"
END = "<!-- support-matrix:end -->"
RECORD = re.compile(r"kubernetes-(?P<minor>\d+\.\d+)-(?P<date>\d{4}-\d{2}-\d{2})\.md")
SUITE = "tests/e2e"


class MatrixError(RuntimeError):
    """The README or a record cannot be read as this module writes them; the message says which and why."""


@dataclass(frozen=True)
class Counts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.passed + other.passed,
            self.failed + other.failed,
            self.skipped + other.skipped,
            self.seconds + other.seconds,
        )

    @property
    def ran(self) -> int:
        return self.passed + self.failed + self.skipped


def test_file(classname: str, name: str) -> str:
    """The file of a JUnit test case: pytest names it by module (`tests.e2e.test_status`, then a
    class, if any); a collection error has no class name and the module as its name."""
    dotted = classname or name
    parts = dotted.split(".")
    for end, part in enumerate(parts):
        if part.startswith("test_"):
            return "/".join(parts[: end + 1]) + ".py"
    return "/".join(parts) + ".py"


def counts_by_file(junit: Path) -> dict[str, Counts]:
    """Passed, failed (failure or error) and skipped test cases per test file, in file order."""
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError) as err:
        raise MatrixError(f"{junit}: not pytest's JUnit XML ({err})") from err
    found: dict[str, Counts] = {}
    for case in root.iter("testcase"):
        path = test_file(case.get("classname", ""), case.get("name", ""))
        seconds = float(case.get("time") or 0)
        if case.find("failure") is not None or case.find("error") is not None:
            one = Counts(failed=1, seconds=seconds)
        elif case.find("skipped") is not None:
            one = Counts(skipped=1, seconds=seconds)
        else:
            one = Counts(passed=1, seconds=seconds)
        found[path] = found.get(path, Counts()) + one
    return found


def outcome(exit_status: int, total: Counts) -> str:
    """passed: pytest exited 0 and at least one test ran; otherwise why not."""
    if exit_status == 0 and total.ran:
        return "passed"
    if exit_status == 5 or not total.ran:
        return f"failed: no test ran (pytest exit {exit_status})"
    return f"failed (pytest exit {exit_status})"


def record_body(minor: str, session: str, exit_status: int, files: Mapping[str, Counts]) -> str:
    total = sum(files.values(), Counts())
    lines = [
        f"- release: Kubernetes {minor} ({RELEASES[minor].version})",
        f"- session: `{session}`",
        f"- outcome: {outcome(exit_status, total)}",
        f"- tests: {total.passed} passed, {total.failed} failed, {total.skipped} skipped",
        "",
        "| test file | passed | failed | skipped | seconds |",
        "|---|--:|--:|--:|--:|",
    ]
    for path, c in files.items():
        lines.append(f"| `{path}` | {c.passed} | {c.failed} | {c.skipped} | {c.seconds:.0f} |")
    lines.append(f"| total | {total.passed} | {total.failed} | {total.skipped} | {total.seconds:.0f} |")
    return "\n".join(lines) + "\n"


def write_record(
    minor: str,
    junit: Path | None,
    exit_status: int,
    command: str,
    session: str,
    seconds: float,
    load_before: float,
    directory: Path = evidence.EVIDENCE,
) -> Path:
    """docs/evidence/kubernetes-MINOR-DATE.md for one release's session (no JUnit file: no test ran)."""
    if minor not in RELEASES:
        raise MatrixError(f"--release {minor}: not a release the harness knows ({', '.join(RELEASES)})")
    files = counts_by_file(junit) if junit is not None and junit.exists() else {}
    body = record_body(minor, session, exit_status, files)
    load = (load_before, evidence.load_average())
    return evidence.write(
        f"kubernetes-{minor}", f"{SUITE} on Kubernetes {minor}", command, body, load, seconds, directory
    )


@dataclass(frozen=True)
class Record:
    """What the matrix shows of one record."""

    path: Path
    minor: str
    date: str  # the header's "YYYY-MM-DD HH:MM UTC"
    commit: str  # 40 hex digits, or "unknown"
    uncommitted: bool
    outcome: str
    total: Counts
    seconds: int


def _field(lines: Sequence[str], name: str, path: Path) -> str:
    prefix = f"- {name}: "
    for line in lines:
        if line.startswith(prefix):
            return line[len(prefix) :]
    raise MatrixError(f"{path}: no '{prefix.strip()}' line; rewrite it with scripts/test --all-versions")


def read_record(path: Path) -> Record:
    named = RECORD.fullmatch(path.name)
    if named is None:
        raise MatrixError(f"{path}: not named kubernetes-<minor>-<date>.md")
    lines = path.read_text().splitlines()
    commit = _field(lines, "commit", path)
    tests = re.fullmatch(r"(\d+) passed, (\d+) failed, (\d+) skipped", _field(lines, "tests", path))
    duration = re.fullmatch(r"(\d+) s", _field(lines, "duration", path))
    if tests is None or duration is None:
        raise MatrixError(f"{path}: its 'tests' or 'duration' line is not as scripts/test --all-versions writes it")
    return Record(
        path=path,
        minor=named["minor"],
        date=_field(lines, "date", path),
        commit=commit.split()[0],
        uncommitted="uncommitted" in commit,
        outcome=_field(lines, "outcome", path),
        total=Counts(int(tests[1]), int(tests[2]), int(tests[3])),
        seconds=int(duration[1]),
    )


def newest_records(directory: Path = evidence.EVIDENCE) -> dict[str, Record]:
    """The newest record of each release, by the date and time in its header."""
    newest: dict[str, Record] = {}
    for path in sorted(directory.glob("kubernetes-*.md")):
        if RECORD.fullmatch(path.name) is None:
            continue
        record = read_record(path)
        if record.minor not in newest or record.date > newest[record.minor].date:
            newest[record.minor] = record
    return newest


def _minutes(seconds: int) -> str:
    return f"{seconds // 60} min {seconds % 60} s"


def render(records: Mapping[str, Record], base: Path = evidence.REPO) -> str:
    """The matrix: a row per release the harness knows, from its newest record."""
    lines = [
        "<!-- generated by scripts/support-matrix from docs/evidence/kubernetes-<minor>-<date>.md: do not edit -->",
        "",
        f"| Kubernetes | `{SUITE}` | passed | failed | skipped | duration | commit | record |",
        "|---|---|--:|--:|--:|--:|---|---|",
    ]
    for minor, release in RELEASES.items():
        name = f"{release.version.lstrip('v')}{' (default)' if minor == DEFAULT_MINOR else ''}"
        record = records.get(minor)
        if record is None:
            lines.append(f"| {name} | no recorded run | | | | | | |")
            continue
        commit = f"`{record.commit[:12]}`{' with uncommitted changes' if record.uncommitted else ''}"
        link = f"[{record.date.split()[0]}]({record.path.relative_to(base).as_posix()})"
        t = record.total
        lines.append(
            f"| {name} | {record.outcome} | {t.passed} | {t.failed} | {t.skipped} | {_minutes(record.seconds)} "
            f"| {commit} | {link} |"
        )
    return "\n".join(lines) + "\n"


def _split(readme: str, path: Path) -> tuple[str, str, str]:
    """The README around the matrix: before BEGIN (with it), the block, from END on."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise MatrixError(f"{path}: no '{BEGIN}' ... '{END}' block for the support matrix")
    head = start + len(BEGIN)
    return readme[:head], readme[head:end], readme[end:]


def regenerate(readme: Path = README, directory: Path = evidence.EVIDENCE, base: Path = evidence.REPO) -> bool:
    """Rewrite the README's block from the newest records; True when it changed."""
    text = readme.read_text()
    before, block, after = _split(text, readme)
    wanted = "\n" + render(newest_records(directory), base)
    if block == wanted:
        return False
    readme.write_text(before + wanted + after)
    return True


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=60)


def newest_tag(repo: Path) -> str | None:
    """The newest tag HEAD descends from (`git describe --tags --abbrev=0`); None without one."""
    described = _git(repo, "describe", "--tags", "--abbrev=0", "HEAD")
    if described.returncode != 0:  # no tag reachable (or not a git repository)
        return None
    return described.stdout.strip() or None


def older_than_tag(records: Iterable[Record], repo: Path) -> list[str]:
    """Records whose commit does not contain the newest tag: they describe code older than it."""
    tag = newest_tag(repo)
    if tag is None:
        return []
    stale = []
    for record in records:
        if _git(repo, "merge-base", "--is-ancestor", tag, record.commit).returncode != 0:
            stale.append(f"{record.path.name}: its commit {record.commit[:12]} is older than the tag {tag}")
    return stale


def check(readme: Path = README, directory: Path = evidence.EVIDENCE, repo: Path = evidence.REPO) -> list[str]:
    """Where the README's matrix and the newest records disagree, and the records older than the newest tag."""
    records = newest_records(directory)
    problems = older_than_tag(records.values(), repo)
    _, block, _ = _split(readme.read_text(), readme)
    if block != "\n" + render(records, repo):
        problems.append(
            f"{readme.name}: the support matrix is not the one the records give; run scripts/support-matrix"
        )
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.supportmatrix", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="action", required=True)
    record = commands.add_parser("record", help="write a release's record from its pytest session's JUnit XML")
    record.add_argument("--release", required=True, help="the minor release, e.g. 1.34")
    record.add_argument("--junit", type=Path, help="pytest's --junitxml file (absent: no test ran)")
    record.add_argument("--exit-status", type=int, required=True, help="pytest's exit status")
    record.add_argument("--command", required=True, help="the command as the operator typed it")
    record.add_argument("--session", required=True, help="the pytest command this release ran")
    record.add_argument("--seconds", type=float, required=True)
    record.add_argument("--load-before", type=float, required=True)
    record.add_argument("--directory", type=Path, default=evidence.EVIDENCE)
    matrix = commands.add_parser("matrix", help="rewrite README.md's support matrix from the newest records")
    matrix.add_argument("--check", action="store_true", help="change nothing; exit 1 when README.md is not current")
    args = parser.parse_args(argv)
    try:
        if args.action == "record":
            path = write_record(
                args.release,
                args.junit,
                args.exit_status,
                args.command,
                args.session,
                args.seconds,
                args.load_before,
                args.directory,
            )
            print(path)
            return 0
        if args.check:
            problems = check()
            for problem in problems:
                print(f"scripts/support-matrix: {problem}", file=sys.stderr)
            return 1 if problems else 0
        changed = regenerate()
        print(f"README.md: support matrix {'rewritten' if changed else 'already current'}", file=sys.stderr)
        return 0
    except MatrixError as err:
        print(f"scripts/support-matrix: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
