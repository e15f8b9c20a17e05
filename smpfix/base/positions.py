"""Source positions of nodes, computed only for files that have something to report.

LibCST's ``PositionProvider`` computes line and column for every node through its metadata
machinery, about four parses' worth of work. Here a code generation pass records the
character offsets of the nodes it generates (the whole module costs about 0.4 parses; one
statement, a fraction of that), and offsets turn into line and column through a table of
line starts only for the nodes a finding or fix needs.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Sequence
from itertools import accumulate
from typing import Optional

import libcst as cst
from libcst._nodes.internal import CodegenState

from smpfix.base import cpython
from smpfix.base.findings import Position
from smpfix.base.walker import NodeIndex, is_subclass

_STATEMENT = (cst.BaseStatement,)
_UNSEEN = object()
_NEWLINE = re.compile(r"\r\n|\r|\n")
# What LibCST may write back differently (``Positions.mismatch``): a form feed, a carriage
# return (a lone one at the end), a backslash continuation where indentation is expected.
_UNREPRODUCED = re.compile(r"[\f\r]|^[ \t]*\\$", re.MULTILINE)


class _OffsetRecorder(CodegenState):
    """Records offsets by ``id(node)``: the tree is kept alive alongside (``Positions.module``),
    so no other live node can share an id, and ``id`` hashes far faster than a node."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(
            default_indent=module.default_indent, default_newline=module.default_newline
        )
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
        self,
        node: cst.CSTNode,
        *,
        start_node: Optional[cst.CSTNode] = None,
        end_node: Optional[cst.CSTNode] = None,
    ) -> _SyntacticSpan:
        return _SyntacticSpan(self, node, start_node, end_node)


