"""One traversal of a LibCST tree that feeds every enabled rule.

LibCST's own visitor rebuilds each node while it visits and costs about as much as the parse
itself; this walker reads the dataclass fields directly (about a quarter of a parse), skips
whitespace and punctuation, which no rule looks at, and keeps the ancestor stack that rules
ask about ("am I inside an ``@smp.step`` function?", "inside an ``if``?"). Children are
visited in source order; decorators come before the body they decorate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Callable, Optional

import libcst as cst

_SKIPPED_FIELD_PREFIXES = ("whitespace", "leading_lines", "lines_after", "lpar", "rpar", "header", "footer", "semicolon", "comma", "equal", "colon", "star", "dot", "operator", "first_line", "trailing_whitespace", "empty_lines", "asynchronous", "newline", "default_indent", "default_newline", "encoding", "has_trailing_newline", "indent", "between", "prefix", "quote", "arrow")
_FIRST_FIELDS = ("decorators",)

_FIELDS_CACHE: dict[type, tuple[str, ...]] = {}


def _fields_of(node_type: type) -> tuple[str, ...]:
    cached = _FIELDS_CACHE.get(node_type)
    if cached is None:
        names = [f.name for f in dataclasses.fields(node_type) if not f.name.startswith(_SKIPPED_FIELD_PREFIXES)]
        first = [name for name in _FIRST_FIELDS if name in names]
        cached = tuple(first + [name for name in names if name not in first])
        _FIELDS_CACHE[node_type] = cached
    return cached


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The syntactic children of ``node`` in source order, without whitespace nodes."""
    found: list[cst.CSTNode] = []
    for name in _fields_of(type(node)):
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            found.append(value)
        elif isinstance(value, (tuple, list)):
            found.extend(item for item in value if isinstance(item, cst.CSTNode))
    return found


def iter_nodes(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """Every node below ``node`` (inclusive), pre-order; for rules that search a subtree."""
    out: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(reversed(children(current)))
    return out


Handler = Callable[[Any], Any]


class Dispatch:
    """The ``visit_<Node>``/``leave_<Node>`` methods of a set of visitors, looked up once per type."""

    def __init__(self, visitors: Sequence[object]) -> None:
        self.visitors = visitors
        self._visit: dict[type, tuple[Handler, ...]] = {}
        self._leave: dict[type, tuple[Handler, ...]] = {}

    def handlers(self, node_type: type) -> tuple[tuple[Handler, ...], tuple[Handler, ...]]:
        visit = self._visit.get(node_type)
        if visit is None:
            name = node_type.__name__
            visit = tuple(h for v in self.visitors if (h := getattr(v, f"visit_{name}", None)) is not None)
            leave = tuple(h for v in self.visitors if (h := getattr(v, f"leave_{name}", None)) is not None)
            self._visit[node_type] = visit
            self._leave[node_type] = leave
        return visit, self._leave[node_type]


class Ancestry:
    """The chain of nodes from the module down to the node being visited."""

    def __init__(self) -> None:
        self.stack: list[cst.CSTNode] = []

    def parent(self, levels: int = 1) -> Optional[cst.CSTNode]:
        index = len(self.stack) - 1 - levels
        return self.stack[index] if index >= 0 else None

    def nearest(self, *types: type) -> Optional[cst.CSTNode]:
        for node in reversed(self.stack[:-1]):
            if isinstance(node, types):
                return node
        return None

    def all_of(self, *types: type) -> list[cst.CSTNode]:
        return [node for node in self.stack[:-1] if isinstance(node, types)]


def walk(root: cst.CSTNode, dispatch: Dispatch, ancestry: Ancestry, on_error: Callable[[Handler, BaseException], None]) -> None:
    """Visit ``root`` depth-first calling every visitor's handlers for each node.

    A handler that raises is reported through ``on_error`` and the walk goes on, so one
    broken rule cannot hide the findings of the others. Iterative, so deeply nested code
    cannot exhaust the interpreter's stack here.
    """
    stack: list[tuple[cst.CSTNode, bool]] = [(root, False)]
    path = ancestry.stack
    while stack:
        node, leaving = stack.pop()
        visit, leave = dispatch.handlers(type(node))
        if leaving:
            for handler in leave:
                try:
                    handler(node)
                except Exception as exc:
                    on_error(handler, exc)
            path.pop()
            continue
        path.append(node)
        for handler in visit:
            try:
                handler(node)
            except Exception as exc:
                on_error(handler, exc)
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(children(node)))
