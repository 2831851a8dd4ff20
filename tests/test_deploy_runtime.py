"""The server runs under the Deployment's restrictions: a read-only root filesystem with only a
memory-backed /tmp writable, no capabilities, no privilege escalation, the Deployment's own
command line.

Without Docker, a private mount namespace stands in for the container: / is remounted read-only
inside it (the host is untouched), a tmpfs goes on /tmp as the emptyDir does, the mounted Secret
and ConfigMap are a directory bound at /mnt, and the server drops every capability with
no_new_privs set. It keeps uid 0 only because this machine's Python lives under /root (mode 0700);
without capabilities, file permissions and the read-only mounts still bind it. Needs root and
`unshare`; skipped elsewhere. It listens on loopback only.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from support import REPO, fixture

from webhook.certs import generate

pytestmark = pytest.mark.e2e

DEPLOYMENT = REPO / "deploy/base/deployment.yaml"
MOUNTS = {"/tls/": "/mnt/tls/", "/config/": "/mnt/config/"}


def _can_unshare() -> str | None:
    if os.geteuid() != 0:
        return "needs root to make a private mount namespace"
    for tool in ("unshare", "setpriv", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not Path("/mnt").is_dir():
        return "/mnt does not exist to bind the volumes at"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "mount", "-o", "remount,bind,ro", "/"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"cannot remount / read-only in a mount namespace here: {probe.stderr.strip()}"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _container() -> dict:
    (container,) = yaml.safe_load(DEPLOYMENT.read_text())["spec"]["template"]["spec"]["containers"]
    return container


def _start(volumes: Path, port: int, with_tmp: bool) -> subprocess.Popen:
    container = _container()
    args = []
    for arg in container["args"]:
        for path, moved in MOUNTS.items():
            arg = arg.replace(path, moved)
        if arg.startswith("--bind="):
            arg = f"--bind=127.0.0.1:{port}"
        args.append(arg)
    env = {e["name"]: e["value"] for e in container.get("env", [])}
    env.update(PATH="/usr/bin:/bin", HOME="/nonexistent", PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, "-m", "webhook", *container["command"][1:], *args]
    script = "\n".join([
        "set -e",
        f"mount --bind {shlex.quote(str(volumes))} /mnt",
        "mount -o remount,bind,ro /",
        "mount -t tmpfs -o size=16m,mode=1777 tmpfs /tmp" if with_tmp else ":",
        "cd /",
        "exec setpriv --bounding-set=-all --inh-caps=-all --no-new-privs env -i "
        + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(command),
    ])
    return subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "bash", "-c", script],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )


def _stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
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
    generate(tmp_path / "tls", hosts=["127.0.0.1"])
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "deploy/base/policy.yaml", tmp_path / "config/policy.yaml")
    return tmp_path


def test_server_serves_with_a_read_only_root_and_only_tmp_writable(volumes: Path) -> None:
    port = _free_port()
    context = ssl.create_default_context(cafile=str(volumes / "tls/ca.crt"))
    proc = _start(volumes, port, with_tmp=True)
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
    proc = _start(volumes, _free_port(), with_tmp=False)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    log = _stop(proc)
    assert "No usable temporary directory" in log, log
