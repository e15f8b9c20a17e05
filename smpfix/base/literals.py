"""Static values of literal expressions, never by evaluating code.

Configuration dicts (``smp.init({...})``, an estimator's ``distribution``) are written as
literals or as names bound to literals. This module folds those into Python values; any part
it cannot know (a call, an attribute, an argparse value) becomes ``UNKNOWN`` instead of a
guess, so a rule can tell "not set" from "set to something smpfix cannot see".
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any, Callable, Optional, Union

import libcst as cst


class _Unknown:
    _instance: Optional[_Unknown] = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Any = _Unknown()

NameResolver = Callable[[str, cst.CSTNode], Optional[cst.BaseExpression]]


def _no_names(name: str, at: cst.CSTNode) -> Optional[cst.BaseExpression]:
    return None


def _plain_token(node: cst.BaseExpression) -> Any:
    """A number, or a string without prefix, escapes or carriage returns (which Python's
    tokenizer would translate), read straight from its token (a configuration dict has
    hundreds; ``ast.literal_eval`` parses each); else UNKNOWN."""
    try:
        if type(node) is cst.Integer:
            return int(node.value, 0)
        if type(node) is cst.Float:
            return float(node.value)
    except ValueError:
        return UNKNOWN
    if type(node) is cst.SimpleString:
        token = node.value
        quote = token[:3] if token[:3] in ('"""', "'''") else token[:1]
        if (
            quote in ('"', "'", '"""', "'''")
            and "\\" not in token
            and "\r" not in token
            and token.endswith(quote)
            and len(token) >= 2 * len(quote)
        ):
            return token[len(quote) : len(token) - len(quote)]
    return UNKNOWN


def literal_value(
    node: cst.BaseExpression, resolve: NameResolver = _no_names, depth: int = 0
) -> Any:
    """The value of ``node`` if it is a literal (through names ``resolve`` knows), else UNKNOWN.

    One small reader per form (``_FORMS``), chosen by the node's exact type: LibCST's node
    classes have no subclasses, and ``isinstance`` against them goes through ``ABCMeta``.
    """
    if depth > 20:
        return UNKNOWN
    form = _FORMS.get(type(node))
    return form(node, resolve, depth) if form is not None else UNKNOWN


def _concatenated(node: cst.ConcatenatedString, resolve: NameResolver, depth: int) -> Any:
    # Evaluated piece by piece: the pieces may sit on separate lines inside brackets, which
    # the code of the node alone does not parse as.
    left, right = (
        literal_value(node.left, resolve, depth + 1),
        literal_value(node.right, resolve, depth + 1),
    )
    if isinstance(left, str) and isinstance(right, str):
        return left + right
    if isinstance(left, bytes) and isinstance(right, bytes):
        return left + right
    return UNKNOWN


def _token(
    node: Union[cst.Integer, cst.Float, cst.SimpleString], resolve: NameResolver, depth: int
) -> Any:
    fast = _plain_token(node)
    if fast is not UNKNOWN:
        return fast
    try:
        return ast.literal_eval(_code(node))
    except (ValueError, SyntaxError):
        return UNKNOWN


_CONSTANTS = {"True": True, "False": False, "None": None}


def _name(node: cst.Name, resolve: NameResolver, depth: int) -> Any:
    if node.value in _CONSTANTS:
        return _CONSTANTS[node.value]
    bound = resolve(node.value, node)
    return literal_value(bound, resolve, depth + 1) if bound is not None else UNKNOWN


def _signed(node: cst.UnaryOperation, resolve: NameResolver, depth: int) -> Any:
    """``-1``, ``+2.5``; UNKNOWN for ``not x`` and ``~x``."""
    if type(node.operator) not in (cst.Minus, cst.Plus):
        return UNKNOWN
    inner = literal_value(node.expression, resolve, depth + 1)
    if isinstance(inner, (int, float)) and not isinstance(inner, bool):
        return -inner if type(node.operator) is cst.Minus else inner
    return UNKNOWN


def _dict_display(node: cst.Dict, resolve: NameResolver, depth: int) -> Any:
    result: dict[Any, Any] = {}
    for element in node.elements:
        if type(element) is cst.StarredDictElement:
            merged = literal_value(element.value, resolve, depth + 1)
            if not isinstance(merged, dict):
                return UNKNOWN
            result.update(merged)
            continue
        assert type(element) is cst.DictElement
        key = literal_value(element.key, resolve, depth + 1)
        if key is UNKNOWN:
            return UNKNOWN
        result[key] = literal_value(element.value, resolve, depth + 1)
    return result


def _sequence(node: Union[cst.List, cst.Tuple], resolve: NameResolver, depth: int) -> Any:
    items = []
    for item in node.elements:
        if type(item) is cst.StarredElement:
            return UNKNOWN
        items.append(literal_value(item.value, resolve, depth + 1))
    return items if type(node) is cst.List else tuple(items)


def _dict_call(node: cst.Call, resolve: NameResolver, depth: int) -> Any:
    """``dict(a=1, **other)``; UNKNOWN for any other call."""
    if type(node.func) is not cst.Name or node.func.value != "dict":
        return UNKNOWN
    result: dict[Any, Any] = {}
    for arg in node.args:
        if arg.keyword is not None:
            result[arg.keyword.value] = literal_value(arg.value, resolve, depth + 1)
        elif arg.star == "**" or not arg.star:
            merged = literal_value(arg.value, resolve, depth + 1)
            if not isinstance(merged, dict):
                return UNKNOWN
            result.update(merged)
        else:
            return UNKNOWN
    return result


_FORMS: Mapping[type, Callable[[Any, NameResolver, int], Any]] = {
    cst.ConcatenatedString: _concatenated,
    cst.Integer: _token,
    cst.Float: _token,
    cst.SimpleString: _token,
    cst.Name: _name,
    cst.UnaryOperation: _signed,
    cst.Dict: _dict_display,
    cst.List: _sequence,
    cst.Tuple: _sequence,
    cst.Call: _dict_call,
}


def _code(node: cst.CSTNode) -> str:
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString)):
        # The token's own text; parentheses around it would not change its value.
        return node.value
    return cst.Module(body=[]).code_for_node(node)


def dict_entries(node: cst.BaseExpression) -> Mapping[str, cst.DictElement]:
    """The literal string keys of a dict display and their elements (to point at a key)."""
    entries: dict[str, cst.DictElement] = {}
    if isinstance(node, cst.Dict):
        for element in node.elements:
            if isinstance(element, cst.DictElement):
                key = literal_value(element.key)
                if isinstance(key, str):
                    entries[key] = element
    return entries
