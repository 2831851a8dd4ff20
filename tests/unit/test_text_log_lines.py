"""`--log-format text`, what scripts/run logs on a terminal: one line per event, each field as a
person reads it (JSON's spelling, never Python's repr)."""

from __future__ import annotations

import logging

import pytest

from webhook.serving.logs import TextFormatter


def line(**extra: object) -> str:
    record = logging.LogRecord("webhook.serving.server", logging.INFO, __file__, 1, "cleaned up", None, None)
    record.__dict__.update(extra)
    return TextFormatter().format(record)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ({"owner alive": 1}, 'kept={"owner alive":1}'),
        (["a", "b"], "kept=a,b"),
        (True, "kept=true"),
        (3, "kept=3"),
    ],
    ids=["a map as compact JSON", "a list comma-separated", "a boolean as JSON", "a number"],
)
def test_a_field_is_shown_as_json_spells_it_on_one_line(value: object, shown: str) -> None:
    text = line(kept=value)
    assert text.endswith(f"INFO webhook.serving.server: cleaned up {shown}")
    assert "\n" not in text
