"""Jupyter notebooks: code cells as one Python text, and fixed cells written back in place.

A launcher notebook builds the estimator over several cells, so the code cells are joined
into one text (a name bound in cell 3 is known in cell 5) with IPython magics and shell
lines commented out, line for line. Positions map back to (cell, line in cell). A
``%%writefile train.py`` cell is a separate script, checked as ``train.py``; a ``%%writefile``
cell of any other file (a YAML config, a shell script) is not Python and is left alone.

IPython runs each cell on its own, so one cell that is not Python (a typo, a shell command
without ``!``) breaks only that cell: ``checkable`` leaves such cells out, with the reason,
and the others are still checked.

Writing back changes nothing but the ``source`` of the cells whose code changed: the JSON
text is edited at those values' exact spans, so indentation, key order, metadata and outputs
stay byte for byte.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Optional

from smpfix.base import cpython

# A masked line is a no-op statement, so a magic alone in an indented block still parses.
_MAGIC_MARK = "pass  #smpfix-magic:"
_MAGIC = re.compile(r"^(\s*)([%!?]|\w+\s*=\s*!)")
_WRITEFILE = re.compile(r"^%%writefile(?:\s+-a)?\s+(\S+)")
# Cell magics that run the rest of the cell as Python (``%%time`` above an estimator cell is
# common in launcher notebooks); any other cell magic (``%%bash``, ``%%html``) is not Python.
_PYTHON_CELL_MAGIC = re.compile(r"^%%(?:time|timeit|capture|prun)\b")
# Line magics (and the shell aliases IPython defines as magics) that IPython runs without the
# ``%`` when a cell is that one line (automagic): ``pip install x``, ``cd data``.
_AUTOMAGICS = frozenset(
    {
        "alias",
        "alias_magic",
        "autoawait",
        "autocall",
        "automagic",
        "autosave",
        "bookmark",
        "cat",
        "cd",
        "clear",
        "colors",
        "conda",
        "config",
        "cp",
        "debug",
        "dhist",
        "dirs",
        "doctest_mode",
        "ed",
        "edit",
        "env",
        "gui",
        "hist",
        "history",
        "killbgscripts",
        "ldir",
        "less",
        "lf",
        "lk",
        "ll",
        "load",
        "load_ext",
        "loadpy",
        "logoff",
        "logon",
        "logstart",
        "logstate",
        "logstop",
        "ls",
        "lsmagic",
        "lx",
        "macro",
        "magic",
        "mamba",
        "man",
        "matplotlib",
        "micromamba",
        "mkdir",
        "more",
        "mv",
        "notebook",
        "page",
        "pastebin",
        "pdb",
        "pdef",
        "pdoc",
        "pfile",
        "pinfo",
        "pinfo2",
        "pip",
        "popd",
        "pprint",
        "precision",
        "prun",
        "psearch",
        "psource",
        "pushd",
        "pwd",
        "pycat",
        "pylab",
        "qtconsole",
        "quickref",
        "recall",
        "rehashx",
        "reload_ext",
        "rep",
        "rerun",
        "reset",
        "reset_selective",
        "rm",
        "rmdir",
        "run",
        "save",
        "sc",
        "set_env",
        "store",
        "sx",
        "system",
        "tb",
        "time",
        "timeit",
        "unalias",
        "unload_ext",
        "who",
        "who_ls",
        "whos",
        "xdel",
        "xmode",
    }
)
_FIRST_WORD = re.compile(r"^\s*([A-Za-z_]\w*)(?:\s|$)")


class NotebookError(ValueError):
    """A notebook smpfix cannot read (malformed JSON, unexpected structure)."""


@dataclass(frozen=True)
class Cell:
    index: int
    source: str
    # JSON span of the cell's "source" value in the notebook text, and whether it is a list.
    span: tuple[int, int]
    as_list: bool


@dataclass(frozen=True)
class ScriptCell:
    """A ``%%writefile NAME`` cell: the file it writes, and the cell itself."""

    filename: str
    cell: Cell

    @property
    def index(self) -> int:
        return self.cell.index


@dataclass(frozen=True)
class CellSyntaxError:
    """A code cell that is not Python even with its magics masked: where, and why."""

    index: int
    message: str
    line: int
    column: int


@dataclass(frozen=True)
class Notebook:
    text: str
    cells: tuple[Cell, ...]
    scripts: tuple[ScriptCell, ...]

    def checkable(self) -> tuple[Notebook, tuple[CellSyntaxError, ...]]:
        """The notebook without the code cells that do not parse, and why each does not.

        Only when the joined cells fail to parse are the cells parsed one by one (with
        CPython's parser, which only parses), so a clean notebook costs one extra parse.
        """
        if syntax_error(self.joined()[0]) is None:
            return self, ()
        kept: list[Cell] = []
        errors: list[CellSyntaxError] = []
        for cell in self.cells:
            error = syntax_error(mask(cell.source))
            if error is None:
                kept.append(cell)
            else:
                errors.append(CellSyntaxError(cell.index, *error))
        return replace(self, cells=tuple(kept)), tuple(errors)

    def joined(self) -> tuple[str, tuple[tuple[int, int], ...]]:
        """The code cells as one text, and each cell's (first line, line count) in it."""
        pieces: list[str] = []
        layout: list[tuple[int, int]] = []
        line = 1
        for cell in self.cells:
            code = mask(cell.source)
            if not code.endswith("\n"):
                code += "\n"
            count = code.count("\n")
            layout.append((line, count))
            pieces.append(code)
            line += count
        return "".join(pieces), tuple(layout)

    def cell_of_line(self, line: int) -> tuple[int, int]:
        """(cell index, line within the cell) for a line of ``joined()``."""
        _, layout = self.joined()
        for cell, (first, count) in zip(self.cells, layout):
            if first <= line < first + count:
                return cell.index, line - first + 1
        last = self.cells[-1] if self.cells else None
        return (last.index, line - layout[-1][0] + 1) if last is not None else (0, line)

    def with_sources(self, sources: dict[int, str]) -> str:
        """The notebook text with new ``source`` values for the given cells, nothing else."""
        pieces, done = [], 0  # joined once: a notebook of many edited cells stays linear
        every = [*self.cells, *(script.cell for script in self.scripts)]
        for cell in sorted(every, key=lambda c: c.span[0]):
            if cell.index not in sources or sources[cell.index] == cell.source:
                continue
            pieces += [
                self.text[done : cell.span[0]],
                _encode_source(sources[cell.index], self.text, cell),
            ]
            done = cell.span[1]
        return "".join([*pieces, self.text[done:]])


def syntax_error(code: str) -> Optional[tuple[str, int, int]]:
    """CPython's reason, line and column when ``code`` (a cell) does not parse; None when it
    does. ``ast.parse`` only parses (top-level ``await``, which IPython allows, parses too)."""
    try:
        return _parse_verdict(code)
    except (ValueError, RecursionError, MemoryError) as exc:
        return (str(exc) or type(exc).__name__, 1, 1)


@lru_cache(maxsize=64)
def _parse_verdict(code: str) -> Optional[tuple[str, int, int]]:
    """``syntax_error`` for a syntax error or none, remembered: a run reads a launcher
    notebook's code twice, to link its estimators and to check it (an exception is not
    remembered)."""
    try:
        cpython.parse(code)
    except SyntaxError as exc:
        return (exc.msg or "invalid syntax", exc.lineno or 1, exc.offset or 1)
    return None


def _is_automagic(code: str) -> bool:
    """A one-line cell that IPython runs as a magic (``pip install x``): the line starts with
    a magic's name and is not Python (``cd = 3`` and ``pwd`` are left to Python)."""
    line = code.strip()
    if not line or "\n" in line:
        return False
    match = _FIRST_WORD.match(line)
    return match is not None and match.group(1) in _AUTOMAGICS and syntax_error(line) is not None


def mask(code: str) -> str:
    """Turn magics and shell lines into ``pass  # ...`` lines, keeping every line where it was."""
    lines = code.split("\n")
    if lines and lines[0].startswith("%%") and not _PYTHON_CELL_MAGIC.match(lines[0]):
        return "\n".join(f"{_MAGIC_MARK}{line}" for line in lines)
    if _is_automagic(code):
        return "\n".join(f"{_MAGIC_MARK}{line}" if line.strip() else line for line in lines)
    if "%" not in code and "!" not in code and "?" not in code:
        return code  # no line can be a magic or a shell line (most cells)
    masked = []
    for line in lines:
        match = _MAGIC.match(line)
        masked.append(
            f"{match.group(1)}{_MAGIC_MARK}{line[len(match.group(1)) :]}" if match else line
        )
    return "\n".join(masked)


def shell_lines(code: str) -> Iterator[tuple[int, str]]:
    """The shell commands in a notebook's joined code, as ``mask`` left them: each ``!cmd``
    line and each line of a ``%%bash`` or ``%%sh`` cell, with its line number."""
    in_cell = False
    for number, line in enumerate(code.split("\n"), start=1):
        at = line.find(_MAGIC_MARK)
        if at < 0:
            in_cell = False
            continue
        rest = line[at + len(_MAGIC_MARK) :]
        if rest.startswith("%%"):
            in_cell = rest.split()[0] in ("%%bash", "%%sh")
            continue
        if in_cell:
            yield number, rest
        elif rest.lstrip().startswith("!"):
            yield number, rest.lstrip()[1:]


def unmask(code: str) -> str:
    return "\n".join(
        line.replace(_MAGIC_MARK, "", 1) if _MAGIC_MARK in line else line
        for line in code.split("\n")
    )


def parse(text: str) -> Notebook:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(
            f"malformed notebook JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotebookError("not a Jupyter notebook: no list of cells")
    spans = _source_spans(text)
    cells: list[Cell] = []
    scripts: list[ScriptCell] = []
    for index, raw in enumerate(data["cells"]):
        if not isinstance(raw, dict) or raw.get("cell_type") != "code":
            continue
        source = raw.get("source", "")
        if isinstance(source, list) and all(isinstance(part, str) for part in source):
            code, as_list = "".join(source), True
        elif isinstance(source, str):
            code, as_list = source, False
        else:
            continue
        if index not in spans:
            continue
        cell = Cell(index, code, spans[index], as_list)
        match = _WRITEFILE.match(code)
        if match is None:
            cells.append(cell)
        elif match.group(1).endswith(".py"):
            scripts.append(ScriptCell(match.group(1), cell))
        # Any other %%writefile cell writes a file that is not Python (a YAML config, a shell
        # script, requirements): it is neither checked nor part of the notebook's code.
    return Notebook(text, tuple(cells), tuple(scripts))


def _encode_source(code: str, text: str, cell: Cell) -> str:
    if not cell.as_list:
        return json.dumps(code, ensure_ascii=False)
    lines = code.splitlines(keepends=True)
    if not lines:
        return "[]"
    line_start = text.rfind("\n", 0, cell.span[0]) + 1
    key_line = text[line_start : cell.span[0]]
    key_indent = len(key_line) - len(key_line.lstrip())
    original = text[cell.span[0] : cell.span[1]]
    item = re.search(r"\[\s*\n([ \t]*)\"", original)
    indent = item.group(1) if item else " " * (key_indent + 1)
    # The cell's own line ending (a notebook saved on Windows has CRLF), so that the edited
    # cell does not mix LF into a CRLF file.
    newline = (
        "\r\n"
        if ("\r\n" in original or "\n" not in original and text.endswith("\r\n", 0, line_start))
        else "\n"
    )
    inner = ("," + newline + indent).join(json.dumps(line, ensure_ascii=False) for line in lines)
    return f"[{newline}{indent}{inner}{newline}{' ' * key_indent}]"


def _source_spans(text: str) -> dict[int, tuple[int, int]]:
    """Offsets of ``cells[i].source`` values in the JSON text, found by a small scanner."""
    scanner = _Scanner(text)
    try:
        return scanner.cell_sources()
    except (IndexError, ValueError):
        return {}


_DECODER = json.JSONDecoder()
_WHITESPACE = re.compile(r"[ \t\r\n]*")


class _Scanner:
    """Just enough of a JSON reader to know where values start and end (in a text that
    ``json.loads`` accepted): the values around the cells' sources, such as outputs, are
    stepped over by the C decoder."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _skip(self) -> None:
        self.pos = _WHITESPACE.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def _string(self) -> str:
        value, self.pos = _DECODER.raw_decode(self.text, self.pos)
        return str(value)

    def _value(self) -> tuple[int, int]:
        self._skip()
        start = self.pos
        _, self.pos = _DECODER.raw_decode(self.text, start)
        return start, self.pos

    def _object(self, on_member: Any) -> None:
        self.pos += 1
        self._skip()
        if self.text[self.pos] == "}":
            self.pos += 1
            return
        while True:
            self._skip()
            key = self._string()
            self._skip()
            self.pos += 1  # colon
            span = on_member(key, None)
            if span is None:
                span = self._value()
            self._skip()
            if self.text[self.pos] == ",":
                self.pos += 1
                continue
            self.pos += 1
            return

    def _array(self, on_item: Any) -> None:
        self.pos += 1
        self._skip()
        if self.text[self.pos] == "]":
            self.pos += 1
            return
        index = 0
        while True:
            if on_item(index, None) is None:
                self._value()
            index += 1
            self._skip()
            if self.text[self.pos] == ",":
                self.pos += 1
                continue
            self.pos += 1
            return

    def cell_sources(self) -> dict[int, tuple[int, int]]:
        found: dict[int, tuple[int, int]] = {}

        def cell_member(index: int) -> Any:
            def member(key: str, _: Any) -> Optional[tuple[int, int]]:
                if key != "source":
                    return None
                span = self._value()
                found[index] = span
                return span

            return member

        def cell_item(index: int, _: Any) -> Optional[tuple[int, int]]:
            self._skip()
            if self.text[self.pos] != "{":
                return None
            start = self.pos
            self._object(cell_member(index))
            return start, self.pos

        def top_member(key: str, _: Any) -> Optional[tuple[int, int]]:
            if key != "cells":
                return None
            self._skip()
            start = self.pos
            self._array(cell_item)
            return start, self.pos

        self._skip()
        self._object(top_member)
        return found
