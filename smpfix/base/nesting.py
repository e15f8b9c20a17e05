"""How deeply nested a source text is, measured before LibCST's native parser sees it.

LibCST parses in native code that recurses once per nesting level and has no depth limit:
about 1,200 nested parentheses, 1,400 chained conditional expressions or 2,000 chained
attribute accesses overflow the thread's stack and kill the whole process (a segmentation
fault, not an exception), and long chains of binary operators take minutes. One hostile or
generated file must not do that to a pre-commit hook, so this module bounds the nesting from
the text alone, with one regular-expression pass (about 3% of a parse), and the analysis
refuses a file over the bound with a one-line diagnostic.

The measure is an upper bound of the parser's depth, not the depth itself: per statement, the
open brackets plus, at each bracket level, the operators and keywords chained since the last
comma (a comma separates siblings, which do not nest; a ``lambda`` nests across commas, so it
is not reset), plus indentation levels and ``elif`` chains (each ``elif`` is nested in the
previous ``if``). CPython itself refuses more than 200 nested brackets, so that limit is
reported as Python reports it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

# A hand-written training script is far smaller; LibCST needs about 7 s and 1 GiB per
# million characters, so a larger (generated) file is refused rather than parsed for minutes.
MAX_CHARACTERS = 2_000_000
# CPython's tokenizer limit (MAXLEVEL); LibCST does not enforce it.
MAX_BRACKETS = 200
# Far below where LibCST crashes on an 8 MiB stack (about 2,100 units for the cheapest
# construct per level, attribute chains) and far above hand-written code.
MAX_NESTING = 1000

_STRING_BODY = r"""(?:'''(?:[^'\\]|\\.|'(?!''))*(?:'''|\Z)|\"\"\"(?:[^"\\]|\\.|"(?!""))*(?:\"\"\"|\Z)|'(?:[^'\\\r\n]|\\(?:\r\n|.))*'?|"(?:[^"\\\r\n]|\\(?:\r\n|.))*"?)"""
_TOKEN = re.compile(
    r"(?P<string>(?P<prefix>[rRbBuUfFtT]{0,2})" + _STRING_BODY + r")"
    r"|(?P<comment>\#[^\r\n]*)"
    r"|(?P<continuation>\\(?:\r\n|\r|\n))"
    r"|(?P<newline>\r\n|\r|\n)"
    r"|(?P<number>\.?\d(?:[\w.]|(?<=[eE])[-+])*)"
    r"|(?P<name>[^\W\d]\w*)"
    r"|(?P<open>[(\[{])"
    r"|(?P<close>[)\]}])"
    r"|(?P<comma>,)"
    r"|(?P<semicolon>;)"
    r"|(?P<operator>[-+~*/%@&|^<>.])"
    r"|(?P<other>[^\s])",
    re.DOTALL,
)
_CHAINING_WORDS = frozenset(
    {"and", "or", "not", "if", "else", "lambda", "await", "in", "is", "for", "yield"}
)
_FSTRING_BRACE = re.compile(r"\{\{|\}\}|[{}]")


# Python frames LibCST's recursive code generation may need for code within MAX_NESTING.
RECURSION_LIMIT = 20_000


@contextmanager
def recursion_headroom() -> Iterator[None]:
    """Let Python recurse as deep as code that passed ``refusal`` needs (``Positions``,
    ``code_for_node`` recurse once or twice per nesting level), then restore the limit."""
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, RECURSION_LIMIT))
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


@dataclass(frozen=True)
class TooDeep:
    """Why a text is refused, and where (1-based line and column)."""

    message: str
    line: int
    column: int


class _Level:
    """One open bracket (or the statement itself): operators chained since the last comma,
    and ``lambda``s, which a comma does not end."""

    __slots__ = ("chain", "lambdas")

    def __init__(self) -> None:
        self.chain = 0
        self.lambdas = 0


def refusal(text: str) -> Optional[TooDeep]:
    """Why LibCST must not parse ``text`` (too large or too deeply nested), or None."""
    if len(text) > MAX_CHARACTERS:
        size = f"{len(text) / 1_000_000:.1f} million characters"
        return TooDeep(
            f"file is too large to analyze ({size}; the limit is {MAX_CHARACTERS // 1_000_000} million); exclude it if it is generated",
            1,
            1,
        )
    return too_deep(text)


def too_deep(text: str) -> Optional[TooDeep]:
    """A ``TooDeep`` when parsing ``text`` could exhaust the parser's stack, else None."""
    levels = [_Level()]
    chained = 0  # the sum of chain + lambdas over ``levels``
    indents: list[list[int]] = [[0, 0]]  # per indentation level: width, elif chain length
    elifs = 0  # the sum of the elif chains over ``indents``
    line, line_start = 1, 0
    statement_start = True
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if not statement_start:  # the common tokens first: they change nothing
            if kind == "name":
                if match.group() not in _CHAINING_WORDS:
                    continue
            elif kind in ("number", "other", "comment"):
                continue
        if kind in ("newline", "continuation"):
            line, line_start = line + 1, match.end()
            if kind == "newline" and len(levels) == 1:
                statement = levels[0]
                chained -= statement.chain + statement.lambdas
                statement.chain = statement.lambdas = 0
                statement_start = True
            continue
        if kind == "comment":
            continue
        if kind == "string":
            line, line_start = _advance(text, match, line, line_start)
        top = levels[-1]
        grew = False
        if statement_start and kind != "semicolon":
            statement_start = False
            width = len(text[line_start : match.start()].expandtabs())
            while len(indents) > 1 and indents[-1][0] > width:
                elifs -= indents.pop()[1]
            if indents[-1][0] < width:
                indents.append([width, 0])
                grew = True
            word = match.group() if kind == "name" else ""
            if word == "elif":
                indents[-1][1] += 1
                elifs += 1
                grew = True
            elif word != "else":
                elifs -= indents[-1][1]
                indents[-1][1] = 0
            if kind == "name" and word not in _CHAINING_WORDS:
                kind = "plain"
        if kind == "open":
            top.chain += 1
            levels.append(_Level())
            chained += 1
            grew = True
            if len(levels) - 1 > MAX_BRACKETS:
                return _refuse(
                    f"too many nested parentheses (more than {MAX_BRACKETS}; Python itself refuses this)",
                    line,
                    match,
                    line_start,
                )
        elif kind == "close":
            if len(levels) > 1:
                closed = levels.pop()
                chained -= closed.chain + closed.lambdas
        elif kind == "comma":
            chained -= top.chain
            top.chain = 0
        elif kind == "semicolon":
            if len(levels) == 1:
                chained -= top.chain + top.lambdas
                top.chain = top.lambdas = 0
                statement_start = True
        elif kind in ("operator", "name"):
            if match.group() == "lambda":
                top.lambdas += 1
            else:
                top.chain += 1
            chained += 1
            grew = True
        elif kind == "string" and set(match.group("prefix").lower()) & {"f", "t"}:
            braces = 2 * _brace_depth(match.group())  # nested f-strings cost the parser more
            top.chain += braces
            chained += braces
            grew = True
        if grew and len(levels) + chained + len(indents) + elifs > MAX_NESTING:
            return _refuse(
                f"code is nested too deeply to analyze safely (more than {MAX_NESTING} levels in one statement)",
                line,
                match,
                line_start,
            )
    return None


def _advance(text: str, match: re.Match[str], line: int, line_start: int) -> tuple[int, int]:
    """The line number and line start after a string literal that may span lines."""
    body = match.group()
    breaks = body.count("\n") + body.count("\r") - body.count("\r\n")
    if not breaks:
        return line, line_start
    last = max(body.rfind("\n"), body.rfind("\r"))
    return line + breaks, match.start() + last + 1


def _brace_depth(literal: str) -> int:
    depth = deepest = 0
    for brace in _FSTRING_BRACE.finditer(literal):
        token = brace.group()
        if token == "{":
            depth += 1
            deepest = max(deepest, depth)
        elif token == "}":
            depth = max(0, depth - 1)
    return deepest


def _refuse(reason: str, line: int, match: re.Match[str], line_start: int) -> TooDeep:
    return TooDeep(reason, line, match.start() - line_start + 1)
