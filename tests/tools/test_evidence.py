"""A run record (docs/evidence/NAME-DATE.md) is written by the command that measured it, with the
fixed header every record has: what, commit, date, machine, load, the exact command, duration."""

from __future__ import annotations

import re
from pathlib import Path

from harness import evidence


def test_a_record_has_the_fixed_header_then_the_commands_output(tmp_path: Path) -> None:
    path = evidence.write(
        "fidelity", "How often", "scripts/fidelity --clusters 30", "| a |\n|---|\n", (0.5, 1.25), 12.4, tmp_path
    )
    lines = path.read_text().splitlines()
    assert re.fullmatch(r"fidelity-\d{4}-\d{2}-\d{2}\.md", path.name)
    assert re.fullmatch(r"# How often, \d{4}-\d{2}-\d{2}", lines[0])
    assert re.fullmatch(r"- commit: [0-9a-f]{40}( \(with uncommitted changes\))?", lines[2])
    assert lines[3].startswith("- date: ") and lines[3].endswith(" UTC")
    assert re.fullmatch(r"- machine: \d+ cores, \d+ GiB, .+", lines[4])
    assert lines[5:8] == [
        "- load average (1 min) before and after: 0.5, 1.2",
        "- command: `scripts/fidelity --clusters 30`",
        "- duration: 12 s",
    ]
    assert lines[9:] == ["| a |", "|---|"]
