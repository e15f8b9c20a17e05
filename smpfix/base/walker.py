"""One traversal of a LibCST tree that feeds every enabled rule.

LibCST's own visitor rebuilds each node while it visits and costs about as much as the parse
itself; this walker reads the dataclass fields directly (about a quarter of a parse), skips
whitespace and punctuation, which no rule looks at, and keeps the ancestor stack that rules
ask about ("am I inside an ``@smp.step`` function?", "inside an ``if``?"). Children are
visited in source order; decorators come before the body they decorate.

The analysis of a file walks its tree twice (facts, then rules) and rules search subtrees
many times over (``iter_nodes``). Inside ``with indexed(module):`` the tree is traversed once
into a pre-order list with the extent of every subtree; walks of that tree replay the list
and ``iter_nodes`` returns a slice of it, with the same nodes in the same order as a
traversal would give.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from operator import attrgetter
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


# Per node type: a function returning the values of its kept fields, and whether a value's
# type is a node. ``isinstance(value, cst.CSTNode)`` goes through ``ABCMeta`` and would cost
# more than the rest of the walk.
_GETTERS: dict[type, Callable[[Any], tuple[Any, ...]]] = {}
_IS_NODE: dict[type, bool] = {}


def _getter(node_type: type) -> Callable[[Any], tuple[Any, ...]]:
    getter = _GETTERS.get(node_type)
    if getter is None:
        names = _fields_of(node_type)
        if len(names) > 1:
            getter = attrgetter(*names)
        else:
            single = attrgetter(*names) if names else None

            def getter(node: Any) -> tuple[Any, ...]:
                return (single(node),) if single is not None else ()

        _GETTERS[node_type] = getter
    return getter


_TYPE_TESTS: dict[tuple[type, ...], dict[type, bool]] = {}


def type_test(types: tuple[type, ...]) -> Callable[[type], Optional[bool]]:
    """``isinstance`` for LibCST classes without ``ABCMeta``'s cost: call the result with a
    node's type; None means "not seen yet", to be answered by :func:`is_subclass`."""
    known = _TYPE_TESTS.get(types)
    if known is None:
        known = _TYPE_TESTS[types] = {}
    return known.get


def is_subclass(node_type: type, types: tuple[type, ...]) -> bool:
    """``issubclass``, remembered per (type, types): for hot loops over LibCST nodes."""
    known = _TYPE_TESTS.get(types)
    if known is None:
        known = _TYPE_TESTS[types] = {}
    answer = known.get(node_type)
    if answer is None:
        answer = known[node_type] = issubclass(node_type, types)
    return answer


def _is_node(value_type: type) -> bool:
    known = _IS_NODE.get(value_type)
    if known is None:
        known = _IS_NODE[value_type] = issubclass(value_type, cst.CSTNode)
    return known


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The syntactic children of ``node`` in source order, without whitespace nodes."""
    found: list[cst.CSTNode] = []
    is_node = _IS_NODE.get
    for value in (_GETTERS.get(type(node)) or _getter(type(node)))(node):
        flag = is_node(type(value))
        if flag or (flag is None and _is_node(type(value))):
            found.append(value)
        elif isinstance(value, (tuple, list)):
            for item in value:
                flag = is_node(type(item))
                if flag or (flag is None and _is_node(type(item))):
                    found.append(item)
    return found


class NodeIndex:
    """Every node of one tree in pre-order, with where each node's subtree ends."""

    def __init__(self, root: cst.CSTNode) -> None:
        self.root = root
        self.order: list[cst.CSTNode] = []
        self.ends: list[int] = []
        # By ``id``: every indexed node stays alive in ``order``, so no other live node can
        # share its id, and ``id`` hashes far faster than a node's own ``__hash__``.
        self.positions: dict[int, int] = {}
        order, ends, positions = self.order, self.ends, self.positions
        stack: list[Any] = [root]
        while stack:
            item = stack.pop()
            if type(item) is int:
                ends[item] = len(order)
                continue
            index = len(order)
            positions[id(item)] = index
            order.append(item)
            ends.append(0)
            stack.append(index)
            below = children(item)
            if below:
                below.reverse()
                stack.extend(below)

    def extent(self, node: cst.CSTNode) -> Optional[tuple[int, int]]:
        """Where ``node``'s subtree lies in ``order``; None for a node of another tree."""
        start = self.positions.get(id(node))
        if start is None or self.order[start] is not node:
            return None
        return start, self.ends[start]


_INDEX: ContextVar[Optional[NodeIndex]] = ContextVar("smpfix_node_index", default=None)


@contextmanager
def indexed(root: cst.CSTNode) -> Iterator[NodeIndex]:
    """Index ``root`` for the duration of the block (one file's analysis)."""
    index = NodeIndex(root)
    token = _INDEX.set(index)
    try:
        yield index
    finally:
        _INDEX.reset(token)


def _extent(node: cst.CSTNode) -> Optional[tuple[NodeIndex, int, int]]:
    index = _INDEX.get()
    if index is None:
        return None
    found = index.extent(node)
    return (index, *found) if found is not None else None


