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
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from contextvars import ContextVar
from operator import attrgetter
from typing import Any, Callable, Optional, TypeVar

import libcst as cst

T = TypeVar("T")

_SKIPPED_FIELD_PREFIXES = (
    "whitespace",
    "leading_lines",
    "lines_after",
    "lpar",
    "rpar",
    "header",
    "footer",
    "semicolon",
    "comma",
    "equal",
    "colon",
    "star",
    "dot",
    "operator",
    "first_line",
    "trailing_whitespace",
    "empty_lines",
    "asynchronous",
    "newline",
    "default_indent",
    "default_newline",
    "encoding",
    "has_trailing_newline",
    "indent",
    "between",
    "prefix",
    "quote",
    "arrow",
)
_FIRST_FIELDS = ("decorators",)

_FIELDS_CACHE: dict[type, tuple[str, ...]] = {}


def _fields_of(node_type: type) -> tuple[str, ...]:
    """The fields of ``node_type`` that may hold child nodes, in source order (a field
    declared as text, such as ``Name.value``, never does)."""
    cached = _FIELDS_CACHE.get(node_type)
    if cached is None:
        names = [
            f.name
            for f in dataclasses.fields(node_type)
            if not f.name.startswith(_SKIPPED_FIELD_PREFIXES) and f.type is not str
        ]
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
        elif names:
            single = attrgetter(*names)

            def getter(node: Any) -> tuple[Any, ...]:
                return (single(node),)
        else:
            getter = _no_fields

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
        # The class's own ancestry rather than ``issubclass``, which goes through ABCMeta
        # (and, for a type that is no node, through every one of LibCST's node classes).
        known = _IS_NODE[value_type] = cst.CSTNode in value_type.__mro__
    return known


