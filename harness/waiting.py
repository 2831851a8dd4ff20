"""Waiting for an event, not for a time: poll a condition (a metric, a log line, a count) until
it holds, with a deadline that turns a missed event into a failure naming it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def until(condition: Callable[[], T], what: str, timeout: float = 20.0, interval: float = 0.05) -> T:
    """The first true value `condition()` returns, polled every `interval` seconds; after
    `timeout` seconds, AssertionError saying `what` did not happen. The deadline only bounds a
    failure: a healthy run waits exactly as long as the event takes."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(interval)
