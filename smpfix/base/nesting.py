"""How deeply nested a source text is, measured before LibCST's native parser sees it.

LibCST parses in native code that recurses once per nesting level and has no depth limit:
about 1,200 nested parentheses, 1,400 chained conditional expressions or 2,000 chained
attribute accesses overflow the thread's stack and kill the whole process (a segmentation
fault, not an exception), and long chains of binary operators take minutes. One hostile or
generated file must not do that to a pre-commit hook, so this module bounds the nesting from
the text alone, with one regular-expression pass (about 15% of a parse), and the analysis
refuses a file over the bound with a one-line diagnostic.

Most files are far below the bound, and a cheaper test proves it first (``_surely_shallow``:
string operations that run in C, about a sixth of the scan's time); only a file it cannot clear is
scanned token by token.

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
from functools import lru_cache
from itertools import accumulate
from typing import Optional

# A hand-written training script is far smaller; LibCST needs about 7 s and 1 GiB per
# million characters, so a larger (generated) file is refused rather than parsed for minutes.
MAX_CHARACTERS = 2_000_000
# What bounds memory: LibCST's tree and smpfix's index of it take about 2 KB per token
# (measured on generated files: 400,000 tokens of a list literal peak at 810 MB, 300,000 of
# short statements at 670 MB), and parsing time grows faster than the count. A hand-written
# training script has a few tens of thousands; this keeps one file under about 700 MB.
MAX_TOKENS = 300_000
# CPython's tokenizer limit (MAXLEVEL); LibCST does not enforce it.
MAX_BRACKETS = 200
# Far below where LibCST crashes on an 8 MiB stack (about 2,100 units for the cheapest
# construct per level, attribute chains) and far above hand-written code.
MAX_NESTING = 1000

_STRING_BODY = (
    r"(?:'''(?:[^'\\]|\\.|'(?!''))*(?:'''|\Z)|"
    r'\"\"\"(?:[^"\\]|\\.|"(?!""))*(?:\"\"\"|\Z)|'
    r"'(?:[^'\\\r\n]|\\(?:\r\n|.))*'?|"
    r'"(?:[^"\\\r\n]|\\(?:\r\n|.))*"?)'
)
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


class _Indentation:
    """The indentation levels open at a statement, each with the ``elif`` chain written at
    it so far (each ``elif`` is nested in the previous ``if``)."""

    __slots__ = ("levels", "elifs")

    def __init__(self) -> None:
        self.levels: list[list[int]] = [[0, 0]]  # per level: width, elif chain length
        self.elifs = 0  # the sum of the elif chains over ``levels``

    @property
    def depth(self) -> int:
        return len(self.levels) + self.elifs

    def start(self, width: int, word: str) -> bool:
        """A statement starts at column ``width`` with the keyword or name ``word`` (empty
        for another token); whether the nesting grew."""
        levels = self.levels
        grew = False
        while len(levels) > 1 and levels[-1][0] > width:
            self.elifs -= levels.pop()[1]
        if levels[-1][0] < width:
            levels.append([width, 0])
            grew = True
        if word == "elif":
            levels[-1][1] += 1
            self.elifs += 1
            grew = True
        elif word != "else":
            self.elifs -= levels[-1][1]
            levels[-1][1] = 0
        return grew


@lru_cache(maxsize=16)
def refusal(text: str) -> Optional[TooDeep]:
    """Why LibCST must not parse ``text`` (too large or too deeply nested), or None.

    Remembered for the last few texts: a launcher that is checked too is asked about when
    its estimators are read and again when it is parsed for its check."""
    if len(text) > MAX_CHARACTERS:
        size = f"{len(text) / 1_000_000:.1f} million characters"
        return TooDeep(
            f"file is too large to analyze ({size}; the limit is {MAX_CHARACTERS // 1_000_000} "
            "million); exclude it if it is generated",
            1,
            1,
        )
    tokens = token_count(text) if len(text) > MAX_TOKENS and _token_bound(text) > MAX_TOKENS else 0
    if tokens > MAX_TOKENS:
        return TooDeep(
            f"file is too large to analyze ({tokens:,} tokens; the limit is {MAX_TOKENS:,});"
            " exclude it if it is generated",
            1,
            1,
        )
    return too_deep(text)


def token_count(text: str) -> int:
    """How many tokens ``text`` has (a string literal is one), the measure of what parsing it
    costs: LibCST holds about 2 KB per token (``MAX_TOKENS``). A text of no more characters
    than ``MAX_TOKENS`` cannot have more tokens, so only larger ones are counted."""
    return sum(1 for _ in _TOKEN.finditer(text))


# Every token holds at least one run of word characters or one other non-space character, and
# no such piece spans two tokens (a name or number takes every word character that follows it;
# a string prefix is part of its string): counting the pieces, and the line ends, in C bounds
# the token count from above at a third of the cost of counting tokens.
_PIECE = re.compile(r"\w+|[^\w\s]")


def _token_bound(text: str) -> int:
    """At least ``token_count(text)``."""
    return len(_PIECE.findall(text)) + text.count("\n") + text.count("\r")


def too_deep(text: str) -> Optional[TooDeep]:
    """A ``TooDeep`` when parsing ``text`` could exhaust the parser's stack, else None."""
    if _surely_shallow(text):
        return None
    return _scan(text)


