"""Which side of each branch a piece of code sits on: the one definition of "never both run".

Two calls are *exclusive* when they sit on different sides of one branch, so one run of the
script never runs both. The sides of a branch are:

- an ``if``: its body (arm 0) and its ``else``/``elif`` (arm 1); a conditional expression
  ``x if c else y`` the same way;
- a ``try``: its body and ``else`` (arm 0) and each handler (arms 1, 2, ...); its
  ``finally`` runs on every side;
- a ``match``: each case (arms 0, 1, ...);
- an early exit: the code after ``if cond: return`` (or ``raise``, ``continue``, ``break``)
  runs only on that ``if``'s other side, as if it were its ``else``.

``ExecutionOrder`` records these sides for every call it follows from the top of the file,
and ``branch_sides`` reads the same sides for any node from the tree, within its function;
a property test holds the two to one another.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.parents import ParentIndex

JUMPS = (cst.Return, cst.Raise, cst.Continue, cst.Break)
JUMP_TYPES = frozenset(JUMPS)
# A side stops at the function (or lambda, or class) whose body holds the code.
_SCOPE_TYPES = frozenset({cst.FunctionDef, cst.Lambda, cst.ClassDef})


@dataclass(frozen=True)
class Side:
    """One side of a branch: ``arm`` 0 is an ``if`` body (or ``try`` body), 1 its ``else``;
    ``try`` handlers and ``match`` cases are numbered from 1 and 0."""

    branch: cst.CSTNode
    arm: int


def exclusive(first: Iterable[Side], second: Iterable[Side]) -> bool:
    """Whether code on the ``first`` sides and code on the ``second`` sides sit on different
    sides of one branch (never both in one run)."""
    mine = {id(side.branch): side.arm for side in first}
    return any(mine.get(id(side.branch), side.arm) != side.arm for side in second)


def branch_sides(parents: ParentIndex, node: cst.CSTNode) -> tuple[Side, ...]:
    """The sides of the branches around ``node`` in its own function, outermost first."""
    found: list[Side] = []
    child = node
    for parent in parents.ancestors(node):
        kind = type(parent)
        if kind is cst.If or kind is cst.IfExp:
            if child is parent.body:  # type: ignore[attr-defined]
                found.append(Side(parent, 0))
            elif child is parent.orelse:  # type: ignore[attr-defined]
                found.append(Side(parent, 1))
        elif kind is cst.Try:
            found.extend(_try_side(parent, child))  # type: ignore[arg-type]
        elif kind is cst.Match:
            found.extend(
                Side(parent, number)
                for number, case in enumerate(parent.cases)  # type: ignore[attr-defined]
                if case is child
            )
        elif kind is cst.IndentedBlock or kind is cst.Module:
            found.extend(reversed(_exits_before(parent.body, child)))  # type: ignore[attr-defined]
        if kind in _SCOPE_TYPES:
            break
        child = parent
    found.reverse()
    return tuple(found)


def _try_side(node: cst.Try, child: cst.CSTNode) -> list[Side]:
    if child is node.body or child is node.orelse:
        return [Side(node, 0)]
    return [
        Side(node, number)
        for number, handler in enumerate(node.handlers, start=1)
        if handler is child
    ]


def _exits_before(body: Sequence[cst.CSTNode], child: cst.CSTNode) -> list[Side]:
    """The sides the early exits before ``child`` in ``body`` leave it on, in order."""
    found: list[Side] = []
    for statement in body:
        if statement is child:
            break
        if type(statement) is cst.If:
            side = exit_side(statement)  # type: ignore[arg-type]
            if side is not None:
                found.append(side)
    return found


def exit_side(node: cst.If) -> Optional[Side]:
    """The side the code after ``node`` runs on when one of its arms always jumps out (the
    ``else`` side after ``if cond: return``), None when neither or both do."""
    body = jumps(_statements(node.body))
    if node.orelse is None:
        other = False
    elif type(node.orelse) is cst.If:
        other = _if_jumps(node.orelse)
    else:
        other = jumps(_statements(node.orelse.body))
    if body and not other:
        return Side(node, 1)
    if other and not body:
        return Side(node, 0)
    return None


def jumps(statements: Sequence[cst.CSTNode]) -> bool:
    """Whether running ``statements`` always ends in a jump out of them (``return``,
    ``raise``, ``continue``, ``break``), as far as their structure shows."""
    return any(_statement_jumps(statement) for statement in statements)


def _statement_jumps(statement: cst.CSTNode) -> bool:
    kind = type(statement)
    if kind is cst.SimpleStatementLine:
        return any(type(small) in JUMP_TYPES for small in statement.body)  # type: ignore[attr-defined]
    if kind is cst.If:
        return _if_jumps(statement)  # type: ignore[arg-type]
    if kind is cst.With:
        return jumps(_statements(statement.body))  # type: ignore[attr-defined]
    if kind is cst.Try:
        final = statement.finalbody  # type: ignore[attr-defined]
        return final is not None and jumps(_statements(final.body))
    return False


def _if_jumps(node: cst.If) -> bool:
    """Both arms of ``node`` always jump out."""
    if node.orelse is None or not jumps(_statements(node.body)):
        return False
    if type(node.orelse) is cst.If:
        return _if_jumps(node.orelse)
    return jumps(_statements(node.orelse.body))


def _statements(suite: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    if type(suite) is cst.IndentedBlock:
        return suite.body
    if type(suite) is cst.SimpleStatementSuite:
        return [cst.SimpleStatementLine(body=suite.body)]
    return []
