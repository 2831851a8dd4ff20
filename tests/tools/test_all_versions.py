"""scripts/test --all-versions: the end-to-end suite once per Kubernetes release the harness knows,
each session told its release, every release run even when one fails, and an outcome per release.
Collection only here (no control plane is started): the loop and what each session is told."""

from __future__ import annotations

import os
import subprocess

from harness.controlplane import RELEASES
from tests.fixtures import REPO


def all_versions(*pytest_args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NETQOS_CLUSTER_DIR": "/nonexistent/a-cluster-of-one-release", "NETQOS_KUBERNETES": "1.36"}
    return subprocess.run(
        [str(REPO / "scripts" / "test"), "--all-versions", *pytest_args, "-p", "no:cacheprovider"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_each_release_gets_a_session_of_its_own_and_an_outcome() -> None:
    done = all_versions("--collect-only", "tests/e2e/test_admission_policy.py")
    assert done.returncode == 0, done.stderr[-2000:]
    for minor, of in RELEASES.items():
        assert f"Kubernetes {minor} ({of.version})" in done.stdout  # the session's header: the release
        assert f"scripts/test --all-versions: Kubernetes {minor}: pytest tests/e2e" in done.stderr
        assert f"scripts/test --all-versions: {minor} passed" in done.stderr
    assert list(RELEASES) == ["1.34", "1.35", "1.36", "1.37"]


def test_a_failing_release_fails_the_run_after_every_release_ran() -> None:
    done = all_versions("--no-such-option")  # pytest refuses it at once, exit 4
    assert done.returncode == 1
    assert [line.split(": ", 1)[1].split(" (")[0] for line in done.stderr.splitlines() if " FAILED (" in line] == [
        f"{minor} FAILED" for minor in RELEASES
    ]
