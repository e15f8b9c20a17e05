"""The rank guards around a call: the ``if`` blocks holding it and the early exits before it.

Two checkpoint rules ask it of a call they visit (SMP303 for a partial save, SMP307 for the
optimizer's local state), from the walk's ancestry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.program.facts import FileFacts
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.ranks.guards import RankGuard, guarded_by_early_exit, rank_zero_guards


@dataclass(frozen=True)
class EnclosingGuard:
    """A rank guard around the call: an ``if`` whose body holds it, or an early exit before it."""

    guards: tuple[RankGuard, ...]
    test: cst.BaseExpression
    if_node: Optional[cst.If]


def enclosing_guards(
    stack: Sequence[cst.CSTNode], facts: FileFacts, modules: Optional[LocalModules]
) -> list[EnclosingGuard]:
    """The guards along ``stack`` (the ancestry of the node, outermost first)."""
    found: list[EnclosingGuard] = []
    for position, node in enumerate(stack[:-1]):
        if type(node) is cst.If and stack[position + 1] is node.body:
            guards = rank_zero_guards(node.test, facts, modules)
            if guards:
                found.append(EnclosingGuard(tuple(guards), node.test, node))
        ref = facts.statement_of(node)
        if ref is not None:
            for guard, exit_node in guarded_by_early_exit(ref, facts):
                found.append(EnclosingGuard((guard,), exit_node.test, None))
    return found
