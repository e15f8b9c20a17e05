"""smpfix's parse is LibCST's parse: the same tree or the same refusal, only without re-checking
what the grammar has proved, and only while it parses."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from smpfix.base.parse import parse_module

TESTS = Path(__file__).parent
SOURCES = sorted(
    path
    for folder in ("fixtures", "realistic", "projects", "plan_projects")
    for path in (TESTS / folder).rglob("*.py")
)


def _parsed_by_libcst(text: str) -> cst.Module | type[BaseException]:
    try:
        return cst.parse_module(text)
    except Exception as exc:
        return type(exc)


def _parsed_by_smpfix(text: str) -> cst.Module | type[BaseException]:
    try:
        return parse_module(text)
    except Exception as exc:
        return type(exc)


def _same(text: str) -> None:
    ours, theirs = _parsed_by_smpfix(text), _parsed_by_libcst(text)
    if isinstance(theirs, cst.Module):
        assert isinstance(ours, cst.Module)
        assert ours.deep_equals(theirs)
        assert ours.code == theirs.code
    else:
        assert ours is theirs


def test_the_test_files_parse_to_the_same_trees() -> None:
    assert len(SOURCES) > 500
    for path in SOURCES:
        _same(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "text",
    [
        'x = t"{a}" t"{b}"\n',  # Python 3.14: LibCST parses it, then its checks refuse it
        "return*x\n",  # valid Python LibCST refuses: a Return needs a space after the keyword
        "x = (a\n",
        "def f(:\n    pass\n",
        "print 'python 2'\n",
        "x = 0777\n",
        "if x:\npass\n",
        "f(a=1, b)\n",  # arguments out of order: the grammar refuses them, not the checks
        "f(**a, *b)\n",
        "x = 1 y = 2\n",
    ],
)
def test_code_libcst_refuses_is_refused_the_same_way(text: str) -> None:
    _same(text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab1_ .()[]:=+'\"#\\\n\tfor if def x", max_size=60))
def test_any_text_parses_or_fails_as_with_libcst(text: str) -> None:
    _same(text)


# Pieces of Python that LibCST's checks are about: keywords that need a space, operators,
# arguments in every order, strings with prefixes, decorators, statements of recent versions.
_PIECES = (
    "x",
    "y",
    " ",
    "\n",
    "    ",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ":",
    ",",
    "=",
    "==",
    "*",
    "**",
    "/",
    ".",
    "@",
    "->",
    "-",
    "not",
    " not ",
    " in ",
    " is ",
    "and",
    " or ",
    "if",
    " else ",
    "lambda",
    "def ",
    "class ",
    "return",
    "yield",
    "await",
    "async ",
    "for ",
    "while ",
    "with ",
    " as ",
    "import ",
    "from ",
    "del ",
    "global ",
    "assert ",
    "raise ",
    "try:",
    "except",
    "finally:",
    "match ",
    "case ",
    "type ",
    "f'{x}'",
    "t'{x}'",
    "rb'x'",
    "'a' 'b'",
    "1",
    "1.5",
    "1j",
    "0x1",
    "#c",
    ";",
    "\\\n",
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=24).map("".join))
def test_python_like_text_parses_or_fails_as_with_libcst(text: str) -> None:
    _same(text)


def test_the_checks_of_nodes_built_by_hand_are_back_after_a_parse() -> None:
    parse_module("x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not an identifier")
    with pytest.raises(cst.CSTValidationError):
        cst.SimpleWhitespace("not whitespace")


def test_the_checks_are_back_after_a_refused_parse() -> None:
    with pytest.raises(cst.ParserSyntaxError):
        parse_module("x = (a\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Integer("1.5")


def test_the_frequent_node_types_are_built_through_their_slots_and_get_their_init_back() -> None:
    from smpfix.base.parse import _FREQUENT, _SLOT_INITS

    # A LibCST release that changes how its nodes are built (an ``__init__`` of their own, a
    # field outside it) turns the faster build off for that type, which this would show.
    assert [node_type.__name__ for node_type, _, _ in _SLOT_INITS] == list(_FREQUENT)
    own = {node_type: node_type.__init__ for node_type, _, _ in _SLOT_INITS}
    parse_module("x = f(a, b=1)[0]\nif x == 1:\n    y = {'k': [x]}\n")
    assert all(node_type.__init__ is init for node_type, init in own.items())
    with pytest.raises(cst.CSTValidationError):
        # ``f(b=1, a)``: a positional argument after a keyword one
        cst.Call(
            cst.Name("f"), args=[cst.Arg(cst.Integer("1"), cst.Name("b")), cst.Arg(cst.Name("a"))]
        )
