"""Logging setup shared by the webhook's own loggers and gunicorn's.

Two formats, chosen with `serve --log-format`:
- `json` (the default for a cluster): one JSON object per line, made by python-json-logger. Fields
  passed as `extra=` become top-level keys, so a review line reads
  `{"time": ..., "level": "INFO", "logger": "webhook.review", "message": "review", "uid": ..., ...}`.
- `text`: `TIME LEVEL LOGGER: MESSAGE key=value ...`, the same fields for a person at a terminal.

gunicorn's error log (start-up, worker boots and deaths) gets the same formatter through
`gunicorn_logger`. gunicorn's access log stays off: the app writes one line per review instead, and
an access line would cost CPU on every request.

`name` is a LogRecord attribute (the logger's name), so a review's object name travels as
`object_name` and is renamed to `name` in the JSON output; the logger's name is `logger`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from gunicorn import glogging
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from webhook.names import LOG_FORMATS, LOG_LEVELS

FORMATS = LOG_FORMATS
LEVELS = LOG_LEVELS
_RENAMES = {"asctime": "time", "levelname": "level", "name": "logger", "object_name": "name"}
_RESERVED = frozenset(RESERVED_ATTRS) | {"taskName", "message"}


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
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value).lower() if isinstance(value, bool) else str(value)


def formatter(fmt: str) -> logging.Formatter:
    if fmt == "json":
        return JsonFormatter(
            "%(levelname)s %(name)s %(process)d %(message)s",
            rename_fields=_RENAMES,
            timestamp="time",  # ISO 8601 in UTC, from the record's creation time
            json_ensure_ascii=False,
        )
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
