"""Does one call run before another, on one path through the same function?

Rules about the order of library calls (``smp.resume_from_checkpoint`` before
``smp.DistributedOptimizer`` under sharded data parallelism, ``smp.set_activation_checkpointing``
before ``smp.DistributedModel``) ask it. Within one function body source order is execution
order, except that the two arms of an ``if``/``else`` (or of a ``try``'s handlers) never both
run; across functions this module does not answer (None) rather than guess.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.parents import ParentIndex
from smpfix.program.facts import FileFacts


def _branch_side(parents: ParentIndex, node: cst.CSTNode) -> dict[int, int]:
    """For each ``if``/``try`` around ``node`` (in its function): which arm holds it."""
    sides: dict[int, int] = {}
    child = node
    for ancestor in parents.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            break
        if isinstance(ancestor, cst.If):
            if child is ancestor.body:
                sides[id(ancestor)] = 0
            elif child is ancestor.orelse:
                sides[id(ancestor)] = 1
        elif isinstance(ancestor, cst.Try):
            if child is ancestor.body:
                sides[id(ancestor)] = 0
            else:
                arm = next(
                    (i for i, handler in enumerate(ancestor.handlers) if handler is child), None
                )
                if arm is not None:
                    sides[id(ancestor)] = 1 + arm
        child = ancestor
    return sides


def exclusive(parents: ParentIndex, first: cst.CSTNode, second: cst.CSTNode) -> bool:
    """Whether the two sit on different arms of one branch, so never both run in one call."""
    mine = _branch_side(parents, first)
    theirs = _branch_side(parents, second)
    return any(key in mine and mine[key] != arm for key, arm in theirs.items())


def runs_earlier(
    facts: FileFacts, parents: ParentIndex, first: cst.Call, second: cst.Call
) -> Optional[bool]:
    """True when ``first`` runs before ``second`` on some path of one function body, False when
    it cannot (it comes later, or the two are exclusive), None when they are in different
    functions."""
    if parents.scope_of(first) is not parents.scope_of(second):
        return None
    if exclusive(parents, first, second):
        return False
    return facts.runs_before(first, second)