def _no_fields(node: Any) -> tuple[Any, ...]:
    return ()


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The syntactic children of ``node`` in source order, without whitespace nodes."""
    getter = _GETTERS.get(type(node)) or _getter(type(node))
    if getter is _no_fields:  # a leaf (a name, a number, a string): most nodes
        return []
    found: list[cst.CSTNode] = []
    is_node = _IS_NODE.get
    for value in getter(node):
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
    """Every node of one tree in pre-order, with where each node's subtree ends, each node's
    parent and the nodes of each type: every analysis replays the tree with all of them, so
    they are built in the one pass over it."""

    def __init__(self, root: cst.CSTNode) -> None:
        self.root = root
        self.order: list[cst.CSTNode] = []
        self.ends: list[int] = []
        self._parents: list[int] = []
        self._by_type: dict[type, list[int]] = {}
        order, ends, parents, by_type = self.order, self.ends, self._parents, self._by_type
        opened = [-1]  # the positions of the nodes entered and not yet left (-1: above the root)
        stack: list[Any] = [root]
        getters, is_node = _GETTERS, _IS_NODE.get
        while stack:
            item = stack.pop()
            if type(item) is int:
                ends[item] = len(order)
                opened.pop()
                continue
            index = len(order)
            order.append(item)
            parents.append(opened[-1])
            node_type = type(item)
            known = by_type.get(node_type)
            if known is None:
                by_type[node_type] = [index]
            else:
                known.append(index)
            # ``children`` inlined (it runs for every node of every tree), and a node without
            # children closed at once.
            getter = getters.get(node_type) or _getter(node_type)
            if getter is _no_fields:
                ends.append(index + 1)
                continue
            below: list[Any] = []
            for value in getter(item):
                flag = is_node(type(value))
                if flag or (flag is None and _is_node(type(value))):
                    below.append(value)
                elif isinstance(value, (tuple, list)):
                    for child in value:
                        flag = is_node(type(child))
                        if flag or (flag is None and _is_node(type(child))):
                            below.append(child)
            if not below:
                ends.append(index + 1)
                continue
            ends.append(0)
            opened.append(index)
            stack.append(index)
            below.reverse()
            stack.extend(below)
        # By ``id``: every indexed node stays alive in ``order``, so no other live node can
        # share its id, and ``id`` hashes far faster than a node's own ``__hash__``. Built in
        # one pass at C speed rather than a store per node in the loop above.
        self.positions: dict[int, int] = dict(zip(map(id, order), range(len(order))))

    @classmethod
    def reusing(cls, root: cst.CSTNode, previous: NodeIndex) -> NodeIndex:
        """The index of ``root``, a tree that shares children with ``previous``'s root (the
        language server's tree after an edit, whose untouched top-level statements are the
        old nodes): each run of shared children is copied from ``previous`` with its
        positions shifted, and only the other children are walked. Equal to ``NodeIndex(root)``
        in every part, which a property test holds it to."""
        index = cls.__new__(cls)
        index.root = root
        order: list[cst.CSTNode] = [root]
        ends, parents = [0], [-1]
        positions = {id(root): 0}
        runs: list[tuple[NodeIndex, int, int, int]] = []  # (source, start, stop, new start)
        size = 1  # the nodes placed so far: the root and the runs
        old_positions, old_order, old_parents = (
            previous.positions,
            previous.order,
            previous._parents,
        )
        for child in children(root):
            at = old_positions.get(id(child))
            if at is not None and old_order[at] is child and old_parents[at] == 0:
                source, start, stop = previous, at, previous.ends[at]
            else:
                source = NodeIndex(child)
                start, stop = 0, len(source.order)
            if runs and runs[-1][0] is source is previous and runs[-1][2] == start:
                last = runs[-1]
                runs[-1] = (previous, last[1], stop, last[3])
            else:
                runs.append((source, start, stop, size))
            size += stop - start
        for source, start, stop, new_start in runs:
            delta = new_start - start
            segment = source.order[start:stop]
            order.extend(segment)
            ends.extend([end + delta for end in source.ends[start:stop]])
            # A top-level child's parent is the new root (the old root at 0 in ``previous``,
            # none in a child's own index); every other parent moves with its run.
            top = 0 if source is previous else -1
            parents.extend(
                [0 if parent == top else parent + delta for parent in source._parents[start:stop]]
            )
            positions.update(zip(map(id, segment), range(new_start, new_start + len(segment))))
        ends[0] = len(order)
        index.order, index.ends, index.positions, index._parents = order, ends, positions, parents
        index._by_type = _by_type(runs, root)
        return index

    @property
    def parents(self) -> list[int]:
        """The position of each node's parent (-1 for the root)."""
        return self._parents

    def by_type(self) -> dict[type, list[int]]:
        """The positions of the nodes of each type, in order."""
        return self._by_type

    def extent(self, node: cst.CSTNode) -> Optional[tuple[int, int]]:
        """Where ``node``'s subtree lies in ``order``; None for a node of another tree."""
        start = self.positions.get(id(node))
        if start is None or self.order[start] is not node:
            return None
        return start, self.ends[start]

    def own_nodes(
        self, node: cst.CSTNode, nested: AbstractSet[type]
    ) -> Optional[list[cst.CSTNode]]:
        """``node`` and the nodes below it, in pre-order (the source order), where a node of a
        ``nested`` type is kept but what it holds is jumped over; None for a node of another
        tree."""
        found = self.extent(node)
        if found is None:
            return None
        order, ends = self.order, self.ends
        position, end = found
        own = [order[position]]
        position += 1
        while position < end:
            current = order[position]
            own.append(current)
            position = ends[position] if type(current) in nested else position + 1
        return own


def _by_type(
    runs: list[tuple[NodeIndex, int, int, int]], root: cst.CSTNode
) -> dict[type, list[int]]:
    """The positions by node type of a tree assembled from ``runs``: each run's share of its
    source's lists (found by bisection), shifted."""
    by_type: dict[type, list[int]] = {type(root): [0]}
    for source, start, stop, new_start in runs:
        delta = new_start - start
        for node_type, found in source._by_type.items():
            first, last = bisect_left(found, start), bisect_left(found, stop)
            if first == last:
                continue
            known = by_type.get(node_type)
            shifted = [position + delta for position in found[first:last]]
            if known is None:
                by_type[node_type] = shifted
            else:
                known.extend(shifted)
    return by_type


