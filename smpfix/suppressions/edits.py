"""Rewriting suppression comments: dropping codes from one, adding codes to a line.

Both SMP900's fix (remove what suppresses nothing) and ``--add-noqa`` (silence what is
reported) edit the same comments, and both must keep everything else on the line: other
tools' ``noqa`` codes, ``# type: ignore``, and free text after the directive. Edits are
computed on the text the suppressions were parsed from (``suppression.parse``); lines are
counted as Python's tokenizer counts them.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from typing import Optional

from smpfix.base.findings import Edit, Position
from smpfix.suppressions.comments import Suppression

_CODES_SPLIT = re.compile(r"[\s,]+")
_NOQA_PREFIX = re.compile(r"#\s*noqa:\s*", re.IGNORECASE)
_NEWLINE = re.compile(r"\r\n|\r|\n")


class LineTable:
    """Offsets of line starts in a text, to turn (line, column) into offsets and back."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0, *(match.end() for match in _NEWLINE.finditer(text))]

    def line_bounds(self, line: int) -> tuple[int, int, int]:
        """Start of ``line``, end of its content (before the newline), start of the next line."""
        start = self.starts[line - 1]
        following = self.starts[line] if line < len(self.starts) else len(self.text)
        end = following
        while end > start and self.text[end - 1] in "\r\n":
            end -= 1
        return start, end, following

    def position(self, offset: int) -> Position:
        index = bisect.bisect_right(self.starts, offset) - 1
        return Position(index + 1, offset - self.starts[index] + 1)

    def edit(self, start: int, end: int, content: str) -> Edit:
        return Edit(start, end, content, self.position(start), self.position(end))


def listed_codes(item: Suppression) -> list[str]:
    """Every code the directive names, in its own order and spelling (``noqa`` keeps non-SMP
    codes)."""
    if item.kind != "noqa":
        opening = item.comment.find("[")
        if opening < 0:
            return []
        inner = item.comment[opening + 1 : item.comment.rfind("]")]
    else:
        prefix = _NOQA_PREFIX.match(item.comment)
        inner = item.comment[prefix.end() :] if prefix else ""
    return [code for code in _CODES_SPLIT.split(inner) if code]


def _with_codes(item: Suppression, codes: Sequence[str]) -> str:
    """The directive's text naming exactly ``codes`` (which must not be empty)."""
    joined = ", ".join(codes)
    if item.kind != "noqa":
        opening = item.comment.find("[")
        head = item.comment[:opening] if opening >= 0 else item.comment
        return f"{head}[{joined}]"
    prefix = _NOQA_PREFIX.match(item.comment)
    return f"{item.comment[: prefix.end()] if prefix else '# noqa: '}{joined}"


def _directive_span(table: LineTable, item: Suppression) -> Optional[tuple[int, int]]:
    start, end, _ = table.line_bounds(item.line)
    begin = start + item.column - 1
    finish = begin + len(item.comment)
    if finish > end or table.text[begin:finish] != item.comment:
        return None
    return begin, finish


def removal(table: LineTable, item: Suppression, codes: Optional[Iterable[str]]) -> Optional[Edit]:
    """The edit that drops ``codes`` from the directive (all of it when ``codes`` is None).

    When nothing the directive suppresses is left, the directive goes: with the spaces
    before it when it ends the line, with its whole line when it was alone there, and
    replaced by ``#`` when free text follows it (so the text stays a comment). Returns None
    when the comment is not where the suppression says (the text changed).
    """
    span = _directive_span(table, item)
    if span is None:
        return None
    begin, finish = span
    if codes is not None and item.codes is not None:
        dropped = {code.upper() for code in codes}
        kept = [code for code in listed_codes(item) if code.upper() not in dropped]
        if kept:
            return table.edit(begin, finish, _with_codes(item, kept))
    line_start, line_end, next_line = table.line_bounds(item.line)
    before = table.text[line_start:begin]
    after = table.text[finish:line_end]
    if not after.strip():
        if not before.strip():
            return table.edit(line_start, next_line, "")
        return table.edit(line_start + len(before.rstrip()), line_end, "")
    gap = len(after) - len(after.lstrip())
    if after.lstrip().startswith("#"):
        return table.edit(begin, finish + gap, "")
    return table.edit(begin, finish + gap, "# ")


def addition(
    table: LineTable, line: int, on_line: Sequence[Suppression], codes: Iterable[str]
) -> Edit:
    """The edit that makes ``line`` suppress ``codes``.

    An ``# smpfix: ignore[...]`` already on the line gets the codes merged into its list;
    otherwise ``  # smpfix: ignore[...]`` is appended after everything on the line,
    existing comments included.
    """
    wanted = sorted({code.upper() for code in codes})
    for item in on_line:
        if item.kind == "smpfix" and item.codes is not None:
            span = _directive_span(table, item)
            if span is None:
                continue
            present = listed_codes(item)
            merged = present + [code for code in wanted if code not in {p.upper() for p in present}]
            return table.edit(span[0], span[1], _with_codes(item, merged))
    start, end, _ = table.line_bounds(line)
    content_end = start + len(table.text[start:end].rstrip())
    return table.edit(content_end, end, f"  # smpfix: ignore[{', '.join(wanted)}]")
