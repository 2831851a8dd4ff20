"""scripts/run, README's command to run the webhook: it serves from the repository (its certs/),
and a relative path given to a file flag is read from the caller's directory, as with any command."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.fixtures import REPO


@pytest.mark.parametrize("form", [["--config", "bad.yaml"], ["--config=bad.yaml"]], ids=["two words", "one word"])
def test_a_relative_policy_path_is_the_callers(tmp_path: Path, form: list[str]) -> None:
    (tmp_path / "bad.yaml").write_text("rules: 5\n")  # refused at start: the server never listens
    done = subprocess.run(
        [str(REPO / "scripts" / "run"), *form], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"policy file {tmp_path}/bad.yaml: rules: must be a non-empty list" in done.stderr
