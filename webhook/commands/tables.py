"""The one renderer of column tables (kubectl's `get` layout): every command's table output."""

from __future__ import annotations

from collections.abc import Sequence

GAP = "   "


def aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    """`rows` (the header first) as lines of left-aligned columns, three spaces apart, with no
    trailing blanks."""
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    return [GAP.join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
