"""LibCST's parser, without re-checking what the grammar has already proved.

Every LibCST node checks itself when it is constructed (``__post_init__`` calls ``_validate``):
a ``Name`` holds an identifier, whitespace is whitespace, parentheses are balanced, a call's
arguments come in an order Python allows. For a tree the parser built from source text, the
tokenizer and the grammar have already proved most of that, and LibCST's own comment on
``CSTNode.__post_init__`` says the work could be skipped when parsing. Skipping it for the
node types below (most of a tree's nodes) takes about a sixth off a parse, which is most of
what smpfix adds to a LibCST parse of a training script.

The other node types keep their checks, during the parse too, because there the checks are
more than the grammar: they are how LibCST refuses code it parses but cannot print back as
written. ``return*x`` parses, but a ``Return`` without a space after the keyword fails its
check (LibCST would print ``return *x``), and concatenated template strings from Python 3.14
parse, then fail a check; smpfix reports such a file as one it cannot parse instead of
analysing a tree LibCST does not stand behind. Outside ``parse_module`` every node checks
itself as always: the nodes a fix builds are checked, and smpfix parses in one thread per
process.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

# The node types whose checks only restate the tokenizer's or the grammar's (LibCST 1.x): the
# lexical leaves; punctuation, operators and whitespace; nodes whose only check is balanced
# parentheses; and nodes whose check is an arity or a marker the grammar cannot produce wrong
# (``Assign`` has a target, ``Arg``'s star is "", "*" or "**", a ``Subscript`` has a slice, an
# indent is whitespace). A name LibCST does not define in the installed version is skipped.
_PROVED: tuple[Any, ...] = tuple(
    node_type
    for name in (
        # lexical leaves
        "Name",
        "SimpleString",
        "Integer",
        "Float",
        "Imaginary",
        "Comment",
        "FormattedStringText",
        # whitespace
        "SimpleWhitespace",
        "ParenthesizedWhitespace",
        "Newline",
        "TrailingWhitespace",
        "EmptyLine",
        # punctuation and operators
        "Comma",
        "Dot",
        "Colon",
        "Semicolon",
        "AssignEqual",
        "LeftParen",
        "RightParen",
        "LeftSquareBracket",
        "RightSquareBracket",
        "LeftCurlyBrace",
        "RightCurlyBrace",
        "Add",
        "Subtract",
        "Multiply",
        "Divide",
        "FloorDivide",
        "Modulo",
        "Power",
        "MatrixMultiply",
        "Equal",
        "NotEqual",
        "LessThan",
        "LessThanEqual",
        "GreaterThan",
        "GreaterThanEqual",
        "AddAssign",
        "SubtractAssign",
        "MultiplyAssign",
        "DivideAssign",
        "Minus",
        "Plus",
        # balanced parentheses, or nothing, is all these check
        "Attribute",
        "Element",
        "StarredElement",
        "DictElement",
        "StarredDictElement",
        "List",
        "Dict",
        "Index",
        "Slice",
        "SubscriptElement",
        "BinaryOperation",
        "AssignTarget",
        "AugAssign",
        "Annotation",
        "Expr",
        "Pass",
        "Break",
        "Continue",
        "Decorator",
        "Else",
        "Finally",
        "Module",
        # an arity or a marker the grammar proves
        "Assign",
        "Arg",
        "Param",
        "Subscript",
        "IndentedBlock",
        "Tuple",
    )
    if (node_type := getattr(cst, name, None)) is not None
)


def _unchecked(_node: Any) -> None:
    return None


def parse_module(text: str) -> cst.Module:
    """``libcst.parse_module(text)``: the same tree or the same exception, in less time."""
    for node_type in _PROVED:
        node_type.__post_init__ = _unchecked
    try:
        return cst.parse_module(text)
    finally:
        for node_type in _PROVED:
            del node_type.__post_init__
