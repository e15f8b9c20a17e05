"""Parsing a document again after an edit: only the top-level statements the edit touched.

LibCST parses a 20,000-line script in seconds (more than two thirds of its check), and an
edit changes a few lines of it. The analysis process keeps each document's last tree with
where each top-level statement's code lies in its text; the next text is compared with the
last one, the statements wholly before and after the change are kept as they are (LibCST's
nodes are immutable, so a tree may share them), and only the text between them is parsed,
as a module of its own, whose statements take the place of the old ones.

The result must be the tree a parse of the whole text gives, node for node. It is used only
where that holds by construction, and the whole text is parsed otherwise:

- the change is after the first statement that holds an indented block, and the kept
  statements after it include at least one (the module's header, footer, indentation and
  line ending, which LibCST reads from the first indented line and the first line end, are
  then the old ones);
- the text parsed again ends where a kept statement begins, holds at least one statement
  and nothing after its last, and no line between statements at its ends starts with
  whitespace (so no comment or blank line can belong to another statement than in a whole
  parse: LibCST gives a compound statement the indented comments after its block);
- that text's own indentation and line ending are the module's;
- the code of every statement adds up to the new text, character for character.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Optional

import libcst as cst

from smpfix.base import nesting
from smpfix.base.parse import parse_module
from smpfix.base.walker import NodeIndex


@dataclass(frozen=True)
class _Layout:
    """A text, its tree, and where each top-level statement's code ends in the text."""

    text: str
    module: cst.Module
    header: int  # the length of the header's code (comments and blank lines at the top)
    ends: tuple[int, ...]
    # Whether a statement before the change holds an indented block (``_first_block``).
    first_block: int
    # The tree's node index, once the analysis asked for it (``Reparser.index``).
    index: Optional[NodeIndex] = None


class Reparser:
    """The last tree of each document, parsed again piece by piece as it changes."""

    def __init__(self, kept: int = 8) -> None:
        self._layouts: dict[str, _Layout] = {}
        self._kept = kept

    def parse(self, path: str, text: str) -> Optional[cst.Module]:
        """The tree of ``text``, from the last tree of ``path`` where possible; None when the
        whole text must be parsed (its error, if any, is the whole parse's to report)."""
        # The last tree that parsed is kept through texts that do not (typing passes through
        # many): the next good text is compared with it.
        last = self._layouts.get(path)
        if last is None or nesting.refusal(text) is not None:
            return None
        if last.text == text:
            layout: Optional[_Layout] = last
        else:
            try:
                layout = _spliced(last, text)
            except Exception:  # any doubt: the whole text is parsed
                layout = None
        if layout is None:
            return None
        self.remember_layout(path, layout)
        return layout.module

    def remember(self, path: str, text: str, module: cst.Module) -> None:
        """``module`` is the whole parse of ``text``: the next text starts from it."""
        layout = _layout_of(text, module)
        self._layouts.pop(path, None)
        if layout is not None:
            self.remember_layout(path, layout)

    def index(self, path: str, module: cst.Module) -> Optional[NodeIndex]:
        """The node index of ``module``, the last tree of ``path``: built from the previous
        tree's index where the two share statements (``NodeIndex.reusing``), so an edit of a
        large script walks only the statements it parsed again. None for another tree."""
        layout = self._layouts.get(path)
        if layout is None or layout.module is not module:
            return None
        if layout.index is None:
            layout = replace(layout, index=NodeIndex(module))
            self._layouts[path] = layout
        return layout.index

    def remember_layout(self, path: str, layout: _Layout) -> None:
        self._layouts.pop(path, None)
        self._layouts[path] = layout
        while len(self._layouts) > self._kept:
            del self._layouts[next(iter(self._layouts))]


def _layout_of(text: str, module: cst.Module) -> Optional[_Layout]:
    header = sum(len(module.code_for_node(line)) for line in module.header)
    ends: list[int] = []
    end = header
    for statement in module.body:
        end += len(module.code_for_node(statement))
        ends.append(end)
    footer = sum(len(module.code_for_node(line)) for line in module.footer)
    if end + footer != len(text):
        return None  # LibCST does not write this text back as it is (a form feed, say)
    return _Layout(text, module, header, tuple(ends), _first_block(module.body))