# The indexed trees of the analysis under way: first the tree being analyzed, then the other
# trees it reads (the script a helper module is checked for, the project modules it loads).
_TREES: ContextVar[Optional[list[NodeIndex]]] = ContextVar("smpfix_node_indexes", default=None)


@contextmanager
def indexed(root: cst.CSTNode, index: Optional[NodeIndex] = None) -> Iterator[NodeIndex]:
    """Index ``root`` for the duration of the block (one file's analysis); ``index`` is one
    built earlier for the same tree (a parsed helper module kept between analyses). Inside
    another file's analysis (a helper checked for the script that imports it), the outer
    trees stay known to ``iter_nodes`` and ``walk``."""
    if index is None or index.root is not root:
        index = NodeIndex(root)
    trees = _TREES.get()
    if trees is None:
        token = _TREES.set([index])
        try:
            yield index
        finally:
            _TREES.reset(token)
        return
    trees.insert(0, index)
    try:
        yield index
    finally:
        del trees[0]


def also_indexed(index: NodeIndex) -> None:
    """Let the analysis under way replay ``index`` when it searches or walks that tree (a
    project module it loaded, indexed when it was parsed); no effect outside an analysis."""
    trees = _TREES.get()
    if trees is not None and all(known is not index for known in trees):
        trees.append(index)


def active_index(root: cst.CSTNode) -> Optional[NodeIndex]:
    """The index of ``root``'s tree when it is the one being analyzed, else None."""
    trees = _TREES.get()
    return trees[0] if trees and trees[0].root is root else None


def _extent(node: cst.CSTNode) -> Optional[tuple[NodeIndex, int, int]]:
    """Where ``node`` lies in the index of the tree being analyzed."""
    trees = _TREES.get()
    if not trees:
        return None
    found = trees[0].extent(node)
    return (trees[0], *found) if found is not None else None


def _known_extent(node: cst.CSTNode) -> Optional[tuple[NodeIndex, int, int]]:
    """Where ``node`` lies in any index the analysis holds: for the searches and walks whose
    result is the same with or without an index (the nodes of a subtree, in pre-order)."""
    for index in _TREES.get() or ():
        found = index.extent(node)
        if found is not None:
            return (index, *found)
    return None


def subtree(node: cst.CSTNode) -> Optional[tuple[list[cst.CSTNode], list[int], int, int]]:
    """``node``'s subtree in the active index: (pre-order nodes, subtree ends, start, end);
    None outside ``indexed`` or for a node of another tree."""
    known = _extent(node)
    if known is None:
        return None
    index, start, end = known
    return index.order, index.ends, start, end


def known_subtree(node: cst.CSTNode) -> Optional[tuple[list[cst.CSTNode], list[int], int, int]]:
    """``subtree`` in any tree the analysis holds an index of, for searches whose answer is
    the same set of nodes with or without an index; None when none holds ``node``."""
    known = _known_extent(node)
    if known is None:
        return None
    index, start, end = known
    return index.order, index.ends, start, end


def known_own_nodes(node: cst.CSTNode, nested: AbstractSet[type]) -> Optional[list[cst.CSTNode]]:
    """``node`` and the nodes below it, in pre-order, where a node of a ``nested`` type is kept
    but what it holds is jumped over (a nested function's code runs elsewhere); read from the
    index that holds ``node``, None when none does (the caller walks instead)."""
    known = _known_extent(node)
    return known[0].own_nodes(node, nested) if known is not None else None


