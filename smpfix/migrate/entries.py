"""Where each value of a launcher's configuration is written, and the text edits that change it.

A launcher's configuration is written in dict displays, ``dict(...)`` calls and
``params["key"] = value`` statements; the launcher reader (``smpfix.job.launcher``) says, for
each value, the node and the entry that wrote it. This module turns "rename this key", "drop
this entry", "add an entry after this one" into edits of exactly those characters, laid out
like their neighbours (quotes, indentation, commas, line endings), so the rest of the file
stays byte for byte as it was. An operation that cannot be done where the value is written
returns False, and the migration says so instead.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.parents import ParentIndex
from smpfix.base.positions import Positions
from smpfix.job.launcher import Located
from smpfix.migrate.text_edits import TextEdit, apply_edits

# Where a launcher line is long enough that a formatter would break it (Ruff's and Black's
# default is 88, the project's own ``line-length`` default 100; the longer counts).
_LINE_LENGTH = 100


class EntryEditor:
    """Edits of one launcher's code, collected for one estimator at a time (``restart``)."""

    def __init__(self, code: str, positions: Positions, parents: ParentIndex) -> None:
        self.code = code
        self.newline = "\r\n" if "\r\n" in code else "\n"
        self.positions = positions
        self.parents = parents
        self.edits: list[TextEdit] = []
        # Dict displays an edit made longer (the ``mpi`` entry replaced), to wrap if too long.
        self.grown: list[cst.Dict] = []

    def restart(self) -> None:
        self.edits, self.grown = [], []

    def line_of(self, node: cst.CSTNode) -> int:
        return self.positions.position(self.positions.span(node)[0]).line

    def anchor(self, located: Located) -> Optional[cst.CSTNode]:
        """Where an item about ``located`` points: its entry, or the statement that wrote it."""
        return located.anchor or self.assignment(located)

    def assignment(self, located: Located) -> Optional[cst.SimpleStatementLine]:
        """The statement ``params["key"] = value`` that wrote ``located``, if one did."""
        if located.node is None:
            return None
        assign = self.parents.parent_of(located.node)
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
            return None
        statement = self.parents.parent_of(assign)
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return None
        target = assign.targets[0].target
        return statement if isinstance(target, cst.Subscript) else None

    def key_node(self, located: Located) -> Optional[cst.CSTNode]:
        entry = located.entry
        if isinstance(entry, cst.DictElement) and isinstance(entry.key, cst.SimpleString):
            return entry.key
        if isinstance(entry, cst.Arg) and entry.keyword is not None:
            return entry.keyword
        statement = self.assignment(located)
        if statement is None:
            return None
        target = statement.body[0].targets[0].target  # type: ignore[attr-defined]
        index = target.slice[-1].slice
        if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
            return index.value
        return None

    def quote_of(self, entry: Optional[cst.CSTNode]) -> str:
        if isinstance(entry, cst.DictElement) and isinstance(entry.key, cst.SimpleString):
            return entry.key.quote if entry.key.quote in ('"', "'") else '"'
        return '"'

    def key_text(self, node: cst.CSTNode, name: str) -> str:
        if isinstance(node, cst.SimpleString):
            return f"{node.prefix}{node.quote}{name}{node.quote}"
        return name

    def rename(self, located: Located, new: str) -> bool:
        """The key that wrote ``located`` (and any twin of it) renamed ``new``."""
        node = self.key_node(located)
        if node is None:
            return False
        self.replace(node, self.key_text(node, new))
        for twin in self.twins(located.entry) if located.entry is not None else ():
            self.replace(twin.key, self.key_text(twin.key, new))
        return True

    def replace_entry(self, located: Located, key: str, value: str) -> bool:
        """``"mpi": {...}`` becomes ``"torch_distributed": {"enabled": True}``."""
        entry = located.entry
        if isinstance(entry, cst.DictElement) and isinstance(entry.key, cst.SimpleString):
            self.replace(entry, f"{self.key_text(entry.key, key)}: {value}")
            display = self.parents.parent_of(entry)
            if isinstance(display, cst.Dict):
                self.grown.append(display)
            return True
        if isinstance(entry, cst.Arg) and entry.keyword is not None:
            self.replace(entry, f"{key}={value.replace(chr(39), chr(34))}")
            return True
        return False

    def replace_string(self, located: Located, value: str) -> bool:
        node = located.node
        if not isinstance(node, cst.SimpleString):
            return False
        self.replace(node, f"{node.prefix}{node.quote}{value}{node.quote}")
        return True

    def replace(self, node: cst.CSTNode, text: str) -> None:
        start, end = self.positions.span(node)
        self.edits.append(TextEdit(start, end, text))

    def insert_after(self, located: Located, key: str, value: str) -> bool:
        """A new entry ``key: value`` after the one that wrote ``located``, laid out like it."""
        entry = located.entry
        if isinstance(entry, cst.DictElement):
            new = f"{self.quote_of(entry)}{key}{self.quote_of(entry)}: {value}"
        elif isinstance(entry, cst.Arg) and entry.keyword is not None:
            new = f"{key}={value}"
        else:
            statement = self.assignment(located)
            if statement is None:
                return False
            start, end = self.positions.span(statement)
            target = statement.body[0].targets[0].target  # type: ignore[attr-defined]
            base = self.code[slice(*self.positions.span(target.value))]
            self.edits.append(
                TextEdit(
                    end, end, f'{self.newline}{self.indent_at(start)}{base}["{key}"] = {value}'
                )
            )
            return True
        start, end = self.positions.span(entry)
        after = self.skip_blanks(end)
        has_comma = self.code[after : after + 1] == ","
        if self.code[self.line_start(start) : start].strip() == "":
            indent = self.indent_at(start)
            if has_comma:
                at = self.line_end(after)
                at = at - 1 if self.code[at - 1 : at] == "\r" else at
                self.edits.append(TextEdit(at, at, f"{self.newline}{indent}{new},"))
            else:
                self.edits.append(TextEdit(end, end, f",{self.newline}{indent}{new}"))
        elif has_comma:
            self.edits.append(TextEdit(after + 1, after + 1, f" {new},"))
        else:
            self.edits.append(TextEdit(end, end, f", {new}"))
        return True

    def delete(self, located: Located) -> bool:
        """Remove the entry (or ``params["key"] = ...`` statement) that wrote ``located``,
        and any earlier entry of the same key in the same display (Python keeps the last)."""
        entry = located.entry
        if not isinstance(entry, (cst.DictElement, cst.Arg)):
            statement = self.assignment(located)
            if statement is None:
                return False
            entry = statement
        for node in (*self.twins(entry), entry):
            self.remove(node)
        return True

    def twins(self, entry: cst.CSTNode) -> list[cst.DictElement]:
        """The other entries of ``entry``'s dict display with the same string key."""
        if not isinstance(entry, cst.DictElement) or not isinstance(entry.key, cst.SimpleString):
            return []
        display = self.parents.parent_of(entry)
        if not isinstance(display, cst.Dict):
            return []
        key = entry.key.evaluated_value
        return [
            other
            for other in display.elements
            if other is not entry
            and isinstance(other, cst.DictElement)
            and isinstance(other.key, cst.SimpleString)
            and other.key.evaluated_value == key
        ]

    def remove(self, entry: cst.CSTNode) -> None:
        """Remove one entry or statement: whole lines when it has its lines to itself, else the
        entry and its comma."""
        start, end = self.positions.span(entry)
        after = self.skip_blanks(end)
        has_comma = not isinstance(entry, cst.SimpleStatementLine) and (
            self.code[after : after + 1] == ","
        )
        tail = after + 1 if has_comma else after
        rest = self.code[tail : self.line_end(tail)].strip()
        if self.code[self.line_start(start) : start].strip() == "" and (
            not rest or rest.startswith("#")
        ):
            stop = self.line_end(tail)
            stop = stop + 1 if self.code[stop : stop + 1] == "\n" else stop
            self.edits.append(TextEdit(self.line_start(start), stop, ""))
            return
        if has_comma:
            self.edits.append(TextEdit(start, self.skip_blanks(tail, newlines=True), ""))
            return
        before = start - 1
        while before >= 0 and self.code[before] in " \t\r\n":
            before -= 1
        self.edits.append(
            TextEdit(before if self.code[before : before + 1] == "," else start, end, "")
        )

    def finished(self) -> tuple[TextEdit, ...]:
        """The edits made since ``restart``, merged, with the displays that grew wrapped."""
        edits = self.merged_edits()
        for display in self.grown:
            edits = self.wrapped(display, edits)
        return edits

    def merged_edits(self) -> tuple[TextEdit, ...]:
        """The edits, with deletions that touch merged into one (two neighbours dropped from
        ``{"a": 1, "b": 2, "c": 3}``), and a deletion that ends a one-line display taking the
        comma before it, so ``{"a": 1}`` is left, not ``{"a": 1, }``."""
        deletions = sorted(
            {(e.start, e.end) for e in self.edits if not e.content}, key=lambda span: span
        )
        merged: list[list[int]] = []
        for start, end in deletions:
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        kept = [e for e in self.edits if e.content]
        for start, end in merged:
            after = self.skip_blanks(end)
            if self.code[after : after + 1] in ("}", ")"):
                before = start - 1
                while before >= 0 and self.code[before] in " \t":
                    before -= 1
                if self.code[before : before + 1] == "," and self.line_start(before) == (
                    self.line_start(start)
                ):
                    start = before
            kept.append(TextEdit(start, end, ""))
        return tuple(sorted(kept, key=lambda e: (e.start, e.end)))

    def wrapped(self, display: cst.Dict, edits: tuple[TextEdit, ...]) -> tuple[TextEdit, ...]:
        """``edits`` with ``display`` written one entry per line, when it is on one line that
        its edits make longer than the line length (100, or the file's longest line) and a
        formatter would break it first: not inside another bracket of the line, no comment.
        The edits inside it are applied to its entries' text; the others are kept."""
        start, end = self.positions.span(display)
        opening, closing = start, end - 1
        first = self.line_start(opening)
        if self.code[opening] != "{" or self.line_end(opening) < closing:
            return edits
        line = self.code[first : self.line_end(opening)]
        inside = [e for e in edits if opening < e.start and e.end <= closing]
        growth = sum(len(e.content) - (e.end - e.start) for e in inside)
        longest = max((len(each) for each in self.code.splitlines()), default=0)
        before = self.code[first:opening]
        nested = sum(before.count(c) for c in "([{") != sum(before.count(c) for c in ")]}")
        if (
            len(line) + growth <= max(_LINE_LENGTH, longest)
            or nested
            or "#" in self.code[opening:closing]
        ):
            return edits
        parts = []
        for element in display.elements:
            low, high = self.positions.span(element)
            own = [
                TextEdit(e.start - low, e.end - low, e.content)
                for e in inside
                if low <= e.start and e.end <= high
            ]
            parts.append(apply_edits(self.code[low:high], own))
        outer = line[: len(line) - len(line.lstrip(" \t"))]
        indent = outer + ("\t" if outer.startswith("\t") else "    ")
        body = "".join(f"{self.newline}{indent}{part}," for part in parts)
        kept = [e for e in edits if e not in inside]
        return tuple(
            sorted(
                [*kept, TextEdit(opening + 1, closing, f"{body}{self.newline}{outer}")],
                key=lambda e: (e.start, e.end),
            )
        )

    # -- text positions ----------------------------------------------------------------------
    def line_start(self, offset: int) -> int:
        return self.code.rfind("\n", 0, offset) + 1

    def line_end(self, offset: int) -> int:
        found = self.code.find("\n", offset)
        return len(self.code) if found < 0 else found

    def indent_at(self, offset: int) -> str:
        start = self.line_start(offset)
        line = self.code[start:offset]
        return line[: len(line) - len(line.lstrip(" \t"))]

    def skip_blanks(self, offset: int, newlines: bool = False) -> int:
        blanks = " \t\r\n" if newlines else " \t"
        while offset < len(self.code) and self.code[offset] in blanks:
            offset += 1
        return offset
