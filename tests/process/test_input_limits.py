"""The command line bounds what it reads: an endless stream (/dev/zero, /dev/urandom) or a file of
hundreds of MB ends within seconds, in one line naming the limit (exit 2), reading at most one
byte past it: 3 MiB for a file of one object (the API server's limit for a request body), 128 MiB
for a file of objects and for all of `review`'s files together."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures import REPO
from webhook.documents import INPUT_LIMIT, OBJECT_LIMIT

POD = str(REPO / "deploy" / "examples" / "test-pod.yaml")
NODES = str(REPO / "deploy" / "examples" / "nodes.yaml")
MEMORY_CAP = 2 << 30  # a regression that reads everything dies here, not in the shared machine's memory


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def netqos(*args: str, stdin: str | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    with open(stdin or "/dev/null", "rb") as source:
        done = subprocess.run(
            [sys.executable, "-m", "webhook", *args],
            stdin=source,
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "", "KUBECONFIG": "/nonexistent/kubeconfig"},
            preexec_fn=_capped,
        )
    return done, time.monotonic() - started


@pytest.fixture(scope="module")
def huge(tmp_path_factory) -> str:
    """A 300 MB file (sparse: no disk is spent on it)."""
    path = tmp_path_factory.mktemp("huge") / "huge.yaml"
    with open(path, "wb") as fh:
        fh.truncate(300_000_000)
    return str(path)


ONE_OBJECT = "larger than 3 MiB, the limit for a file of one object"
OBJECTS = "larger than 128 MiB, the limit for review's files together"
# command line ({huge}: the 300 MB file), stdin, the file the line names, the limit it names
CASES = [
    ("review /dev/zero", None, "input file /dev/zero", OBJECTS),
    ("review {huge}", None, "input file {huge}", OBJECTS),
    ("review -", "/dev/zero", "input file -", OBJECTS),
    ("review --config /dev/urandom " + POD, None, "policy file /dev/urandom", ONE_OBJECT),
    ("review --config {huge} " + POD, None, "policy file {huge}", ONE_OBJECT),
    ("explain --pod /dev/zero --nodes " + NODES, None, "pod file /dev/zero", ONE_OBJECT),
    ("explain --pod " + POD + " --nodes /dev/zero", None, "nodes file /dev/zero", "larger than 128 MiB"),
    ("manifests --config /dev/urandom", None, "policy file /dev/urandom", ONE_OBJECT),
    ("manifests --ca-bundle /dev/zero", None, "--ca-bundle file /dev/zero", ONE_OBJECT),
    ("status --kubeconfig /dev/zero", None, "kubeconfig file /dev/zero", ONE_OBJECT),
]


@pytest.mark.parametrize(("command", "stdin", "named", "limit"), CASES, ids=[c[0].split(" /")[0] for c in CASES])
def test_an_endless_or_huge_input_ends_in_seconds_naming_the_limit(huge, command, stdin, named, limit):
    done, seconds = netqos(*command.format(huge=huge).split(), stdin=stdin)
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert named.format(huge=huge) in done.stderr and limit in done.stderr
    assert seconds < 30


def test_the_limit_of_reviews_files_counts_them_together(tmp_path):
    files = []
    for name in ("a.yaml", "b.yaml"):  # 100 MB each: each alone within the limit, not both
        with open(tmp_path / name, "wb") as fh:
            fh.truncate(100_000_000)
        files.append(str(tmp_path / name))
    done, _ = netqos("review", *files)
    assert done.returncode == 2
    assert f"input file {files[1]}: larger than {INPUT_LIMIT - 100_000_000} bytes, what is left of the limit" in (
        done.stderr
    )


def test_a_file_at_the_limit_is_read(tmp_path: Path):
    policy = (REPO / "deploy" / "base" / "policy.yaml").read_bytes()
    padded = tmp_path / "policy.yaml"
    padded.write_bytes(policy + b"#" * (OBJECT_LIMIT - len(policy) - 1) + b"\n")
    done, _ = netqos("review", "--config", str(padded), POD, "-o", "patch")
    assert done.returncode == 0, done.stderr
