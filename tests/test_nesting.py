"""The nesting guard's quick test never clears a text the exact scan would refuse.

``nesting.too_deep`` first asks ``_surely_shallow``, an upper bound computed with string
operations, and scans token by token only when it cannot clear the text. Here the bounds are
made small, so that generated texts (valid Python or not) land on both sides of them, and the
quick test must say "not sure" for every text the scan refuses. Its literal search must meet
the literals the scanner's tokens meet.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import test_properties  # noqa: F401  (registers and loads the "ci" and "thorough" profiles)
from hypothesis import given
from hypothesis import strategies as st

from smpfix.base import nesting

PIECES = [
    *"()[]{},;:=.+-~*$?\\ \t\x0b\x0c\x00é",
    *["\n"] * 4,
    "\r\n",
    "\r",
    "\\\n",
    "\\\r\n",
    "    ",
    "a",
    "x.y",
    "**",
    "1e-5",
    ".5",
    "1if",
    "and ",
    "or ",
    "not ",
    "in ",
    "is ",
    "for ",
    "yield ",
    "await ",
    "lambda ",
    "lambda: ",
    "if ",
    "elif ",
    "elif a:\n",
    "else ",
    "else:",
    "'s'",
    '"s"',
    "'''a\nb'''",
    '"""x\n"""',
    "'''\\",
    "'\\\n'",
    '"\\""',
    "\\'",
    "'",
    '"',
    "'''",
    '"""',
    'f"{x}"',
    'f"{{{x}}}"',
    "rf'{a{b}}'",
    "F'{",
    "t'{{}'",
    "b'{'",
    "u'{'",
    "ab'{c}'",
    "#c\n",
    "#",
]
TEXTS = st.lists(
    st.sampled_from(PIECES).flatmap(lambda piece: st.integers(1, 30).map(lambda n: piece * n))
    | st.sampled_from(PIECES),
    max_size=200,
).map("".join)


@contextmanager
def small_bounds(nesting_limit: int, brackets: int, columns: int) -> Iterator[None]:
    blanks = nesting._BLANKS
    with mock.patch.multiple(
        nesting,
        MAX_NESTING=nesting_limit,
        MAX_BRACKETS=brackets,
        _INDENT_COLUMNS=columns,
        _DEEP_INDENT=re.compile(f"\\n[{blanks}]{{{columns}}}"),
        _DEEP_TAB_INDENT=re.compile(f"\\n[{blanks}]{{{columns // 8}}}"),
    ):
        yield


@given(
    text=TEXTS,
    bounds=st.sampled_from([(40, 8, 16), (80, 12, 24), (60, 200, 16), (200, 5, 40), (30, 3, 8)]),
)
def test_the_quick_test_never_clears_a_refused_text(
    text: str, bounds: tuple[int, int, int]
) -> None:
    with small_bounds(*bounds):
        if nesting._scan(text) is not None:
            assert not nesting._surely_shallow(text)


@given(text=TEXTS)
def test_the_literal_search_meets_the_scanners_literals(text: str) -> None:
    scanned = [
        (token.start() + len(token.group("prefix") or ""), token.end())
        for token in nesting._TOKEN.finditer(text)
        if token.lastgroup in ("string", "comment")
    ]
    assert [literal.span() for literal in nesting._LITERAL.finditer(text)] == scanned


def test_training_scripts_take_the_quick_path() -> None:
    """The point of the quick test: ordinary scripts are never scanned token by token (a
    statement heavier than the bound, such as a table of hundreds of entries, may be)."""
    tests = Path(__file__).parent
    folders = [
        tests.parent / "examples",
        tests / "realistic",
        tests / "projects",
        tests / "fixtures",
    ]
    for path in sorted(path for folder in folders for path in folder.rglob("*.py")):
        assert nesting._surely_shallow(path.read_text(encoding="utf-8")), path


def test_deep_texts_are_left_to_the_scan() -> None:
    for text in (
        "x = " + "(" * 201 + ")" * 201,
        "x = " + " + ".join(["a"] * 1000),
        "".join(" " * i + "if x:\n" for i in range(1001)),
        "x = " + 'f"{' * 2000 + "1" + '}"' * 2000,
    ):
        assert not nesting._surely_shallow(text)
        assert nesting.too_deep(text) is not None