def iter_nodes(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """Every node below ``node`` (inclusive), pre-order; for rules that search a subtree."""
    known = _known_extent(node)
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


def nodes_of_type(node: cst.CSTNode, *types: type[T]) -> list[T]:
    """The nodes of exactly ``types`` (LibCST's concrete node classes, which have no
    subclasses) below ``node`` (inclusive), pre-order: with an index, read from its nodes by
    type rather than by testing every node of the subtree."""
    known = _known_extent(node)
    if known is None:
        return [found for found in iter_nodes(node) if type(found) in types]  # type: ignore[misc]
    index, start, end = known
    by_type = index.by_type()
    positions: list[int] = []
    for node_type in types:
        of_type = by_type.get(node_type, [])
        positions.extend(of_type[bisect_left(of_type, start) : bisect_left(of_type, end)])
    if len(types) > 1:
        positions.sort()
    return [index.order[position] for position in positions]  # type: ignore[misc]


Handler = Callable[[Any], Any]


_HANDLER_NAMES: dict[type, frozenset[str]] = {}


def _handler_names(visitor_type: type) -> frozenset[str]:
    """The ``visit_*``/``leave_*`` methods a visitor class defines (its own or inherited)."""
    names = _HANDLER_NAMES.get(visitor_type)
    if names is None:
        names = _HANDLER_NAMES[visitor_type] = frozenset(
            n for n in dir(visitor_type) if n.startswith(("visit_", "leave_"))
        )
    return names


class Dispatch:
    """The ``visit_<Node>``/``leave_<Node>`` methods of a set of visitors, looked up once per type.

    Handlers are methods of the visitors' classes: which classes handle a node type is
    worked out once per run (the same rules check every file), and a new Dispatch per file
    (the rules are new objects per file) only binds the methods that exist.
    """

    def __init__(self, visitors: Sequence[object]) -> None:
        self.visitors = visitors
        self._which = _handler_table(tuple(type(visitor) for visitor in visitors))
        self._handlers: dict[type, tuple[tuple[Handler, ...], tuple[Handler, ...]]] = {}

    def handlers(self, node_type: type) -> tuple[tuple[Handler, ...], tuple[Handler, ...]]:
        found = self._handlers.get(node_type)
        if found is None:
            visits, leaves = self._which(node_type)
            visit, leave = f"visit_{node_type.__name__}", f"leave_{node_type.__name__}"
            found = (
                tuple(getattr(self.visitors[i], visit) for i in visits),
                tuple(getattr(self.visitors[i], leave) for i in leaves),
            )
            self._handlers[node_type] = found
        return found


_TABLES: dict[tuple[type, ...], Callable[[type], tuple[tuple[int, ...], tuple[int, ...]]]] = {}


def _handler_table(
    classes: tuple[type, ...],
) -> Callable[[type], tuple[tuple[int, ...], tuple[int, ...]]]:
    """For one sequence of visitor classes (the same for every file of a run): which of them
    visit and leave each node type, remembered across files."""
    table = _TABLES.get(classes)
    if table is None:
        names = [_handler_names(cls) for cls in classes]
        known: dict[type, tuple[tuple[int, ...], tuple[int, ...]]] = {}

        def which(node_type: type) -> tuple[tuple[int, ...], tuple[int, ...]]:
            found = known.get(node_type)
            if found is None:
                visit, leave = f"visit_{node_type.__name__}", f"leave_{node_type.__name__}"
                found = known[node_type] = (
                    tuple(i for i, defined in enumerate(names) if visit in defined),
                    tuple(i for i, defined in enumerate(names) if leave in defined),
                )
            return found

        table = _TABLES[classes] = which
    return table


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


def walk(
    root: cst.CSTNode,
    dispatch: Dispatch,
    ancestry: Ancestry,
    on_error: Callable[[Handler, BaseException], None],
) -> None:
    """Visit ``root`` depth-first calling every visitor's handlers for each node.

    A handler that raises is reported through ``on_error`` and the walk goes on, so one
    broken rule cannot hide the findings of the others. Iterative, so deeply nested code
    cannot exhaust the interpreter's stack here.
    """
    known = _known_extent(root)
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


# Above this share of the nodes with a handler, replaying every node is cheaper than jumping.
_SPARSE_SHARE = 0.25


def _replay(
    index: NodeIndex,
    start: int,
    end: int,
    dispatch: Dispatch,
    ancestry: Ancestry,
    on_error: Callable[[Handler, BaseException], None],
) -> None:
    """``walk`` over an indexed subtree: the same calls in the same order, without traversing."""
    events = _events(index, start, end, dispatch)
    if events is not None:
        _replay_events(index, start, events, dispatch, ancestry, on_error)
        return
    path = ancestry.stack
    order, ends = index.order, index.ends
    table = {kind: dispatch.handlers(kind) for kind in index.by_type()}
    # The nodes entered and not yet left: where each one's subtree ends, and it with its leave
    # handlers.
    open_ends: list[int] = []
    open_nodes: list[tuple[cst.CSTNode, tuple[Handler, ...]]] = []
    for position in range(start, end):
        while open_ends and open_ends[-1] <= position:
            open_ends.pop()
            left, leaves = open_nodes.pop()
            for handler in leaves:
                try:
                    handler(left)
                except Exception as exc:
                    on_error(handler, exc)
            path.pop()
        node = order[position]
        visits, leaves = table[type(node)]
        path.append(node)
        for handler in visits:
            try:
                handler(node)
            except Exception as exc:
                on_error(handler, exc)
        if ends[position] == position + 1:  # a leaf (most nodes) is left at once
            for handler in leaves:
                try:
                    handler(node)
                except Exception as exc:
                    on_error(handler, exc)
            path.pop()
        else:
            open_ends.append(ends[position])
            open_nodes.append((node, leaves))
    while open_nodes:
        left, leaves = open_nodes.pop()
        for handler in leaves:
            try:
                handler(left)
            except Exception as exc:
                on_error(handler, exc)
        path.pop()


def _events(
    index: NodeIndex, start: int, end: int, dispatch: Dispatch
) -> Optional[list[tuple[int, int, int]]]:
    """The handler calls of a walk over ``order[start:end]`` as ``(when, kind, position)``
    sorted in call order, when few nodes have handlers (a walk for a few rules, as over a
    helper module); None when most do, and replaying every node costs less.

    A visit of node p happens at p (kind 1); its leave happens when the walk reaches the end
    of its subtree, ``ends[p]`` (kind 0, before any visit there), innermost first (-p)."""
    by_type = index.by_type()
    handled: list[tuple[list[int], bool, bool]] = []
    total = 0
    for kind, positions in by_type.items():
        visits, leaves = dispatch.handlers(kind)
        if visits or leaves:
            handled.append((positions, bool(visits), bool(leaves)))
            total += len(positions)
    if total > _SPARSE_SHARE * (end - start):
        return None
    ends = index.ends
    events: list[tuple[int, int, int]] = []
    whole = start == 0 and end == len(index.order)
    for positions, visit, leave in handled:
        for position in positions:
            if not whole and not start <= position < end:
                continue
            if visit:
                events.append((position, 1, position))
            if leave:
                events.append((ends[position], 0, -position))
    events.sort()
    return events


def _replay_events(
    index: NodeIndex,
    start: int,
    events: list[tuple[int, int, int]],
    dispatch: Dispatch,
    ancestry: Ancestry,
    on_error: Callable[[Handler, BaseException], None],
) -> None:
    """Call the handlers of ``events`` with the ancestry a full walk would show at each."""
    path = ancestry.stack
    order, ends, parents = index.order, index.ends, index.parents
    handlers = dispatch.handlers
    chain: list[int] = []  # positions of the nodes on ``path`` added by this walk
    for _, kind, signed in events:
        position = signed if kind else -signed
        while chain and not (chain[-1] <= position < ends[chain[-1]]):
            chain.pop()
            path.pop()
        missing = []
        above = position
        while above >= start and (not chain or above != chain[-1]):
            missing.append(above)
            above = parents[above]
        for added in reversed(missing):
            chain.append(added)
            path.append(order[added])
        node = order[position]
        for handler in handlers(type(node))[0 if kind else 1]:
            try:
                handler(node)
            except Exception as exc:
                on_error(handler, exc)
    for _ in chain:
        path.pop()
