"""scripts/run, README's command to run the webhook: it serves from the repository (its certs/),
and a relative path given to a file flag is read from the caller's directory, as with any command."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
import time
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


def first_log_lines(tty: bool, *args: str, count: int = 2) -> list[str]:
    """The first `count` lines scripts/run writes to stderr, that stderr a terminal (a pseudo-
    terminal) or a pipe; the server is stopped afterwards (its process group, which this started)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    reader, writer = pty.openpty() if tty else os.pipe()
    server = subprocess.Popen(
        [str(REPO / "scripts" / "run"), "--bind", f"127.0.0.1:{port}", "--workers", "1", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=writer,
        start_new_session=True,
    )
    os.close(writer)
    text = b""
    try:
        deadline = time.monotonic() + 300
        while text.count(b"\n") < count and time.monotonic() < deadline:
            ready, _, _ = select.select([reader], [], [], 5)
            if ready:
                chunk = os.read(reader, 4096)
                if not chunk:
                    break
                text += chunk
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
        os.close(reader)
    return text.decode().replace("\r\n", "\n").splitlines()[:count]


TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING|ERROR) [\w.]+: \S")


def test_on_a_terminal_the_server_logs_one_text_line_per_event() -> None:
    lines = first_log_lines(tty=True)
    assert len(lines) == 2 and all(TEXT_LINE.match(line) for line in lines), lines


@pytest.mark.parametrize("tty", [False, True], ids=["stderr a pipe", "--log-format json on a terminal"])
def test_elsewhere_or_when_asked_every_line_is_json(tty: bool) -> None:
    lines = first_log_lines(tty, *(["--log-format", "json"] if tty else []))
    assert len(lines) == 2 and all(isinstance(json.loads(line), dict) for line in lines), lines
