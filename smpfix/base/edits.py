"""Edits anchored to nodes, turned into text edits once the file's positions are known.

Rules build their fixes while the tree is walked, before any position is computed; the
analysis computes positions only for files that report something and resolves these then.
Statement-level edits work on whole lines, so a moved statement keeps its comments and the
indentation of its block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import libcst as cst
from libcst._nodes.internal import CodegenState

from smpfix.base.findings import Edit
from smpfix.base.positions import Positions


@dataclass(frozen=True)
class ReplaceNode:
    """Replace the code of ``node`` (without the whitespace around it) with ``text``."""

    node: cst.CSTNode
    text: str

    def resolve(self, positions: Positions) -> Edit:
        start, end = positions.span(self.node)
        return _edit(positions, start, end, self.text)


@dataclass(frozen=True)
class InsertBefore:
    """Insert ``text`` right before the code of ``node``."""

    node: cst.CSTNode
    text: str

    def resolve(self, positions: Positions) -> Edit:
        start, _ = positions.span(self.node)
        return _edit(positions, start, start, self.text)


@dataclass(frozen=True)
class InsertAfter:
    """Insert ``text`` right after the code of ``node``."""

    node: cst.CSTNode
    text: str

    def resolve(self, positions: Positions) -> Edit:
        _, end = positions.span(self.node)
        return _edit(positions, end, end, self.text)


@dataclass(frozen=True)
class DeleteStatementLines:
    """Delete the whole lines a statement occupies, with the comment lines above it."""

    statement: cst.CSTNode

    def resolve(self, positions: Positions) -> Edit:
        start, end = statement_lines(positions, self.statement)
        leading = getattr(self.statement, "leading_lines", ())
        if leading:
            start = positions.line_span(positions.position(positions.span(leading[0])[0]).line, 1)[
                0
            ]
        return _edit(positions, start, end, "")


@dataclass(frozen=True)
class InsertStatementAfter:
    """Insert ``statement`` (with its comment lines) after ``anchor``, in the anchor's block.

    The code is generated with the module's newline and the anchor's indentation, which
    LibCST applies to the statement, its comment lines and its continuation lines alike.
    """

    anchor: cst.CSTNode
    statement: cst.SimpleStatementLine
    module: cst.Module

    def resolve(self, positions: Positions) -> Edit:
        start, end = statement_lines(positions, self.anchor)
        first_line = positions.text[start:end]
        indent = first_line[: len(first_line) - len(first_line.lstrip(" \t"))]
        state = CodegenState(
            default_indent=self.module.default_indent,
            default_newline=self.module.default_newline,
            indent_tokens=[indent] if indent else [],
        )
        self.statement._codegen(state)
        text = "".join(state.tokens)
        if end == len(positions.text) and not positions.text.endswith(("\n", "\r")):
            text = self.module.default_newline + text.rstrip("\r\n")
        return _edit(positions, end, end, text)


@dataclass(frozen=True)
class InsertStatementBefore:
    """Insert ``statement`` (with its comment lines) before ``anchor``, in the anchor's block.

    It goes above the comment lines that belong to the anchor, so they stay with it; blank
    lines above those comments stay where they are. Indentation as in ``InsertStatementAfter``.
    """

    anchor: cst.CSTNode
    statement: cst.SimpleStatementLine
    module: cst.Module

    def resolve(self, positions: Positions) -> Edit:
        start, end = statement_lines(positions, self.anchor)
        anchor_line = positions.text[start:end]
        indent = anchor_line[: len(anchor_line) - len(anchor_line.lstrip(" \t"))]
        comments = [
            line for line in getattr(self.anchor, "leading_lines", ()) if line.comment is not None
        ]
        if comments:
            start = positions.line_span(positions.position(positions.span(comments[0])[0]).line, 1)[
                0
            ]
        state = CodegenState(
            default_indent=self.module.default_indent,
            default_newline=self.module.default_newline,
            indent_tokens=[indent] if indent else [],
        )
        self.statement._codegen(state)
        return _edit(positions, start, start, "".join(state.tokens))


@dataclass(frozen=True)
class UnwrapIf:
    """Replace an ``if`` statement by its body, dedented to the ``if``'s own indentation.

    Works on whole lines, from the ``if`` line to the end of its body: the body's lines
    (its comment and continuation lines too) lose the body's extra indentation, and lines
    indented less than the body stay as they are. Comment lines above the ``if`` stay; a
    comment at the end of the ``if`` line goes with it. ``if c: stmt`` on one line becomes
    ``stmt``. The caller makes sure the body holds no multi-line string, whose content
    would be dedented too.
    """

    statement: cst.If

    def resolve(self, positions: Positions) -> Edit:
        body = self.statement.body
        if isinstance(body, cst.SimpleStatementSuite):
            start = positions.span(self.statement)[0]
            first, last = positions.span(body.body[0])[0], positions.span(body.body[-1])[1]
            return _edit(positions, start, last, positions.text[first:last])
        start, end = statement_lines(positions, self.statement)
        first_statement = body.body[0]
        leading = getattr(first_statement, "leading_lines", ())
        anchor: cst.CSTNode = leading[0] if leading else first_statement
        body_start = positions.line_span(positions.position(positions.span(anchor)[0]).line, 1)[0]
        if_line = positions.text[start:end]
        if_indent = if_line[: len(if_line) - len(if_line.lstrip(" \t"))]
        statement_line = positions.line_text(
            positions.position(positions.span(first_statement)[0]).line
        )
        body_indent = statement_line[: len(statement_line) - len(statement_line.lstrip(" \t"))]
        lines = []
        for line in positions.text[body_start:end].splitlines(keepends=True):
            lines.append(
                if_indent + line[len(body_indent) :] if line.startswith(body_indent) else line
            )
        return _edit(positions, start, end, "".join(lines))


NodeEdit = Union[
    ReplaceNode,
    InsertBefore,
    InsertAfter,
    DeleteStatementLines,
    InsertStatementAfter,
    InsertStatementBefore,
    UnwrapIf,
]


def statement_lines(positions: Positions, statement: cst.CSTNode) -> tuple[int, int]:
    """Offsets of the full lines of ``statement``: line start to the start of the next line."""
    start, end = positions.span(statement)
    first = positions.position(start).line
    last = positions.position(max(start, end - 1)).line
    return positions.line_span(first, last)


def _edit(positions: Positions, start: int, end: int, text: str) -> Edit:
    return Edit(
        start=start,
        end=end,
        content=text,
        start_pos=positions.position(start),
        end_pos=positions.position(end),
    )
