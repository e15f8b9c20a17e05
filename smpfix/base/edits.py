"""Edits anchored to nodes, turned into text edits once the file's positions are known.

Rules build their fixes while the tree is walked, before any position is computed; the
analysis computes positions only for files that report something and resolves these then.
Statement-level edits work on whole lines, so a moved statement keeps its comments and the
indentation of its block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import libcst as cst
from libcst._nodes.internal import CodegenState

from smpfix.base.findings import Edit
from smpfix.base.positions import Positions
from smpfix.base.walker import active_index


@dataclass(frozen=True)
class ReplaceNode:
    """Replace the code of ``node`` (without the whitespace around it) with ``text``.

    When that makes its line longer than the line length and than the longest line of the
    file, the line is wrapped as a formatter would: the outermost call of the line holding
    ``node`` (or, outside any call, the call ``text`` writes) gets one argument per line with
    a trailing comma, one indentation step deeper than its line (``_must_wrap`` says when
    brackets cannot be wrapped so; the line then stays long).
    """

    node: cst.CSTNode
    text: str

    def unwrapped(self, positions: Positions) -> Edit:
        """The replacement alone, never wrapped: for a fix whose other edits rewrite the same
        line (two wrapped calls would overlap)."""
        start, end = positions.span(self.node)
        return _edit(positions, start, end, self.text)

    def resolve(self, positions: Positions) -> Edit:
        start, end = positions.span(self.node)
        plain = _edit(positions, start, end, self.text)
        if "\n" in self.text or "\n" in positions.text[start:end]:
            return plain
        growth = len(self.text) - (end - start)
        call = _outermost_call(positions, self.node)
        if call is not None and call.args:
            opening, closing = _brackets(positions, call)
            if not _must_wrap(positions, opening, closing, growth):
                return plain
            text, parts = positions.text, []
            for arg in call.args:
                first, last = positions.span(arg)
                if first <= start and end <= last:
                    parts.append(text[first:start] + self.text + text[end:last])
                else:
                    parts.append(text[first:last])
            wrapped = _one_per_line(positions, parts, opening, closing)
            if end <= opening:  # ``node`` is (in) the called function: rewrite it too
                head = self.text + text[end : opening + 1]
                return _edit(positions, start, closing, head + wrapped.content)
            return wrapped
        return _wrapped_replacement(positions, start, end, self.text, growth) or plain


def _outermost_call(positions: Positions, node: cst.CSTNode) -> Optional[cst.Call]:
    """The outermost call around ``node`` written on ``node``'s line (brackets included), in
    the tree being analyzed; None when there is none or the tree has no index."""
    index = active_index(positions.module)
    at = index.positions.get(id(node)) if index is not None else None
    if index is None or at is None or index.order[at] is not node:
        return None
    line = positions.position(positions.span(node)[0]).line
    found: Optional[cst.Call] = None
    parents = index.parents
    at = parents[at]
    while at >= 0:
        parent = index.order[at]
        if isinstance(parent, cst.BaseStatement):
            break
        if type(parent) is cst.Call:
            first, last = positions.span(parent)
            if positions.position(first).line != line or positions.position(last).line != line:
                break
            found = parent
        at = parents[at]
    return found


def _wrapped_replacement(
    positions: Positions, start: int, end: int, text: str, growth: int
) -> Optional[Edit]:
    """``text``, a call, written one argument per line in place of ``start:end``, when the
    line would be too long and the call would be the line's outermost bracket; else None."""
    try:
        call = cst.parse_expression(text)
    except Exception:  # not an expression on its own (a keyword argument, an operator)
        return None
    if type(call) is not cst.Call or not call.args or "#" in text:
        return None
    line_number = positions.position(start).line
    line = positions.line_text(line_number)
    longest = max((len(each) for each in positions.text.splitlines()), default=0)
    if len(line) + growth <= max(positions.line_length, longest):
        return None
    before = positions.text[positions.line_span(line_number, line_number)[0] : start]
    if sum(before.count(c) for c in "([{") != sum(before.count(c) for c in ")]}"):
        return None
    outer = line[: len(line) - len(line.lstrip(" \t"))]
    indent = outer + ("\t" if outer.startswith("\t") else "    ")
    newline = _newline_of(positions.text)
    empty = cst.Module([])
    arguments = "".join(
        f"{newline}{indent}"
        f"{empty.code_for_node(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip()},"
        for arg in call.args
    )
    head = empty.code_for_node(call.func)
    return _edit(positions, start, end, f"{head}({arguments}{newline}{outer})")


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
class AppendElement:
    """Append ``texts`` (``"ddp": True``, ``drop_last=True``) as the last elements of a dict
    display or a call's arguments, in the layout the brackets already have.

    One line per element (the closing bracket on a line of its own, or elements below the
    opening bracket): each new element gets a line of its own, indented as the last element's
    line, with a trailing comma when the last element has one. All on one line: ``, text``
    after the last element, unless the line would then be longer than the line length and than the
    longest line of the file; then the elements are written one per line, one indentation
    step deeper than the line holding the opening bracket, as a formatter would. A container
    with a comment inside is never re-laid out.
    """

    container: cst.CSTNode
    texts: tuple[str, ...]

    def resolve(self, positions: Positions) -> Edit:
        text = positions.text
        elements = _elements(self.container)
        opening, closing = _brackets(positions, self.container)
        last_start, last_end = positions.span(elements[-1])
        after_last = text[last_end:closing]
        comma = after_last.lstrip().startswith(",")
        last_line = positions.position(last_start).line
        newline = _newline_of(text)
        if "\n" in after_last or positions.position(opening).line != last_line:
            line = positions.line_text(last_line)
            indent = line[: len(line) - len(line.lstrip(" \t"))]
            if positions.position(opening).line == last_line:
                indent += "\t" if indent.startswith("\t") else "    "
            if "\n" in after_last and comma:
                # After the newline that ends the last element's line (its comment stays).
                at = positions.line_span(last_line, last_line)[1]
                lines = "".join(f"{indent}{each},{newline}" for each in self.texts)
                return _edit(positions, at, at, lines)
            lines = "".join(f",{newline}{indent}{each}" for each in self.texts)
            return _edit(positions, last_end, last_end, lines)
        single = _edit(positions, last_end, last_end, "".join(f", {t}" for t in self.texts))
        if not _must_wrap(positions, opening, closing, len(single.content)):
            return single
        parts = [text[slice(*positions.span(element))] for element in elements]
        return _one_per_line(positions, [*parts, *self.texts], opening, closing)


