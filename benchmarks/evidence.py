"""Dated run records under docs/evidence/, written by the command that measured them: a fixed
header (what was measured, commit, date, machine, load average, the exact command, duration) and
the command's own output. User documents state the current figure and link the newest record."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVIDENCE = REPO / "docs" / "evidence"


def commit() -> str:
    """HEAD, and whether the code the run measured (webhook/, benchmarks/, tests/) had uncommitted changes."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "webhook", "benchmarks", "tests"], capture_output=True, text=True, cwd=REPO
    ).stdout.strip()
    return f"{head or 'unknown'}{' (with uncommitted changes)' if dirty else ''}"


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
