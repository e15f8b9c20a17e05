"""Literal values read straight from their tokens equal what Python makes of them."""

from __future__ import annotations

import ast
import warnings

import libcst as cst
import pytest
from hypothesis import given
from hypothesis import strategies as st

from smpfix.base.literals import UNKNOWN, _plain_token, literal_value

TOKENS = [
    "1",
    "0x1F",
    "1_000",
    "0o17",
    "0b101",
    "00",
    "1.5",
    "1e-4",
    "1e400",
    "1_0.5",
    ".5",
    "5.",
    '"a"',
    "'b'",
    '"""c\nd"""',
    "'''e'''",
    '""',
    "''",
    '""""""',
    "'\"'",
    'r"\\n"',
    'b"x"',
    '"a\\nb"',
    '"é"',
    'u"x"',
    '"\\\\"',
    '"""a\r\nb"""',
]


@pytest.mark.parametrize("token", TOKENS)
def test_a_token_means_what_python_reads(token: str) -> None:
    node = cst.parse_module(f"x = {token}\n").body[0].body[0].value  # type: ignore[attr-defined]
    expected = (
        ast.literal_eval(token.replace("\r\n", "\n")) if "\r" in token else ast.literal_eval(token)
    )
    value = literal_value(node)
    assert value == expected and type(value) is type(expected)


@given(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20),
    st.sampled_from(['"', "'", '"""', "'''"]),
)
def test_any_plain_string(text: str, quote: str) -> None:
    token = quote + text + quote
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an invalid escape warns, and Python still reads it
            expected = ast.literal_eval(token)
        node = cst.parse_expression(token)
    except (SyntaxError, ValueError, cst.ParserSyntaxError):
        return
    fast = _plain_token(node)
    assert fast is UNKNOWN or fast == expected