def _first_block(body: Sequence[cst.BaseStatement]) -> int:
    """The index of the first statement holding an indented block (len(body) if none)."""
    for index, statement in enumerate(body):
        if isinstance(statement, cst.BaseCompoundStatement) and isinstance(
            statement.body, cst.IndentedBlock
        ):
            return index
    return len(body)


def _indented(lines: Sequence[cst.EmptyLine]) -> bool:
    """Whether a line of ``lines`` (blank lines and comments between top-level statements)
    starts with whitespace: such a line after a compound statement may belong to its block."""
    return any(line.whitespace.value for line in lines)


def _leading_lines(statement: cst.BaseStatement) -> Sequence[cst.EmptyLine]:
    leading: Sequence[cst.EmptyLine] = getattr(statement, "leading_lines", ())
    return leading


# Texts are compared a chunk at a time (a string comparison in C), then a character at a time
# inside the first chunk that differs: a character loop over a 20,000-line script alone costs
# a tenth of a second.
_CHUNK = 4096


def _common_prefix(old: str, new: str, limit: int) -> int:
    """How many first characters ``old`` and ``new`` share, up to ``limit``."""
    at = 0
    while at + _CHUNK <= limit and old[at : at + _CHUNK] == new[at : at + _CHUNK]:
        at += _CHUNK
    while at < limit and old[at] == new[at]:
        at += 1
    return at


def _common_suffix(old: str, new: str, limit: int) -> int:
    """How many last characters ``old`` and ``new`` share, up to ``limit``."""
    same, old_end, new_end = 0, len(old), len(new)
    while (
        same + _CHUNK <= limit
        and old[old_end - same - _CHUNK : old_end - same]
        == new[new_end - same - _CHUNK : new_end - same]
    ):
        same += _CHUNK
    while same < limit and old[old_end - 1 - same] == new[new_end - 1 - same]:
        same += 1
    return same


def _spliced(last: _Layout, text: str) -> Optional[_Layout]:
    old, module, ends = last.text, last.module, last.ends
    if not ends:
        return None
    limit = min(len(old), len(text))
    prefix = _common_prefix(old, text, limit)
    suffix = _common_suffix(old, text, limit - prefix)
    starts = (last.header, *ends[:-1])
    # Statements wholly before the change, and the first one wholly after it.
    kept_before = 0
    while kept_before < len(ends) and ends[kept_before] <= prefix:
        kept_before += 1
    first_after = len(ends)
    while first_after > kept_before and starts[first_after - 1] >= len(old) - suffix:
        first_after -= 1
    if kept_before <= last.first_block or first_after >= len(ends):
        return None
    body = module.body
    following = body[first_after]
    if _indented(_leading_lines(following)):
        return None
    shift = len(text) - len(old)
    start, stop = ends[kept_before - 1], starts[first_after] + shift
    piece = text[start:stop]
    if not piece:
        new_body: list[cst.BaseStatement] = []
    else:
        parsed = parse_module(piece)
        if not parsed.body or parsed.footer or _indented(parsed.header):
            return None
        if (parsed.default_indent, parsed.default_newline) != (
            module.default_indent,
            module.default_newline,
        ):
            return None
        new_body = list(parsed.body)
        if parsed.header:
            new_body[0] = new_body[0].with_changes(
                leading_lines=(*parsed.header, *_leading_lines(new_body[0]))
            )
    spliced = module.with_changes(body=(*body[:kept_before], *new_body, *body[first_after:]))
    lengths = [len(spliced.code_for_node(statement)) for statement in new_body]
    new_ends = list(ends[:kept_before])
    end = new_ends[-1]
    for length in lengths:
        end += length
        new_ends.append(end)
    new_ends.extend(old_end + shift for old_end in ends[first_after:])
    if new_ends[-1] + (len(old) - ends[-1]) != len(text) or end != stop:
        return None
    index = NodeIndex.reusing(spliced, last.index) if last.index is not None else None
    return _Layout(text, spliced, last.header, tuple(new_ends), last.first_block, index)
