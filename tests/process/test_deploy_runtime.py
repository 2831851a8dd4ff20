"""The server runs under the Deployment's restrictions: a read-only root filesystem with only
its emptyDir writable, no capabilities, no privilege escalation, the Deployment's own command
line and environment.

Without Docker, a private mount namespace stands in for the container: / is remounted read-only
inside it (the host is untouched), and each volume of the Deployment becomes a directory under the
test's temporary directory: the Secret and the ConfigMap as files (read-only with the rest of /),
each emptyDir as a fresh tmpfs mounted there. Every path in the container's arguments and
environment that lies under a volume's mountPath is moved to that directory, so TMPDIR=/tmp
becomes the tmpfs (the host's own /tmp stays where it is, read-only, because this repository and
its virtual environment may live under it). The server drops every capability with no_new_privs
set. It keeps uid 0 only because this machine's Python may live under /root (mode 0700); without
capabilities, file permissions and the read-only mounts still bind it. Needs root and `unshare`;
skipped elsewhere. It listens on loopback only.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from harness.server import free_port
from tests.fixtures import REPO, fixture
from webhook.certs import generate

pytestmark = pytest.mark.process

DEPLOYMENT = REPO / "deploy/base/deployment.yaml"


def _can_unshare() -> str | None:
    if os.geteuid() != 0:
        return "needs root to make a private mount namespace"
    for tool in ("unshare", "setpriv", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "mount", "-o", "remount,bind,ro", "/"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe.returncode != 0:
        return f"cannot remount / read-only in a mount namespace here: {probe.stderr.strip()}"
    return None


def _pod() -> tuple[dict, dict]:
    spec = yaml.safe_load(DEPLOYMENT.read_text())["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    return spec, container


def _start(volumes: Path, port: int, with_empty_dirs: bool) -> subprocess.Popen:
    spec, container = _pod()
    empty_dirs = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
    moves = {m["mountPath"].rstrip("/"): str(volumes / m["name"]) for m in container["volumeMounts"]}

    def moved(value: str) -> str:
        """`value` (or the value of `--flag=value`) with its mountPath prefix moved, once."""
        flag, eq, path = value.partition("=") if value.startswith("--") else ("", "", value)
        for mount, there in moves.items():
            if path == mount or path.startswith(mount + "/"):
                return flag + eq + there + path[len(mount) :]
        return value

    args = [moved(a) for a in container["args"]]
    args = [f"--bind=127.0.0.1:{port}" if a.startswith("--bind=") else a for a in args]
    env = {e["name"]: moved(e["value"]) for e in container.get("env", [])}
    env.update(PATH="/usr/bin:/bin", HOME="/nonexistent", PYTHONDONTWRITEBYTECODE="1")
    mounts = [
        f"mount -t tmpfs -o size=16m,mode=1777 tmpfs {shlex.quote(str(volumes / m['name']))}"
        for m in container["volumeMounts"]
        if m["name"] in empty_dirs and with_empty_dirs
    ]
    command = [sys.executable, "-m", "webhook", *container["command"][1:], *args]
    script = "\n".join(
        [
            "set -e",
            "mount -o remount,bind,ro /",
            *mounts,
            "cd /",
            "exec setpriv --bounding-set=-all --inh-caps=-all --no-new-privs env -i "
            + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
            + " "
            + shlex.join(command),
        ]
    )
    return subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "bash", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        # A worker still booting when SIGTERM arrives misses it and lingers (as in harness/server.py).
        out, _ = proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=15)
    return out


def _get(url: str, context: ssl.SSLContext, body: bytes | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"} if body else {})
    with urllib.request.urlopen(request, context=context, timeout=5) as response:
        return response.status, json.loads(response.read())


@pytest.fixture
def volumes(tmp_path: Path) -> Path:
    reason = _can_unshare()
    if reason:
        pytest.skip(reason)
    spec, container = _pod()
    for volume in spec["volumes"]:
        (tmp_path / volume["name"]).mkdir()
        if volume.get("secret", {}).get("secretName") == "netqos-webhook-tls":
            generate(tmp_path / volume["name"], hosts=["127.0.0.1"])
        elif "configMap" in volume:
            shutil.copy(REPO / "deploy/base/policy.yaml", tmp_path / volume["name"] / "policy.yaml")
    return tmp_path


def test_server_serves_with_a_read_only_root_and_only_its_empty_dir_writable(volumes: Path) -> None:
    port = free_port()
    context = ssl.create_default_context(cafile=str(volumes / "tls/ca.crt"))
    proc = _start(volumes, port, with_empty_dirs=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, body = _get(f"https://127.0.0.1:{port}/readyz", context)
                break
            except (urllib.error.URLError, ConnectionError, ssl.SSLError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the server did not come up:\n{_stop(proc)}")
                time.sleep(0.2)
        assert (status, body["status"]) == (200, "ready")
        assert _get(f"https://127.0.0.1:{port}/healthz", context)[0] == 200
        review = fixture("review-create-unlabelled.json")
        review["request"]["object"]["metadata"].setdefault("labels", {})["qos"] = "latency-sensitive"
        status, answer = _get(f"https://127.0.0.1:{port}/mutate", context, json.dumps(review).encode())
        assert status == 200 and answer["response"]["allowed"] is True and answer["response"]["patch"]
    finally:
        log = _stop(proc)
    assert "Read-only file system" not in log, log


def test_without_the_tmp_volume_the_server_cannot_start_a_worker(volumes: Path) -> None:
    # Why the Deployment mounts an emptyDir at /tmp: gunicorn's worker heartbeat file.
    proc = _start(volumes, free_port(), with_empty_dirs=False)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    log = _stop(proc)
    assert "No usable temporary directory" in log, log
