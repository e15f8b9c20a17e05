"""Text edits a migration makes, and the ``TODO`` comments it leaves for a person.

A migration edits the source where each value was written (a dict entry, a keyword, a key
string), so everything else in the file stays byte for byte as it was: comments, blank lines,
quote styles. The same edits apply to a script and, cell by cell, to a notebook's joined code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Optional

from smpfix.base import cpython
from smpfix.migrate.items import MigrationItem

TODO_PREFIX = "# smpfix-migrate: TODO"


@dataclass(frozen=True)
class TextEdit:
    """Replace ``text[start:end]`` with ``content`` (an insertion when ``start == end``)."""

    start: int
    end: int
    content: str


def apply_edits(text: str, edits: Iterable[TextEdit]) -> str:
    """``text`` with the edits applied; identical edits count once, and an edit overlapping
    an earlier one is dropped (two launchers sharing one dict ask for the same change)."""
    pieces: list[str] = []
    cursor = 0
    for edit in sorted(set(edits), key=lambda e: (e.start, e.end, e.content)):
        if edit.start < cursor:
            continue
        pieces += [text[cursor : edit.start], edit.content]
        cursor = edit.end
    pieces.append(text[cursor:])
    return "".join(pieces)


def todo_comment(item: MigrationItem) -> str:
    """The comment a person finds above the code an item is about."""
    message = " ".join(item.message.split())
    return f"{TODO_PREFIX}({item.topic}): {message} <{item.link}>"


def todo_edits(code: str, items: Sequence[MigrationItem]) -> list[TextEdit]:
    """Insertions of each item's ``TODO`` comment above the statement at its line.

    The statement is the innermost one holding the line (CPython's parser, which only
    parses); the comment takes its indentation. A comment already there (a second run) is
    not written again, so a migration that stops at ``TODO`` comments converges.
    """
    statements = _statements(code)
    lines = code.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    newline = _newline(code)
    edits: dict[int, list[str]] = {}
    for item in items:
        first = _statement_line(statements, item.line)
        if first is None or first > len(lines):
            continue
        comment = todo_comment(item)
        if _already_there(lines, first, comment):
            continue
        pending = edits.setdefault(first, [])
        if comment not in pending:
            pending.append(comment)
    return [
        TextEdit(
            starts[line - 1],
            starts[line - 1],
            "".join(f"{_indent_of(lines[line - 1])}{c}{newline}" for c in comments),
        )
        for line, comments in edits.items()
    ]


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _already_there(lines: Sequence[str], first: int, comment: str) -> bool:
    line = first - 2
    while line >= 0 and lines[line].lstrip().startswith(TODO_PREFIX):
        if lines[line].strip() == comment:
            return True
        line -= 1
    return False


def _statements(code: str) -> list[tuple[int, int]]:
    """(first line, last line) of every statement, outermost first."""
    try:
        tree = cpython.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    return [
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.stmt)
    ]


def _statement_line(statements: Sequence[tuple[int, int]], line: int) -> Optional[int]:
    """The first line of the innermost statement holding ``line`` (the shortest span)."""
    holding = [span for span in statements if span[0] <= line <= span[1]]
    if not holding:
        return None
    return min(holding, key=lambda span: (span[1] - span[0], -span[0]))[0]


def _newline(code: str) -> str:
    for mark in ("\r\n", "\n", "\r"):
        if mark in code:
            return mark
    return "\n"
