"""How the README's Quick start is read and run (harness.quickstart), without a cluster: the
commands of the block after `<!-- quickstart -->` without their comments, and a run that stops at
the first failing line and names it. tests/e2e/realnodes/test_quickstart.py runs the README's
block itself on real nodes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import quickstart
from tests.fixtures import REPO


@pytest.mark.parametrize(
    ("line", "command"),
    [
        ("scripts/venv   # .venv", "scripts/venv"),
        ('eval "$(scripts/cluster env)"  # KUBECONFIG', 'eval "$(scripts/cluster env)"'),
        ('echo "a # b"', 'echo "a # b"'),
        ("echo '# not a comment'", "echo '# not a comment'"),
        ("echo a#b", "echo a#b"),
        ("echo \\# x", "echo \\# x"),
        ("# a line that is only a comment", ""),
    ],
)
def test_a_comment_is_a_word_that_starts_with_a_hash_outside_quotes(line: str, command: str) -> None:
    assert quickstart.strip_comment(line) == command


def test_the_block_after_the_marker_gives_its_commands_without_comments_or_blank_lines() -> None:
    readme = "# Title\n\n```sh\nnot this\n```\n\n<!-- quickstart -->\n```sh\na --x  # one\n\n# two\nb\n```\n"
    assert quickstart.commands(readme) == ["a --x", "b"]


@pytest.mark.parametrize(
    ("readme", "problem"),
    [
        ("```sh\na\n```\n", "no line <!-- quickstart -->"),
        ("<!-- quickstart -->\nprose\n```sh\na\n```\n", "does not open a fenced code block"),
        ("<!-- quickstart -->\n```sh\na\n", "is never closed"),
        ("<!-- quickstart -->\n```sh\n# only comments\n```\n", "holds no command"),
    ],
)
def test_a_readme_without_a_runnable_block_is_refused_saying_why(readme: str, problem: str) -> None:
    with pytest.raises(quickstart.QuickstartError, match=problem):
        quickstart.commands(readme)


def test_the_readme_has_a_quick_start_block() -> None:
    assert quickstart.commands((REPO / "README.md").read_text())


def test_a_run_shares_one_shell_stops_at_the_first_failing_line_and_names_it(tmp_path: Path) -> None:
    lines = ["export GREETING=hello", 'test "$GREETING" = hello', "false | cat", "echo never"]
    run = quickstart.run(lines, tmp_path, dict(os.environ), timeout=30)
    assert [line.finished for line in run.lines] == [True, True, False, False]
    assert run.lines[3].seconds is None
    assert run.failure() == "the Quick start's line 3, `false | cat`, exited 1"
    assert "never" not in run.output


def test_a_run_that_passes_the_timeout_is_stopped_and_names_the_line(tmp_path: Path) -> None:
    run = quickstart.run(["true", "sleep 30"], tmp_path, dict(os.environ), timeout=1)
    assert run.timed_out
    assert run.failure() == "the Quick start's line 2, `sleep 30`, was stopped at the timeout"


def test_a_run_where_every_line_exits_0_has_no_failure_and_times_each_line(tmp_path: Path) -> None:
    run = quickstart.run(["true", "sleep 0.2"], tmp_path, dict(os.environ), timeout=30)
    assert run.failure() is None
    assert all(line.finished for line in run.lines)
    assert run.lines[1].seconds is not None and run.lines[1].seconds >= 0.2


def test_the_copy_of_the_working_tree_holds_what_a_clone_would(tmp_path: Path) -> None:
    """Tracked and untracked files that git does not ignore; never the virtual environment."""
    copied = quickstart.copy_working_tree(REPO, tmp_path)
    assert copied > 0
    assert (tmp_path / "README.md").read_text() == (REPO / "README.md").read_text()
    assert os.access(tmp_path / "scripts" / "cluster", os.X_OK)
    assert not (tmp_path / ".venv").exists()
