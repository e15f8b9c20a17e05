"""``smpfix rules``: every rule in a table as wide as the terminal.

On a terminal the table takes its width; in a pipe or a file, ``COLUMNS`` if it is set, else
100 columns, so the listing reads the same in ``less`` and in a log. When the columns at
their natural widths do not fit, the widest gives way a column at a time, its cells wrapped
inside it (at spaces and hyphens), down to a width that keeps their words whole (a job
setting, a flavour). When even that does not fit, the last columns leave the table, and a
line under it says that ``smpfix rules --format json`` has every column.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

# The width of a listing that goes to a pipe or a file (no terminal to fit).
PIPE_WIDTH = 100
GAP = "  "


@dataclass(frozen=True)
class Column:
    title: str
    cell: Callable[[dict[str, Any]], str]
    # The narrowest it gets before it leaves the table, unless one of its words (a job
    # setting, a flavour; a name breaks at its hyphens) is longer.
    narrowest: int


COLUMNS = (
    Column("code", lambda row: row["code"], 6),
    Column("name", lambda row: row["name"], 22),
    Column("fix", lambda row: row["fix"], 6),
    Column("versions", lambda row: row["versions"], 8),
    Column("scripts", lambda row: ", ".join(row["flavours"]), 8),
    Column("depends on", lambda row: ", ".join(row["depends_on"]) or "-", 8),
)


def listing_width() -> int:
    """The terminal's width, or ``COLUMNS``, or ``PIPE_WIDTH`` in a pipe."""
    return shutil.get_terminal_size((PIPE_WIDTH, 24)).columns


def render_rules_table(rows: Sequence[dict[str, Any]], width: Optional[int] = None) -> str:
    """The rows of ``rule_table()`` as a table ``width`` columns wide at most (when even the
    code and the name at their narrowest do not fit, wider)."""
    width = width or listing_width()
    columns = list(COLUMNS)
    while True:
        widths = _widths(columns, rows, width)
        if widths is not None or len(columns) == 2:
            break
        columns.pop()
    if widths is None:
        widths = [column.narrowest for column in columns]
    lines = [_line([[column.title] for column in columns], widths)]
    lines.append("-" * (sum(widths) + len(GAP) * (len(widths) - 1)))
    for row in rows:
        cells = [_wrap(column.cell(row), each) for column, each in zip(columns, widths)]
        lines.append(_line(cells, widths))
    if len(columns) < len(COLUMNS):
        lines.append("`smpfix rules --format json` has every column.")
    return "".join(line + "\n" for line in lines)


def _widths(
    columns: Sequence[Column], rows: Sequence[dict[str, Any]], width: int
) -> Optional[list[int]]:
    """Each column's width so that the table fits in ``width``; None when it cannot."""
    widths = [
        max(len(column.title), *(len(column.cell(row)) for row in rows)) for column in columns
    ]
    narrowest = [
        max(column.narrowest, *(_longest_word(column.cell(row)) for row in rows))
        for column in columns
    ]
    excess = sum(widths) + len(GAP) * (len(columns) - 1) - width
    while excess > 0:
        narrowable = [index for index in range(len(columns)) if widths[index] > narrowest[index]]
        if not narrowable:
            return None
        widest = max(narrowable, key=lambda index: widths[index])
        widths[widest] -= 1
        excess -= 1
    return widths


def _longest_word(text: str) -> int:
    """The longest piece ``_wrap`` never breaks: a word with its comma, a name's part up to and
    with its hyphen."""
    return max(len(word) for word in re.split(r"\s+|(?<=-)", text))


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_long_words=False) or [""]


def _line(cells: Sequence[list[str]], widths: Sequence[int]) -> str:
    """A row: its cells side by side, as many lines as its tallest cell."""
    height = max(len(cell) for cell in cells)
    lines = []
    for at in range(height):
        parts = [
            (cell[at] if at < len(cell) else "").ljust(each) for cell, each in zip(cells, widths)
        ]
        lines.append(GAP.join(parts).rstrip())
    return "\n".join(lines)
