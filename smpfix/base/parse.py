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

The parser builds each node by calling its class, whose ``__init__`` is the one ``dataclass``
writes for a frozen class: every field stored through ``object.__setattr__``, then
``__post_init__``. For the node types that make up most of a tree (the 32 most frequent in
real training scripts hold 95% of the nodes), the parse uses an ``__init__`` that stores the
same fields through the slots' own setters and runs ``_validate`` itself when the type keeps
its checks: the same node, built in two thirds of the time.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import libcst as cst

# The node types whose checks only restate the tokenizer's or the grammar's (LibCST 1.x): the
# lexical leaves; punctuation, operators and whitespace; nodes whose only check is balanced
# parentheses; and nodes whose check is an arity or a marker the grammar cannot produce wrong
# (``Assign`` has a target, ``Arg``'s star is "", "*" or "**", a ``Subscript`` has a slice, an
# indent is whitespace); the order of a call's arguments and the semicolons between statements
# on one line, which the grammar's own rules spell out (``f(a=1, b)`` does not parse). A name
# LibCST does not define in the installed version is skipped.
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
        "Call",
        "SimpleStatementLine",
    )
    if (node_type := getattr(cst, name, None)) is not None
)


# The node types that hold most of a tree, most frequent first (counted over 700,000 nodes of
# real SMP training scripts and their helpers).
_FREQUENT = (
    "SimpleWhitespace",
    "Name",
    "Newline",
    "TrailingWhitespace",
    "Dot",
    "Attribute",
    "Arg",
    "Comma",
    "SimpleStatementLine",
    "Call",
    "ParenthesizedWhitespace",
    "EmptyLine",
    "SimpleString",
    "AssignEqual",
    "AssignTarget",
    "Assign",
    "IndentedBlock",
    "Integer",
    "Expr",
    "Param",
    "Comment",
    "Element",
    "If",
    "LeftSquareBracket",
    "RightSquareBracket",
    "ComparisonTarget",
    "Comparison",
    "SubscriptElement",
    "Subscript",
    "Index",
    "ImportAlias",
    "DictElement",
)

# A default that stands for "call the field's default factory", as ``dataclass``'s own.
_FACTORY = object()


def _slot_init(node_type: type, checked: bool) -> Optional[Callable[..., None]]:
    """An ``__init__`` equal to the one ``dataclass`` wrote for ``node_type`` (same parameters,
    defaults and default factories, same stored values, ``_validate`` when ``checked``), that
    stores each field through its slot's setter. None when the class is not the plain frozen
    dataclass this assumes (an ``__init__`` or ``__post_init__`` of its own, a field outside
    ``__init__``)."""
    if cst.CSTNode.__post_init__ is not getattr(node_type, "__post_init__", None):
        return None
    own = node_type.__dict__.get("__init__")
    if own is None or own.__code__.co_filename != "<string>":  # not written by ``dataclass``
        return None
    names: dict[str, Any] = {"_FACTORY": _FACTORY}
    parameters, lines = [], []
    for at, field in enumerate(dataclasses.fields(node_type)):
        if not field.init:
            return None
        setter: Any = getattr(node_type, field.name, None)
        if type(setter).__name__ != "member_descriptor":  # a slot's setter, nothing else
            return None
        names[f"_set{at}"] = setter.__set__
        value = field.name
        if field.default_factory is not dataclasses.MISSING:
            names[f"_factory{at}"] = field.default_factory
            parameters.append(f"{field.name}=_FACTORY")
            value = f"_factory{at}() if {field.name} is _FACTORY else {field.name}"
        elif field.default is not dataclasses.MISSING:
            names[f"_default{at}"] = field.default
            parameters.append(f"{field.name}=_default{at}")
        else:
            parameters.append(field.name)
        lines.append(f"_set{at}(self, {value})")
    if checked:
        lines.append("self._validate()")
    source = f"def __init__(self, {', '.join(parameters)}):\n    " + "\n    ".join(
        lines or ["pass"]
    )
    exec(source, names)  # code written above from the class's own fields
    return names["__init__"]  # type: ignore[no-any-return]


def _slot_inits() -> tuple[tuple[type, Callable[..., None], Callable[..., None]], ...]:
    """(node type, its parse-time ``__init__``, its own ``__init__``) for ``_FREQUENT``."""
    found = []
    for name in _FREQUENT:
        node_type = getattr(cst, name, None)
        if node_type is None:
            continue
        init = _slot_init(node_type, checked=node_type not in _PROVED)
        if init is not None:
            found.append((node_type, init, node_type.__dict__["__init__"]))
    return tuple(found)


_SLOT_INITS = _slot_inits()


def _unchecked(_node: Any) -> None:
    return None


def parse_module(text: str) -> cst.Module:
    """``libcst.parse_module(text)``: the same tree or the same exception, in less time."""
    for node_type in _PROVED:
        node_type.__post_init__ = _unchecked
    for node_type, init, _ in _SLOT_INITS:
        node_type.__init__ = init  # type: ignore[misc]
    try:
        return cst.parse_module(text)
    finally:
        for node_type in _PROVED:
            del node_type.__post_init__
        for node_type, _, own in _SLOT_INITS:
            node_type.__init__ = own  # type: ignore[misc]
