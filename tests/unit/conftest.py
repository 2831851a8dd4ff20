"""Unit tests: the pure core, table by table. No sockets, no subprocesses, no server.

The guard below makes that a checked property rather than a habit: a unit test that dials a
socket or starts a process fails, and belongs in tests/process.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest


def _refuse(what: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a unit test must not {what}; move it to tests/process")

    return refuse


@pytest.fixture(autouse=True)
def no_sockets_or_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _refuse("connect a socket"))
    monkeypatch.setattr(subprocess, "Popen", _refuse("start a process"))
    yield
