"""What a ``with`` block around model construction sets up: TP, delayed init, a partition.

Three library context managers change how modules built inside them behave:
``smp.tensor_parallelism(enabled=True)`` and ``smp.model_creation(tensor_parallelism=...)``
mark modules for tensor parallelism, ``smp.delay_param_initialization(enabled=True)`` (and
``model_creation``, when the ``delayed_parameter_initialization`` setting is on) postpones
parameter allocation, and ``smp.partition(i)`` places modules on pipeline stage ``i``. Rules
about loading weights, model size and tied parameters ask which of these surround a
statement; this module answers from the ``with`` items alone, never guessing a value it
cannot read (a non-literal ``enabled=`` is ``Tri.UNKNOWN``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.job.jobfacts import Tri
from smpfix.program.facts import FileFacts

CONTEXT_MEMBERS = frozenset(
    {"tensor_parallelism", "model_creation", "delay_param_initialization", "partition"}
)


@dataclass(frozen=True)
class CreationContext:
    """One library context manager call in a ``with`` item.

    ``delayed_init`` says whether the context turns delayed initialisation on (OFF when the
    context is about something else); ``delayed_from_config`` is True for
    ``model_creation``, whose delayed initialisation follows the job setting
    ``delayed_parameter_initialization``; ``partition`` is the literal stage index of
    ``smp.partition(i)``.
    """

    call: cst.Call
    member: str
    delayed_init: Tri = Tri.OFF
    delayed_from_config: bool = False
    partition: Optional[int] = None


def _flag(
    facts: FileFacts, call: cst.Call, keyword: str, position: Optional[int], default: Tri
) -> Tri:
    found = argument(call, keyword, position)
    if found is None:
        return default
    value = facts.literal(found.value)
    if value is True:
        return Tri.ON
    if value is False or value is None:
        return Tri.OFF
    return Tri.UNKNOWN


def creation_context(facts: FileFacts, expr: cst.BaseExpression) -> Optional[CreationContext]:
    """The context ``expr`` (a ``with`` item) sets up, or None when it is not one of the
    library's."""
    if type(expr) is not cst.Call:
        return None
    member = facts.smp_member(expr.func)
    if member not in CONTEXT_MEMBERS:
        return None
    if member == "tensor_parallelism":
        return CreationContext(expr, member)
    if member == "model_creation":
        return CreationContext(expr, member, delayed_from_config=True)
    if member == "delay_param_initialization":
        return CreationContext(expr, member, delayed_init=_flag(facts, expr, "enabled", 0, Tri.ON))
    index = argument(expr, "index", 0)
    value = facts.literal(index.value) if index is not None else None
    partition = value if isinstance(value, int) and not isinstance(value, bool) else None
    return CreationContext(expr, member, partition=partition)


def contexts_of(facts: FileFacts, with_node: cst.With) -> list[CreationContext]:
    """The library contexts among a ``with`` statement's items, in order."""
    return [
        found
        for item in with_node.items
        if (found := creation_context(facts, item.item)) is not None
    ]


def enclosing_contexts(facts: FileFacts, stack: Sequence[cst.CSTNode]) -> Iterator[CreationContext]:
    """Contexts whose ``with`` body holds the innermost node of ``stack`` (an ancestor chain),
    outermost first."""
    for position, node in enumerate(stack):
        if (
            type(node) is cst.With
            and position + 1 < len(stack)
            and stack[position + 1] is node.body
        ):
            yield from contexts_of(facts, node)
