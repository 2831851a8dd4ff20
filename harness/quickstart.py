"""The README's Quick start as something to run: the commands of its tagged block, a copy of the
working tree as a fresh clone of it holds, and one `bash -euo pipefail` over those commands that
times each line and names the line that failed.

The tagged block is the fenced block right after the line `<!-- quickstart -->` in README.md. Its
commands are its lines without their comments (bash's rule: a `#` that begins a word, outside
quotes) and without blank lines; they run in one shell, in order, so an `export` or `eval` on one
line holds for the next, and the first that exits non-zero ends the run (`-e`), as it stops a
reader.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

MARKER = "<!-- quickstart -->"
FENCES = ("```", "~~~")
# Written before and after each command, to a file the commands never see as an open descriptor:
# "start N SECONDS" and "end N SECONDS", SECONDS being bash's $EPOCHREALTIME (bash 5).
MARKS_VARIABLE = "__quickstart_marks"


class QuickstartError(ValueError):
    """README.md has no runnable tagged block; the message says what is missing."""


def commands(readme: str) -> list[str]:
    """The commands of the fenced block after the `<!-- quickstart -->` line of `readme`."""
    lines = readme.splitlines()
    try:
        at = next(n for n, line in enumerate(lines) if line.strip() == MARKER)
    except StopIteration:
        raise QuickstartError(f"no line {MARKER} in the README") from None
    opening = next((n for n in range(at + 1, len(lines)) if lines[n].strip()), None)
    if opening is None or not lines[opening].lstrip().startswith(FENCES):
        raise QuickstartError(f"the line after {MARKER} does not open a fenced code block")
    fence = lines[opening].lstrip()[:3]
    body: list[str] = []
    for line in lines[opening + 1 :]:
        if line.lstrip().startswith(fence):
            found = [command for command in (strip_comment(text) for text in body) if command]
            if not found:
                raise QuickstartError(f"the code block after {MARKER} holds no command")
            return found
        body.append(line)
    raise QuickstartError(f"the code block after {MARKER} is never closed")


def strip_comment(line: str) -> str:
    """`line` without its comment, by bash's rule: `#` at the start of a word, outside quotes."""
    quote: str | None = None
    escaped = False
    for at, char in enumerate(line):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote is not None:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (at == 0 or line[at - 1].isspace()):
            return line[:at].rstrip()
    return line.rstrip()


def copy_working_tree(repo: Path, destination: Path) -> int:
    """Copy what a clone of `repo` would hold if its working tree were committed: the tracked files
    that still exist and the untracked ones git does not ignore (no .venv, no certs/, no caches).
    Returns the number of files copied."""
    listed = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    copied = 0
    for name in sorted(set(filter(None, listed.split("\0")))):
        source = repo / name
        if not source.is_symlink() and not source.is_file():
            continue  # deleted in the working tree, or a submodule's directory
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
        copied += 1
    return copied


@dataclass(frozen=True)
class Line:
    """One command of the run: how long it took, and whether it finished."""

    number: int  # 1-based, in the order of the block
    command: str
    seconds: float | None  # None: never started
    finished: bool  # exited 0


@dataclass(frozen=True)
class Run:
    lines: list[Line]
    exit_code: int  # bash's: the failed command's, or -SIGNAL when it was stopped at the timeout
    output: str  # stdout and stderr of every command, interleaved
    timed_out: bool

    @property
    def failed(self) -> Line | None:
        """The line that ended the run: started and not finished."""
        return next((line for line in self.lines if line.seconds is not None and not line.finished), None)

    def failure(self) -> str | None:
        """None when every line exited 0; else the line that ended the run, and how."""
        failed = self.failed
        if failed is None and self.exit_code == 0:
            return None
        how = "was stopped at the timeout" if self.timed_out else f"exited {self.exit_code}"
        if failed is None:
            return f"bash {how} outside the Quick start's lines"
        return f"the Quick start's line {failed.number}, `{failed.command}`, {how}"

    def timings(self) -> str:
        """One row per line: its seconds (or why it has none) and the command."""
        rows = []
        for line in self.lines:
            if line.seconds is None:
                took = "not run"
            else:
                took = f"{line.seconds:7.1f} s" + ("" if line.finished else " FAILED")
            rows.append(f"{line.number:>2}  {took:<15} {line.command}")
        return "\n".join(rows)


def script(commands: Sequence[str]) -> str:
    """The bash program that runs `commands` in order, each between its two marks."""
    parts = []
    for number, command in enumerate(commands, 1):
        parts += [
            f'printf "start {number} %s\\n" "$EPOCHREALTIME" >>"${MARKS_VARIABLE}"',
            command,
            f'printf "end {number} %s\\n" "$EPOCHREALTIME" >>"${MARKS_VARIABLE}"',
        ]
    return "\n".join(parts) + "\n"


def run(commands: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float) -> Run:
    """Run `commands` in one `bash -euo pipefail` in `cwd` with exactly `env`. Output goes to a
    file, not a pipe, so a daemon a command leaves running cannot hold the run open; at `timeout`
    seconds the whole process group is killed."""
    with tempfile.TemporaryDirectory(prefix="quickstart-") as scratch:
        program = Path(scratch) / "quickstart.sh"
        marks = Path(scratch) / "marks"
        log = Path(scratch) / "output"
        program.write_text(f"{MARKS_VARIABLE}={marks}\n" + script(commands))
        marks.touch()
        with open(log, "wb") as out:
            process = subprocess.Popen(
                ["bash", "-euo", "pipefail", str(program)],
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            timed_out = False
            try:
                exit_code = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(process.pid, signal.SIGKILL)
                exit_code = process.wait()
            stopped = time.time()
        lines = _lines(commands, marks.read_text(), stopped)
        return Run(lines, exit_code, log.read_text(errors="replace"), timed_out)


def _lines(commands: Sequence[str], marks: str, stopped: float) -> list[Line]:
    """The lines of a run from its marks; `stopped`: when bash exited (seconds since the epoch,
    as $EPOCHREALTIME counts), the end of the line that never wrote its end mark."""
    started: dict[int, float] = {}
    ended: dict[int, float] = {}
    for mark in marks.splitlines():
        kind, which, seconds = mark.split()
        (started if kind == "start" else ended)[int(which)] = float(seconds)
    lines = []
    for number, command in enumerate(commands, 1):
        begin = started.get(number)
        end = ended.get(number)
        if begin is None:
            lines.append(Line(number, command, None, False))
        elif end is None:
            lines.append(Line(number, command, max(stopped - begin, 0.0), False))
        else:
            lines.append(Line(number, command, end - begin, True))
    return lines