@dataclass(frozen=True)
class ReplaceArgument:
    """Replace ``node``, inside one of ``call``'s arguments, with ``text``; when that makes the
    call's line longer than the line length and than the longest line of the file, the call's
    arguments are written one per line (as ``AppendElement`` does)."""

    call: cst.Call
    node: cst.CSTNode
    text: str

    def unwrapped(self, positions: Positions) -> Edit:
        """The replacement alone, never wrapped (as ``ReplaceNode.unwrapped``)."""
        start, end = positions.span(self.node)
        return _edit(positions, start, end, self.text)

    def resolve(self, positions: Positions) -> Edit:
        start, end = positions.span(self.node)
        plain = _edit(positions, start, end, self.text)
        if "\n" in self.text or not self.call.args:
            return plain
        opening, closing = _brackets(positions, self.call)
        if not _must_wrap(positions, opening, closing, len(self.text) - (end - start)):
            return plain
        text, parts = positions.text, []
        for arg in self.call.args:
            first, last = positions.span(arg)
            if first <= start and end <= last:
                parts.append(text[first:start] + self.text + text[end:last])
            else:
                parts.append(text[first:last])
        return _one_per_line(positions, parts, opening, closing)


def _must_wrap(positions: Positions, opening: int, closing: int, growth: int) -> bool:
    """Whether brackets written on one line, growing by ``growth`` characters, go over the line
    length (the configured one, ``positions.line_length``, or the longest line already in the
    file) and can be written one element
    per line: not when they are inside another bracket of the line (a formatter would break
    the outermost one first, which is not this edit's to rewrite), nor around a comment."""
    line_number = positions.position(opening).line
    if positions.position(closing).line != line_number:
        return False
    text = positions.text
    longest = max((len(each) for each in text.splitlines()), default=0)
    if len(positions.line_text(line_number)) + growth <= max(positions.line_length, longest):
        return False
    before = text[positions.line_span(line_number, line_number)[0] : opening]
    nested = sum(before.count(c) for c in "([{") != sum(before.count(c) for c in ")]}")
    return not nested and "#" not in text[opening + 1 : closing]


def _one_per_line(positions: Positions, parts: list[str], opening: int, closing: int) -> Edit:
    """The brackets' contents as ``parts``, one per line with a trailing comma, one indentation
    step deeper than the line of the opening bracket, the closing bracket on its own line."""
    text = positions.text
    line = positions.line_text(positions.position(opening).line)
    outer = line[: len(line) - len(line.lstrip(" \t"))]
    indent = outer + ("\t" if outer.startswith("\t") else "    ")
    newline = _newline_of(text)
    body = "".join(f"{newline}{indent}{part}," for part in parts)
    return _edit(positions, opening + 1, closing, f"{body}{newline}{outer}")


def _elements(container: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    if type(container) is cst.Dict:
        return tuple(container.elements)
    assert type(container) is cst.Call
    return tuple(container.args)


def _brackets(positions: Positions, container: cst.CSTNode) -> tuple[int, int]:
    """Offsets of the opening and the closing bracket of a dict display or a call."""
    start, end = positions.span(container)
    if type(container) is cst.Call:
        opening = positions.text.index("(", positions.span(container.func)[1])
        return opening, positions.text.rindex(")", start, end)
    return positions.text.index("{", start), positions.text.rindex("}", start, end)


def _newline_of(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


@dataclass(frozen=True)
class DeleteStatementLines:
    """Delete the whole lines a statement occupies, with the comment lines tied to it (those
    directly above it, no blank line between). Blank lines stay: a section's spacing is the
    reader's, and a comment above a blank line belongs to what follows, not to this statement."""

    statement: cst.CSTNode

    def resolve(self, positions: Positions) -> Edit:
        start, end = statement_lines(positions, self.statement)
        tied = tied_comment_lines(self.statement)
        if tied:
            start = positions.line_span(positions.position(positions.span(tied[0])[0]).line, 1)[0]
        return _edit(positions, start, end, "")


def tied_comment_lines(statement: cst.CSTNode) -> tuple[cst.EmptyLine, ...]:
    """The comment lines directly above ``statement``, with no blank line between them and it."""
    leading: tuple[cst.EmptyLine, ...] = tuple(getattr(statement, "leading_lines", ()))
    count = 0
    for line in reversed(leading):
        if line.comment is None:
            break
        count += 1
    return leading[len(leading) - count :]


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
    AppendElement,
    ReplaceArgument,
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
