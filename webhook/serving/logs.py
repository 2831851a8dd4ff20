"""Logging setup shared by the webhook's own loggers and gunicorn's.

Two formats, chosen with `serve --log-format`:
- `json` (the default for a cluster): one JSON object per line, made by python-json-logger. Fields
  passed as `extra=` become top-level keys, so a review line reads
  `{"time": ..., "level": "INFO", "logger": "webhook.review", "message": "review", "uid": ..., ...}`.
- `text`: `TIME LEVEL LOGGER: MESSAGE key=value ...`, the same fields for a person at a terminal
  (`scripts/run` picks it when its stderr is a terminal).

gunicorn's error log (start-up, worker boots and deaths) gets the same formatter through
`gunicorn_logger`. gunicorn's access log stays off: the app writes one line per review instead, and
an access line would cost CPU on every request.

`name` is a LogRecord attribute (the logger's name), so a review's object name travels as
`object_name` and is renamed to `name` in the JSON output; the logger's name is `logger`.

Every review writes a line, so its cost is on every review's latency: `JsonLines` makes the
ordinary line directly, the same bytes as python-json-logger's general path at about 30,000 fewer
instructions per review (docs/performance.md).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from gunicorn import glogging
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from webhook.names import LOG_FORMATS, LOG_LEVELS

FORMATS = LOG_FORMATS
LEVELS = LOG_LEVELS
_RENAMES = {"asctime": "time", "levelname": "level", "name": "logger", "object_name": "name"}
_RESERVED = frozenset(RESERVED_ATTRS) | {"taskName", "message"}
_JSON_FORMAT = "%(levelname)s %(name)s %(process)d %(message)s"
# What python-json-logger leaves out of the extras: its reserved attributes and the format's fields.
_NOT_EXTRAS = frozenset(RESERVED_ATTRS) | {"levelname", "name", "process", "message"}


class TextFormatter(logging.Formatter):
    """`TIME LEVEL LOGGER: MESSAGE` followed by every `extra=` field as key=value."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = [
            f"{_RENAMES.get(k, k)}={_text(v)}"
            for k, v in record.__dict__.items()
            if k not in _RESERVED and not k.startswith("_")
        ]
        if not extras:
            return line
        head, sep, tail = line.partition("\n")  # keep a traceback after the fields
        return f"{head} {' '.join(extras)}{sep}{tail}"


def _text(value: Any) -> str:
    """A field's value as a person reads it on one line: a list comma-separated, a map as compact
    JSON (never Python's repr), a boolean as JSON writes it."""
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return str(value).lower() if isinstance(value, bool) else str(value)


class JsonLines(JsonFormatter):
    """python-json-logger's JSON line, the same bytes, made directly for the ordinary record.

    The ordinary record (a message string, no exception or stack, `extra=` values that JSON has
    types for) is what every review logs; the library's general path (BaseJsonFormatter.add_fields,
    then json.dumps through a new instance of its encoder class) takes about twice as long. Here
    the same fields in the same order (the format's fields, renamed; the extras in the order they
    were given; the time) go straight to one reused encoder. Anything else, or a value it cannot
    encode, takes the library's path, which knows more types.
    """

    def __init__(self) -> None:
        super().__init__(
            _JSON_FORMAT,
            rename_fields=_RENAMES,
            timestamp="time",  # ISO 8601 in UTC, from the record's creation time
            json_ensure_ascii=False,
        )
        self._plain = json.JSONEncoder(ensure_ascii=False)

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info or record.exc_text or record.stack_info or not isinstance(record.msg, str):
            return super().format(record)
        record.message = record.getMessage()
        line = {"level": record.levelname, "logger": record.name, "process": record.process, "message": record.message}
        for key, value in record.__dict__.items():
            if key not in _NOT_EXTRAS and not key.startswith("_"):
                line[_RENAMES.get(key, key)] = value
        line["time"] = datetime.fromtimestamp(record.created, tz=UTC).isoformat()
        try:
            encoded: str = self._plain.encode(line)
        except (TypeError, ValueError):
            return super().format(record)
        return encoded


def formatter(fmt: str) -> logging.Formatter:
    if fmt == "json":
        return JsonLines()
    if fmt == "text":
        return TextFormatter()
    raise ValueError(f"log format {fmt!r} is not one of {', '.join(FORMATS)}")


def configure(fmt: str = "text", level: str = "info", stream: Any = None) -> None:
    """Send every logger through one stderr handler with the chosen format (call once, early)."""
    if level not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter(fmt))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())


def gunicorn_logger(fmt: str) -> type[glogging.Logger]:
    """gunicorn's logger class (its `logger_class` setting) with the webhook's formatter on its
    error log. gunicorn builds the logger itself, so the format is bound into the class."""
    line_format = formatter(fmt)  # fails now, in the caller, for an unknown format

    class GunicornLogger(glogging.Logger):
        def setup(self, cfg: Any) -> None:
            super().setup(cfg)
            for handler in self.error_log.handlers:
                handler.setFormatter(line_format)

        def info(self, msg: str, *args: Any, **kwargs: Any) -> None:
            if msg.startswith("Listening at: ") and args and not args[0]:
                # SO_REUSEPORT: the workers bind, the master holds no socket, so gunicorn's own
                # line would name no address ("Listening at:  (pid)"). Name the one they bind.
                scheme = "https" if self.cfg.is_ssl else "http"
                workers = int(self.cfg.workers)
                each = f"in each of {workers} workers" if workers != 1 else "in its 1 worker"
                msg = "Listening at: %s://%s (pid %s; a SO_REUSEPORT socket %s)"
                args = (scheme, ",".join(self.cfg.bind), args[-1], each)
            super().info(msg, *args, **kwargs)

    return GunicornLogger