class _SyntacticSpan:
    """``record_syntactic_position`` as a plain context manager: LibCST enters one for most
    nodes, and a generator-based one would cost a third of the whole pass."""

    __slots__ = ("recorder", "node", "start_node", "end_node", "start")

    def __init__(
        self,
        recorder: _OffsetRecorder,
        node: cst.CSTNode,
        start_node: Optional[cst.CSTNode],
        end_node: Optional[cst.CSTNode],
    ) -> None:
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
    """Offsets and line/column of the nodes of one module, which must be the parsed tree.

    With the tree's node index (``walker.NodeIndex``), a node is located through the
    innermost statement holding it: that statement alone is generated and found in the text,
    where its generated code must appear character for character at the start of a line. It
    is placed where it appears when it appears exactly once and the text has none of the
    characters LibCST does not reproduce (so the statement's own text is its generated code,
    and the one place is its place); a statement written the same way elsewhere too is found
    in the nearest statement around it that appears once; else it is placed at the line
    CPython's own parser gives it (``ast``, about a fifth of a LibCST parse, paid once per file).
    When neither places it, the whole module is generated instead. A finding in a 1,000-line script
    then costs the code generation of one statement, not of the file.
    """

    def __init__(
        self,
        module: cst.Module,
        text: str,
        index: Optional[NodeIndex] = None,
        line_length: int = 100,
    ) -> None:
        self.module = module  # keeps every node alive, so the ids below stay unique
        self.text = text
        # The line length the fixes resolved against these positions keep within
        # (``line-length`` of the configuration; ``smpfix.base.edits``).
        self.line_length = line_length
        self.line_starts = _line_starts(text)
        self._index = index if index is not None and index.root is module else None
        self._whole: Optional[_Recorded] = None
        self._lines: Optional[dict[int, int]] = None
        self._pieces: dict[int, Optional[_Recorded]] = {}
        self._once: dict[int, Optional[_Recorded]] = {}  # ``_placed_once``'s answers
        # Whether LibCST writes every statement back exactly as the text has it.
        self._reproduced = _reproduced(text)

    @property
    def mismatch(self) -> Optional[int]:
        """Where LibCST does not reproduce the text, when that made a span unreliable.

        LibCST drops a few characters it does not model (form feeds, a backslash continuation
        inside indentation, a final lone CR); past such a place every offset of a whole-module
        generation would be off, and a fix would edit the wrong characters. Spans located
        through a statement were compared with the text, so they never are.
        """
        return self._whole.mismatch if self._whole is not None else None

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        """Character offsets of the node's own code, without the whitespace it owns."""
        piece = self._piece_for(node)
        if piece is not None:
            found = piece.find(node)
            if found is not None:
                return found
        elif self._reproduced and self._index is not None:
            # A node the index leaves out (a comment line above a statement, which a fix
            # deletes with it) is in the code of the statement it belongs to, once that is
            # located; with the text reproduced, its offsets there are the text's.
            for located in self._pieces.values():
                found = located.find(node) if located is not None else None
                if found is not None:
                    return found
        if self._whole is None:
            self._whole = _Recorded.of(self.module, self.module, text=self.text)
        found = self._whole.find(node)
        if found is None:
            raise KeyError(node)
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

    def _piece_for(self, node: cst.CSTNode) -> Optional[_Recorded]:
        """The located innermost statement holding ``node`` (or a located statement around
        it); None when it cannot be located."""
        index = self._index
        if index is None:
            return None
        position = index.positions.get(id(node))
        if position is None or index.order[position] is not node:
            return None
        position = self._statement_holding(position)
        if position <= 0:
            return None
        if position not in self._pieces:
            self._pieces[position] = self._locate(position)
        return self._pieces[position]

    def _statement_holding(self, position: int) -> int:
        """The innermost statement at or above ``position`` in the index (0 or less: none)."""
        assert self._index is not None
        parents, order = self._index.parents, self._index.order
        while position > 0 and not is_subclass(type(order[position]), _STATEMENT):
            position = parents[position]
        return position

    def _locate(self, position: int) -> Optional[_Recorded]:
        """The statement at ``position``, generated and placed where its code appears once
        at the start of a line; else the nearest statement around it placed so (its code
        holds the spans of everything in it, as the text does); else the statement at the
        line CPython gives it."""
        piece = self._generated(position)
        if self._reproduced:
            placed = self._placed_once(position, piece)
            if placed is not None:
                return placed
        assert self._index is not None
        base = self._place_by_line(self._index.order[position], piece.code)
        return piece.moved(base) if base is not None else None

    def _placed_once(self, position: int, piece: _Recorded) -> Optional[_Recorded]:
        """``piece`` (the statement at ``position``) where its code appears exactly once, else
        the same for the statements around it, outward; None when none appears once."""
        known = self._once.get(position, _UNSEEN)
        if known is not _UNSEEN:
            return known  # type: ignore[return-value]
        base = self._only_place(piece.code)
        if base is not None:
            placed: Optional[_Recorded] = piece.moved(base)
        else:
            assert self._index is not None
            above = self._statement_holding(self._index.parents[position])
            placed = self._placed_once(above, self._generated(above)) if above > 0 else None
        self._once[position] = placed
        return placed

    def _generated(self, position: int) -> _Recorded:
        """The code of the statement at ``position`` alone, indented and written (``elif``)
        as it is in the module, with the spans of its nodes."""
        assert self._index is not None
        statement = self._index.order[position]
        parent = self._index.order[self._index.parents[position]]
        elif_ = type(parent) is cst.If and parent.orelse is statement
        indents = []
        above = self._index.parents[position]
        while above > 0:
            block = self._index.order[above]
            if type(block) is cst.IndentedBlock:
                indents.append(
                    block.indent if block.indent is not None else self.module.default_indent
                )
            above = self._index.parents[above]
        return _Recorded.of(self.module, statement, indents=indents[::-1], elif_=elif_)

    def _only_place(self, code: str) -> Optional[int]:
        """The one offset at the start of a line where the text holds ``code``; None when
        there is none, or more than one."""
        text = self.text
        found = None
        at = text.find(code)
        while at != -1:
            if at == 0 or text[at - 1] == "\n":
                if found is not None:
                    return None
                found = at
            at = text.find(code, at + 1)
        return found

    def _place_by_line(self, statement: cst.CSTNode, code: str) -> Optional[int]:
        """Where ``code`` (the statement's, with its leading blank and comment lines) starts,
        from the line CPython gives the statement; None when the text differs there."""
        if self._lines is None:
            self._lines = statement_lines(self.module, self.text)
        line = self._lines.get(id(statement))
        if line is None:
            return None
        skipped = 0
        for text_line in code.splitlines():
            stripped = text_line.strip()
            if stripped and not stripped.startswith("#"):
                break
            skipped += 1
        first = line - skipped
        if first < 1 or first > len(self.line_starts):
            return None
        base = self.line_starts[first - 1]
        return base if self.text.startswith(code, base) else None


def _reproduced(text: str) -> bool:
    """Whether ``text`` has none of what LibCST may write back differently (``_UNREPRODUCED``):
    substring tests first, the regular expression (a test at every line) only for a text
    with a backslash at the end of a line."""
    if "\f" in text or "\r" in text:
        return False
    if "\\\n" not in text and not text.endswith("\\"):
        return True
    return _UNREPRODUCED.search(text) is None


def _line_starts(text: str) -> list[int]:
    """The offset of each line's first character (after ``\\r\\n``, ``\\r`` or ``\\n``)."""
    if "\r" in text:
        return [0, *(match.end() for match in _NEWLINE.finditer(text))]
    # The common case without the regular expression: twice as fast on a long file.
    return list(accumulate((len(line) + 1 for line in text.split("\n")[:-1]), initial=0))