def _scan(text: str) -> Optional[TooDeep]:
    """The measure itself, token by token, with where it first goes over a bound."""
    levels = [_Level()]
    chained = 0  # the sum of chain + lambdas over ``levels``
    indentation = _Indentation()
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
            word = match.group() if kind == "name" else ""
            grew = indentation.start(len(text[line_start : match.start()].expandtabs()), word)
            if kind == "name" and word not in _CHAINING_WORDS:
                kind = "plain"
        if kind == "open":
            top.chain += 1
            levels.append(_Level())
            chained += 1
            grew = True
            if len(levels) - 1 > MAX_BRACKETS:
                return _refuse(
                    f"too many nested parentheses (more than {MAX_BRACKETS}; Python itself refuses "
                    "this)",
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
        if grew and len(levels) + chained + indentation.depth > MAX_NESTING:
            return _refuse(
                f"code is nested too deeply to analyze safely (more than {MAX_NESTING} levels in "
                "one statement)",
                line,
                match,
                line_start,
            )
    return None


# Every string literal and comment, as ``_TOKEN`` finds them. Outside a literal, a quote or a
# ``#`` always starts one (no other token holds either character), so a search for literals
# alone meets the same ones. The bodies are ``_STRING_BODY``'s, consumed in runs and
# possessively: far faster on long docstrings, and the same matches (a run never crosses the
# closing quotes, so giving characters back could not find an earlier end).
_LITERAL = re.compile(
    r"'''(?:[^'\\]++|\\.|'(?!''))*+(?:'''|\Z)"
    r'|"""(?:[^"\\]++|\\.|"(?!""))*+(?:"""|\Z)'
    r"|'(?:[^'\\\r\n]++|\\(?:\r\n|.))*+'?"
    r'|"(?:[^"\\\r\n]++|\\(?:\r\n|.))*+"?'
    r"|\#[^\r\n]*",
    re.DOTALL,
)
_LONE_CR = re.compile(r"\r(?!\n)")
# ASCII whitespace but line breaks: what ``_TOKEN`` skips, as before a line's first token.
_BLANKS = " \t\x0b\x0c\x1c\x1d\x1e\x1f"
# A statement starts at its line's indentation (or after a semicolon, counted apart). While
# no line is indented this many columns, fewer indentation levels can be open at once.
_INDENT_COLUMNS = 100
_DEEP_INDENT = re.compile(f"\\n[{_BLANKS}]{{{_INDENT_COLUMNS}}}")
_DEEP_TAB_INDENT = re.compile(f"\\n[{_BLANKS}]{{{_INDENT_COLUMNS // 8}}}")  # a tab: up to 8 columns
# One character per unit of a statement's weight: any character of a token ("~"; a token that
# adds to the measure has one at least), brackets as "(" and ")" (a closing bracket closes the
# innermost level, whatever its kind), line breaks and backslashes; blanks are dropped.
_UNITS = str.maketrans(
    {
        **{chr(code): "~" for code in range(128)},
        **dict.fromkeys("([{", "("),
        **dict.fromkeys(")]}", ")"),
        "\n": "\n",
        "\\": "\\",
        **dict.fromkeys(_BLANKS + "\r"),
    }
)
_BRACKETS = str.maketrans(dict.fromkeys(set(map(chr, range(128))) - {"(", ")"}))
_DEPTH_STEP = {"(": 1, ")": -1}


def _surely_shallow(text: str) -> bool:
    """True when no statement of ``text`` can reach either bound; False when ``_scan`` must
    decide. An upper bound of the measure, from string operations that run in C.

    Literals and comments give way to a unit (an f-string, to two per level of its braces).
    Open indentation levels are fewer than the columns a statement may start at, plus one per
    semicolon; ``elif`` chains are no longer than the ``elif``s in the file. A statement adds
    to ``levels + chained`` at most one per character outside literals and one more per
    opening bracket (a level, and a link in its parent's chain): commas and closing brackets,
    which take some away, are not followed. A statement ends at a line break outside brackets,
    found from the bracket depth at each line end (exact once no closing bracket goes
    unmatched), unless a backslash continues the line.
    """
    if "\r" in text and _LONE_CR.search(text):
        return False  # a line break that ``split`` and ``^`` below do not see
    code = _LITERAL.sub(_literal_weight, text)
    if not code.isascii():
        return False  # whitespace and identifiers beyond ASCII: left to ``_scan``
    # After a line break only, which the search finds fast (the first line gets one too).
    if (_DEEP_TAB_INDENT if "\t" in code else _DEEP_INDENT).search("\n" + code):
        return False
    indentation = _INDENT_COLUMNS + code.count(";") + code.count("elif")
    units = code.translate(_UNITS)
    steps = units.translate(_BRACKETS)
    if steps:
        depths = list(accumulate(map(_DEPTH_STEP.__getitem__, steps)))
        if min(depths) < 0 or max(depths) > MAX_BRACKETS:
            return False
    depth = weight = heaviest = 0
    for line in units.replace("\\\n", "\\").split("\n"):
        opens = line.count("(")
        depth += opens - line.count(")")
        weight += len(line) + opens
        if depth == 0:
            heaviest = max(heaviest, weight)
            weight = 0
    heaviest = max(heaviest, weight)
    return 1 + heaviest + indentation <= MAX_NESTING


def _literal_weight(literal: re.Match[str]) -> str:
    """A literal or comment in a statement's weight: one unit, and for an f-string what
    ``_scan`` adds for its braces (a prefix holding f or t may end just before the quote)."""
    body = literal.group()
    if "{" in body:
        start = literal.start()
        prefix = literal.string[max(0, start - 2) : start].lower()
        if "f" in prefix or "t" in prefix:
            return "~" * (1 + 2 * _brace_depth(body))
    return "~"


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
