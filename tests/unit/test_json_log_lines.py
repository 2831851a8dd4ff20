"""The JSON log line: the same bytes as python-json-logger's formatter, whichever path makes it."""

from __future__ import annotations

import datetime as dt
import logging
import sys
from pathlib import Path

import pytest
from pythonjsonlogger.json import JsonFormatter

from webhook.serving import logs

REVIEW = {
    "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
    "namespace": "team-a",
    "object_name": "web-7d4b9c-x2x",
    "operation": "CREATE",
    "dry_run": False,
    "decision": "mutated",
    "rules": ["latency-sensitive"],
    "duration_ms": 0.412,
    "policy_version": "abcdef012345",
}


def _library() -> logging.Formatter:
    """python-json-logger configured as the webhook configured it before `JsonLines`."""
    return JsonFormatter(
        "%(levelname)s %(name)s %(process)d %(message)s",
        rename_fields=logs._RENAMES,
        timestamp="time",
        json_ensure_ascii=False,
    )


def _record(msg: object = "review", args: tuple = (), exc: bool = False, stack: bool = False, **extra: object):
    exc_info = None
    if exc:
        try:
            raise ValueError("boom")
        except ValueError:
            exc_info = sys.exc_info()
    record = logging.getLogger("webhook.review").makeRecord(
        "webhook.review", logging.INFO, __file__, 1, msg, args, exc_info, extra=extra
    )
    if stack:
        record.stack_info = "Stack (most recent call last):\n  here"
    return record


# (what, record, whether the direct path makes it)
RECORDS = [
    ("a review", lambda: _record(**REVIEW), True),
    ("a refused request", lambda: _record("rejected a malformed review", status=400, error="bad"), True),
    ("no extras", lambda: _record("worker loaded the app"), True),
    ("%-arguments", lambda: _record("capacity: %d connections per worker", (2048,), fd_limit=4096), True),
    ("non-ASCII and control characters", lambda: _record(**{**REVIEW, "object_name": 'pod-é\n"x" ✓'}), True),
    ("None, nested values, a tuple", lambda: _record(detail={"a": [1, None]}, pair=(1, 2), gone=None), True),
    ("a value JSON has no type for", lambda: _record(path=Path("/etc/x"), when=dt.date(2026, 12, 4)), False),
    ("an exception", lambda: _record("failed", exc=True), False),
    ("a stack", lambda: _record("here", stack=True), False),
    ("a dict message", lambda: _record({"event": "x", "n": 1}), False),
]


@pytest.mark.parametrize(("what", "make", "direct"), RECORDS, ids=[r[0] for r in RECORDS])
def test_a_line_is_byte_for_byte_what_python_json_logger_writes(what, make, direct):
    record = make()
    assert logs.JsonLines().format(record) == _library().format(record), what


@pytest.mark.parametrize(("what", "make", "direct"), RECORDS, ids=[r[0] for r in RECORDS])
def test_ordinary_records_take_the_direct_path_and_the_rest_the_librarys(monkeypatch, what, make, direct):
    taken = []
    general = JsonFormatter.format
    monkeypatch.setattr(JsonFormatter, "format", lambda self, record: taken.append(1) or general(self, record))
    logs.JsonLines().format(make())
    assert bool(taken) is not direct, f"{what}: {'library' if taken else 'direct'} path"


def test_serve_writes_json_lines_through_this_formatter():
    assert isinstance(logs.formatter("json"), logs.JsonLines)
