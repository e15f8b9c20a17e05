"""LibCST's parser, without re-checking the tokens it builds.

Every LibCST node checks itself when it is constructed (``__post_init__`` calls ``_validate``):
a ``Name`` holds an identifier, whitespace is whitespace, a string literal has its quotes. For
a leaf the parser made from a token, the tokenizer has already proved all that, and LibCST's own
comment on ``CSTNode.__post_init__`` says the work could be skipped when parsing. These leaves
are most of a tree's nodes: skipping their checks takes about 11% off a parse, which is most of
what smpfix adds to a LibCST parse of a training script.

Only these lexical leaves go unchecked, and only during one ``parse_module`` call. The checks of
the structure stay: they are how LibCST refuses syntax it cannot represent yet (concatenated
template strings from Python 3.14 parse, then fail a check), and smpfix reports such a file as
newer Python instead of analysing a tree LibCST does not stand behind. The nodes a fix builds are
checked as always: smpfix parses in one thread per process.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

# The leaves whose checks only restate the tokenizer's (LibCST 1.x). A class here keeps its own
# checks outside ``parse_module``.
_LEXICAL_LEAVES: tuple[Any, ...] = (
    cst.SimpleWhitespace,
    cst.Newline,
    cst.Name,
    cst.SimpleString,
    cst.Integer,
    cst.Float,
    cst.Imaginary,
)


def _unchecked(_node: Any) -> None:
    return None


def parse_module(text: str) -> cst.Module:
    """``libcst.parse_module(text)``: the same tree or the same exception, in less time."""
    for leaf in _LEXICAL_LEAVES:
        leaf.__post_init__ = _unchecked
    try:
        return cst.parse_module(text)
    finally:
        for leaf in _LEXICAL_LEAVES:
            del leaf.__post_init__