def subtree(node: cst.CSTNode) -> Optional[tuple[list[cst.CSTNode], list[int], int, int]]:
    """``node``'s subtree in the active index: (pre-order nodes, subtree ends, start, end);
    None outside ``indexed`` or for a node of another tree."""
    known = _extent(node)
    if known is None:
        return None
    index, start, end = known
    return index.order, index.ends, start, end


def iter_nodes(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """Every node below ``node`` (inclusive), pre-order; for rules that search a subtree."""
    known = _extent(node)
    if known is not None:
        index, start, end = known
        return index.order[start:end]
    out: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        current = stack.pop()
        out.append(current)
        below = children(current)
        if below:
            below.reverse()
            stack.extend(below)
    return out


Handler = Callable[[Any], Any]


_HANDLER_NAMES: dict[type, frozenset[str]] = {}


def _handler_names(visitor_type: type) -> frozenset[str]:
    """The ``visit_*``/``leave_*`` methods a visitor class defines (its own or inherited)."""
    names = _HANDLER_NAMES.get(visitor_type)
    if names is None:
        names = _HANDLER_NAMES[visitor_type] = frozenset(n for n in dir(visitor_type) if n.startswith(("visit_", "leave_")))
    return names


class Dispatch:
    """The ``visit_<Node>``/``leave_<Node>`` methods of a set of visitors, looked up once per type.

    Handlers are methods of the visitors' classes; a new Dispatch per file (the rules are
    new objects per file) then costs a set lookup per visitor and node type, not a failed
    ``getattr``.
    """

    def __init__(self, visitors: Sequence[object]) -> None:
        self.visitors = visitors
        self._names = [_handler_names(type(visitor)) for visitor in visitors]
        self._handlers: dict[type, tuple[tuple[Handler, ...], tuple[Handler, ...]]] = {}

    def handlers(self, node_type: type) -> tuple[tuple[Handler, ...], tuple[Handler, ...]]:
        found = self._handlers.get(node_type)
        if found is None:
            visit, leave = f"visit_{node_type.__name__}", f"leave_{node_type.__name__}"
            pairs = list(zip(self.visitors, self._names))
            found = (
                tuple(getattr(v, visit) for v, names in pairs if visit in names),
                tuple(getattr(v, leave) for v, names in pairs if leave in names),
            )
            self._handlers[node_type] = found
        return found


class Ancestry:
    """The chain of nodes from the module down to the node being visited."""

    def __init__(self) -> None:
        self.stack: list[cst.CSTNode] = []

    def parent(self, levels: int = 1) -> Optional[cst.CSTNode]:
        index = len(self.stack) - 1 - levels
        return self.stack[index] if index >= 0 else None

    def nearest(self, *types: type) -> Optional[cst.CSTNode]:
        test = type_test(types)
        for node in reversed(self.stack[:-1]):
            found = test(type(node))
            if found or (found is None and is_subclass(type(node), types)):
                return node
        return None

    def all_of(self, *types: type) -> list[cst.CSTNode]:
        test = type_test(types)
        found = []
        for node in self.stack[:-1]:
            answer = test(type(node))
            if answer or (answer is None and is_subclass(type(node), types)):
                found.append(node)
        return found


def walk(root: cst.CSTNode, dispatch: Dispatch, ancestry: Ancestry, on_error: Callable[[Handler, BaseException], None]) -> None:
    """Visit ``root`` depth-first calling every visitor's handlers for each node.

    A handler that raises is reported through ``on_error`` and the walk goes on, so one
    broken rule cannot hide the findings of the others. Iterative, so deeply nested code
    cannot exhaust the interpreter's stack here.
    """
    known = _extent(root)
    if known is not None:
        _replay(*known, dispatch, ancestry, on_error)
        return
    # A node on the stack is to be visited; a 1-tuple holding a node, to be left.
    stack: list[Any] = [root]
    path = ancestry.stack
    handlers = dispatch.handlers
    while stack:
        item = stack.pop()
        if type(item) is tuple:
            node = item[0]
            for handler in handlers(type(node))[1]:
                try:
                    handler(node)
                except Exception as exc:
                    on_error(handler, exc)
            path.pop()
            continue
        node = item
        path.append(node)
        for handler in handlers(type(node))[0]:
            try:
                handler(node)
            except Exception as exc:
                on_error(handler, exc)
        stack.append((node,))
        below = children(node)
        if below:
            below.reverse()
            stack.extend(below)


def _replay(index: NodeIndex, start: int, end: int, dispatch: Dispatch, ancestry: Ancestry, on_error: Callable[[Handler, BaseException], None]) -> None:
    """``walk`` over an indexed subtree: the same calls in the same order, without traversing."""
    path = ancestry.stack
    handlers = dispatch.handlers
    order, ends = index.order, index.ends
    entered: list[int] = []  # positions of the nodes entered and not yet left

    def leave_one() -> None:
        node = order[entered.pop()]
        for handler in handlers(type(node))[1]:
            try:
                handler(node)
            except Exception as exc:
                on_error(handler, exc)
        path.pop()

    for position in range(start, end):
        while entered and ends[entered[-1]] <= position:
            leave_one()
        node = order[position]
        path.append(node)
        entered.append(position)
        for handler in handlers(type(node))[0]:
            try:
                handler(node)
            except Exception as exc:
                on_error(handler, exc)
    while entered:
        leave_one()
