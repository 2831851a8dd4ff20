"""review and manifests warn about a policy whose rule selects every pod, and still work."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.fixtures import REPO
from tests.unit.test_policy_warnings import EVERY_POD, WARNING


@pytest.fixture
def every_pod_file(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(EVERY_POD))
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["review", str(REPO / "deploy" / "examples" / "test-pod.yaml"), "-o", "patch"],
        ["manifests"],
    ],
)
def test_review_and_manifests_warn_on_stderr_and_still_work(argv, every_pod_file):
    done = subprocess.run(
        [sys.executable, "-m", "webhook", *argv, "--config", str(every_pod_file)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"Warning: policy {every_pod_file}: {WARNING}" in done.stderr
    assert done.stdout
