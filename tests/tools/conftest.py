"""Tool tests: the benchmark, the soak script and the demo, each in a short smoke run from the
repository root, as a user runs them. No timing is asserted; each run is bounded by a timeout."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from tests.fixtures import REPO

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def run_python() -> Run:
    """Run `python ARGS...` (the test's interpreter) from the repository root; output captured."""

    def run(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)

    return run
