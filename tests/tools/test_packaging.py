"""The package installs as scripts/venv installs it (pip, editable) without a warning, and the
installed command runs the repository's code from any directory."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.fixtures import REPO


def test_the_editable_install_prints_no_warning_and_imports_the_checkout(tmp_path: Path) -> None:
    # A copy of what the install reads, so the build's egg-info lands in tmp_path, not the checkout.
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, project / name)
    shutil.copytree(REPO / "webhook", project / "webhook", ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # pip from the test's environment, installing into the new one: scripts/venv's flags, minus
    # the dependencies (the build itself, in pip's isolated environment, is what is checked).
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--disable-pip-version-check"]
        + ["--no-deps", "-e", str(project)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    output = done.stdout + done.stderr
    assert "Warning" not in output and "warning" not in output, output[-3000:]
    imported = subprocess.run(
        [str(python), "-c", "import webhook; print(webhook.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert imported.stdout.strip() == str(project / "webhook" / "__init__.py")
