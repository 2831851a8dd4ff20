"""scripts/test --help (and -h): the script's own usage, printed at once and installing nothing:
the test layers, the markers as pyproject.toml declares them, --all-versions, and that every
other argument is pytest's."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.fixtures import REPO

LAYERS = ("tests/unit", "tests/http", "tests/process", "tests/tools", "tests/e2e", "tests/e2e/realnodes")


def markers() -> list[str]:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    return [m.partition(":")[0] for m in declared]


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_is_the_scripts_usage_and_installs_nothing(tmp_path: Path, flag: str) -> None:
    venv = tmp_path / "venv"  # where scripts/venv would create and install, were it run
    done = subprocess.run(
        [str(REPO / "scripts" / "test"), flag],
        env={**os.environ, "VENV": str(venv)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: scripts/test [--all-versions] [PYTEST ARGS...]\n")
    shown = [line.split() for line in done.stdout.splitlines()]
    assert [words[0] for words in shown if words and words[0].startswith("tests/")] == list(LAYERS)
    assert all((REPO / layer).is_dir() for layer in LAYERS)
    assert [words[0] for words in shown if words and words[0] in markers()] == markers()
    assert "--all-versions" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("Every other argument goes to pytest as it is")
    assert not venv.exists() and done.stderr == ""
