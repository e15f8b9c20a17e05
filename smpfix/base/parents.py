"""Parents and enclosing functions of every node, for the rules that follow values around.

The shared walk gives a rule the ancestors of the node being visited, but a rule that decides
at the end of the file ("is this loader's batch ever handed to a step function?") needs the
parent of nodes it found later. During an analysis the tree's node index (``walker``)
already knows every parent, and this answers from it; elsewhere building it is one more walk
of the tree, so rules build it only for files where they already have a candidate to look at.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional, TypeVar, Union

import libcst as cst

from smpfix.base.walker import NodeIndex, active_index, children

# The code a name is bound in: the module or a function (class bodies, lambdas and
# comprehensions count as part of the code around them).
CodeScope = Union[cst.Module, cst.FunctionDef]
T = TypeVar("T")


class ParentIndex:
    """``parent_of`` and ``scope_of`` for every node of one module (its code is not copied)."""

    def __init__(self, module: cst.Module, index: Optional[NodeIndex] = None) -> None:
        """``index``: the tree's node index when it is not the one being analyzed (a parsed
        project module); the answers are the same, without a walk of the tree."""
        self.module = module
        self._index: Optional[NodeIndex] = (
            index if index is not None and index.root is module else active_index(module)
        )
        self._parent: dict[cst.CSTNode, cst.CSTNode] = {}
        if self._index is not None:
            return
        stack: list[cst.CSTNode] = [module]
        while stack:
            node = stack.pop()
            for child in children(node):
                self._parent[child] = node
                stack.append(child)

    def parent_of(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        index = self._index
        if index is None:
            return self._parent.get(node)
        position = index.positions.get(id(node))
        if position is None or index.order[position] is not node or position == 0:
            return None
        return index.order[index.parents[position]]

    def scope_of(self, node: cst.CSTNode) -> CodeScope:
        """The innermost function whose body holds ``node`` (the module at top level)."""
        for ancestor in self.ancestors(node):
            if type(ancestor) is cst.FunctionDef:  # exact: faster than ABCMeta's isinstance
                return ancestor
        return self.module

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """The parent of ``node``, its parent, and so on up to the module."""
        index = self._index
        if index is None:
            current = self.parent_of(node)
            while current is not None:
                yield current
                current = self.parent_of(current)
            return
        position = index.positions.get(id(node))
        if position is None or index.order[position] is not node:
            return
        order, parents = index.order, index.parents
        position = parents[position]
        while position >= 0:
            yield order[position]
            position = parents[position]

    def nodes(self) -> Iterator[cst.CSTNode]:
        """Every node of the module except the module itself, in no particular order."""
        if self._index is not None:
            return iter(self._index.order[1:])
        return iter(self._parent)

    def indentation(self, node: cst.CSTNode) -> str:
        """The indentation of the statement holding ``node``, as LibCST writes it back."""
        blocks = [a for a in self.ancestors(node) if isinstance(a, cst.IndentedBlock)]
        return "".join(
            b.indent if b.indent is not None else self.module.default_indent
            for b in reversed(blocks)
        )