class _Recorded:
    """The generated code of one node (a statement, or the module) and the spans in it."""

    def __init__(
        self,
        code: str,
        syntactic: dict[int, tuple[int, int]],
        inclusive: dict[int, tuple[int, int]],
        base: int = 0,
        mismatch: Optional[int] = None,
    ) -> None:
        self.code = code
        self.syntactic = syntactic
        self.inclusive = inclusive
        self.base = base
        self.mismatch = mismatch

    @classmethod
    def of(
        cls,
        module: cst.Module,
        node: cst.CSTNode,
        indents: Sequence[str] = (),
        text: Optional[str] = None,
        elif_: bool = False,
    ) -> _Recorded:
        recorder = _OffsetRecorder(module)
        recorder.indent_tokens.extend(indents)
        if elif_:
            node._codegen(
                recorder, is_elif=True
            )  # an ``If`` in another's ``orelse`` is written ``elif``
        else:
            node._codegen(recorder)
        code = "".join(recorder.tokens)
        mismatch = None if text is None or code == text else _first_difference(code, text)
        return cls(code, recorder.syntactic, recorder.inclusive, mismatch=mismatch)

    def moved(self, base: int) -> _Recorded:
        return _Recorded(self.code, self.syntactic, self.inclusive, base, self.mismatch)

    def find(self, node: cst.CSTNode) -> Optional[tuple[int, int]]:
        found = self.syntactic.get(id(node)) or self.inclusive.get(id(node))
        return (found[0] + self.base, found[1] + self.base) if found is not None else None


def statement_lines(module: cst.Module, text: str) -> dict[int, int]:
    """``id(statement)`` -> the line of its first token (a decorator's, for a decorated
    definition), for every statement of ``module``, from CPython's parser.

    LibCST's and CPython's trees hold the same statements in the same blocks; they are
    matched block by block, and any disagreement (or a text CPython cannot parse) gives an
    empty table: the caller then generates the whole module.
    """
    try:
        tree = cpython.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    lines: dict[int, int] = {}
    try:
        _match_block(module.body, tree.body, lines)
    except _Disagree:
        return {}
    return lines


class _Disagree(Exception):
    """LibCST's and CPython's statements do not line up."""


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", None) or []
    return min([node.lineno, *(decorator.lineno for decorator in decorators)])


def _match_block(
    statements: Sequence[cst.CSTNode], nodes: Sequence[ast.stmt], lines: dict[int, int]
) -> None:
    at = 0
    for statement in statements:
        if at >= len(nodes):
            raise _Disagree
        if isinstance(statement, cst.SimpleStatementLine):
            lines[id(statement)] = _first_line(nodes[at])
            at += len(statement.body)
            continue
        lines[id(statement)] = _first_line(nodes[at])
        _match_compound(statement, nodes[at], lines)
        at += 1
    if at != len(nodes):
        raise _Disagree


def _match_suite(
    suite: Optional[cst.CSTNode], nodes: Sequence[ast.stmt], lines: dict[int, int]
) -> None:
    """A block (an indented block, or the statements after a colon on the same line)."""
    if suite is None:
        if nodes:
            raise _Disagree
        return
    if isinstance(suite, (cst.Else, cst.Finally)):
        suite = suite.body
    if isinstance(suite, cst.IndentedBlock):
        _match_block(suite.body, nodes, lines)
    elif isinstance(suite, cst.SimpleStatementSuite):
        if len(suite.body) != len(nodes):
            raise _Disagree
    else:
        raise _Disagree


_COMPOUND = {
    cst.FunctionDef: (ast.FunctionDef, ast.AsyncFunctionDef),
    cst.ClassDef: (ast.ClassDef,),
    cst.If: (ast.If,),
    cst.For: (ast.For, ast.AsyncFor),
    cst.While: (ast.While,),
    cst.With: (ast.With, ast.AsyncWith),
    cst.Try: (ast.Try,),
}


def _match_compound(statement: cst.CSTNode, node: ast.stmt, lines: dict[int, int]) -> None:
    expected = _COMPOUND.get(type(statement))
    if expected is None or not isinstance(node, expected):
        raise _Disagree  # a statement this table does not know (match, try/except*): not located
    body: list[ast.stmt] = getattr(node, "body", [])
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef, cst.With)):
        _match_suite(statement.body, body, lines)
    elif isinstance(statement, (cst.For, cst.While)):
        _match_suite(statement.body, body, lines)
        _match_suite(statement.orelse, getattr(node, "orelse", []), lines)
    elif isinstance(statement, cst.If):
        assert isinstance(node, ast.If)
        _match_suite(statement.body, node.body, lines)
        if isinstance(statement.orelse, cst.If):  # elif
            if len(node.orelse) != 1:
                raise _Disagree
            lines[id(statement.orelse)] = _first_line(node.orelse[0])
            _match_compound(statement.orelse, node.orelse[0], lines)
        else:
            _match_suite(statement.orelse, node.orelse, lines)
    elif isinstance(statement, cst.Try):
        assert isinstance(node, ast.Try)
        _match_suite(statement.body, node.body, lines)
        if len(statement.handlers) != len(node.handlers):
            raise _Disagree
        for handler, ast_handler in zip(statement.handlers, node.handlers):
            _match_suite(handler.body, ast_handler.body, lines)
        _match_suite(statement.orelse, node.orelse, lines)
        _match_suite(statement.finalbody, node.finalbody, lines)


def _first_difference(left: str, right: str) -> int:
    """The first offset at which ``left`` and ``right`` differ."""
    for index, (a, b) in enumerate(zip(left, right)):
        if a != b:
            return index
    return min(len(left), len(right))
