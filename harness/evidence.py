"""Dated run records under docs/evidence/, written by the command that measured them: a fixed
header (what was measured, commit, date, machine, load average, the exact command, duration) and
the command's own output. User documents state the current figure and link the newest record.

`python -m harness.evidence --name N --title T --command C --seconds S --load-before L` writes one
from a shell script, the body (markdown) read from standard input.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVIDENCE = REPO / "docs" / "evidence"
# What a run measures: a change under any of these makes the record's commit "with uncommitted changes".
MEASURED = ("webhook", "harness", "benchmarks", "tests", "deploy", "scripts", "Dockerfile", "pyproject.toml")


def commit() -> str:
    """HEAD, and whether the code the run measured (`MEASURED`) had uncommitted changes."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", *MEASURED], capture_output=True, text=True, cwd=REPO
    ).stdout.strip()
    return f"{head or 'unknown'}{' (with uncommitted changes)' if dirty else ''}"


def load_average() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


def write(
    name: str,
    title: str,
    command: str,
    body: str,
    load: tuple[float, float],
    seconds: float,
    directory: Path = EVIDENCE,
) -> Path:
    """`directory`/NAME-DATE.md: "# TITLE, DATE", the header, then `body` (markdown)."""
    now = dt.datetime.now(dt.UTC)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    lines = [
        f"# {title}, {now:%Y-%m-%d}",
        "",
        f"- commit: {commit()}",
        f"- date: {now:%Y-%m-%d %H:%M} UTC",
        f"- machine: {os.cpu_count()} cores, {memory:.0f} GiB, {platform.system()} {platform.release()}",
        f"- load average (1 min) before and after: {load[0]:.1f}, {load[1]:.1f}",
        f"- command: `{command}`",
        f"- duration: {seconds:.0f} s",
        "",
        body.rstrip("\n"),
        "",
    ]
    path = directory / f"{name}-{now:%Y-%m-%d}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.evidence", description="Write a run record; its body is read from standard input."
    )
    parser.add_argument("--name", required=True, help="the record's file name before the date")
    parser.add_argument("--title", required=True)
    parser.add_argument("--command", required=True, help="the exact command that measured it")
    parser.add_argument("--seconds", type=float, required=True, help="how long it ran")
    parser.add_argument("--load-before", type=float, required=True, help="the 1-minute load average when it started")
    parser.add_argument("--directory", type=Path, default=EVIDENCE)
    args = parser.parse_args(argv)
    load = (args.load_before, load_average())
    path = write(args.name, args.title, args.command, sys.stdin.read(), load, args.seconds, args.directory)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
