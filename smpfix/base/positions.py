"""Source positions of nodes, computed only for files that have something to report.

LibCST's ``PositionProvider`` computes line and column for every node through its metadata
machinery, about four parses' worth of work. Here one code generation pass records the
character offsets of every node (about 0.4 parses), and offsets turn into line and column
through a table of line starts only for the nodes a finding or fix needs.
"""

from __future__ import annotations

import bisect
import re
from typing import Optional

import libcst as cst
from libcst._nodes.internal import CodegenState

from smpfix.base.findings import Position

_NEWLINE = re.compile(r"\r\n|\r|\n")


class _OffsetRecorder(CodegenState):
    """Records offsets by ``id(node)``: the tree is kept alive alongside (``Positions.module``),
    so no other live node can share an id, and ``id`` hashes far faster than a node."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.offset = 0
        self.starts: list[int] = []
        self.syntactic: dict[int, tuple[int, int]] = {}
        self.inclusive: dict[int, tuple[int, int]] = {}

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def pop_trailing_newline(self) -> None:
        if self.tokens:
            self.offset -= len(self.tokens.pop())

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.starts.append(self.offset)

    def after_codegen(self, node: cst.CSTNode) -> None:
        self.inclusive[id(node)] = (self.starts.pop(), self.offset)

    def record_syntactic_position(  # type: ignore[override]
        self, node: cst.CSTNode, *, start_node: Optional[cst.CSTNode] = None, end_node: Optional[cst.CSTNode] = None
    ) -> _SyntacticSpan:
        return _SyntacticSpan(self, node, start_node, end_node)


class _SyntacticSpan:
    """``record_syntactic_position`` as a plain context manager: LibCST enters one for most
    nodes, and a generator-based one would cost a third of the whole pass."""

    __slots__ = ("recorder", "node", "start_node", "end_node", "start")

    def __init__(self, recorder: _OffsetRecorder, node: cst.CSTNode, start_node: Optional[cst.CSTNode], end_node: Optional[cst.CSTNode]) -> None:
        self.recorder = recorder
        self.node = node
        self.start_node = start_node
        self.end_node = end_node
        self.start = 0

    def __enter__(self) -> None:
        self.start = self.recorder.offset

    def __exit__(self, *exc_info: object) -> None:
        recorder = self.recorder
        start, end = self.start, recorder.offset
        if self.start_node is not None:
            key = id(self.start_node)
            start = recorder.syntactic.get(key, recorder.inclusive.get(key, (start, end)))[0]
        if self.end_node is not None:
            key = id(self.end_node)
            end = recorder.syntactic.get(key, recorder.inclusive.get(key, (start, end)))[1]
        recorder.syntactic[id(self.node)] = (start, end)


class Positions:
    """Offsets and line/column of the nodes of one module, which must be the parsed tree."""

    def __init__(self, module: cst.Module, text: str) -> None:
        recorder = _OffsetRecorder(module)
        module._codegen(recorder)
        self.module = module  # keeps every node alive, so the ids below stay unique
        self._syntactic = recorder.syntactic
        self._inclusive = recorder.inclusive
        self.text = text
        self.line_starts = [0, *(match.end() for match in _NEWLINE.finditer(text))]
        # LibCST drops a few characters it does not model (form feeds, a backslash
        # continuation inside indentation, a final lone CR); past such a place every offset
        # would be off, and a fix would edit the wrong characters.
        generated = "".join(recorder.tokens)
        self.mismatch: Optional[int] = None if generated == text else _first_difference(generated, text)

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        """Character offsets of the node's own code, without the whitespace it owns."""
        found = self._syntactic.get(id(node))
        if found is None:
            try:
                found = self._inclusive[id(node)]
            except KeyError:
                raise KeyError(node) from None
        return found

    def position(self, offset: int) -> Position:
        line = bisect.bisect_right(self.line_starts, offset) - 1
        return Position(line=line + 1, column=offset - self.line_starts[line] + 1)

    def line_span(self, first_line: int, last_line: int) -> tuple[int, int]:
        """Offsets from the start of ``first_line`` to the start of the line after ``last_line``."""
        start = self.line_starts[first_line - 1]
        end = self.line_starts[last_line] if last_line < len(self.line_starts) else len(self.text)
        return start, end

    def line_text(self, line: int) -> str:
        start, end = self.line_span(line, line)
        return self.text[start:end]


def _first_difference(left: str, right: str) -> int:
    """The first offset at which ``left`` and ``right`` differ."""
    for index, (a, b) in enumerate(zip(left, right)):
        if a != b:
            return index
    return min(len(left), len(right))
