"""Where a script still uses the object it handed to ``smp.DistributedModel`` or
``smp.DistributedOptimizer``.

Scripts often keep both names: ``net = Net(); model = smp.DistributedModel(net)``, or
``opt = AdamW(...); optimizer = smp.DistributedOptimizer(opt)``. Library calls that need the
wrapper (``smp.save_checkpoint(model=..., optimizer=...)``) and calls that only see one
partition's parameters (``clip_grad_norm_(net.parameters())``) then get the raw object.

A name counts as the raw object at a use when the assignments of it that reach the use
(``Names.reaching``: in order through the function, both sides of a branch, module-level
values for a name the function does not bind) are the ones that reached the wrap call, and
no parameter or unreadable binding is among them.
``model.module`` and ``model.get_module()`` on the wrapped model are its raw module too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.imports import dotted_name
from smpfix.program.facts import Wrap
from smpfix.program.names import Names
from smpfix.program.objects.model_names import DistributedModelNames
from smpfix.program.order.execution import ExecutionOrder
from smpfix.program.project.parsed_file import ParsedFile


@dataclass(frozen=True)
class Unwrapped:
    """A use of a raw object. ``wrapped`` is how the use site can name the wrapper, when it can."""

    use: cst.BaseExpression
    wrapped: Optional[str]
    what: str


def _same_binding(
    file: ParsedFile,
    name: str,
    wrap: Wrap,
    use: cst.BaseExpression,
    at: cst.Call,
) -> bool:
    """Does ``name`` at ``use`` hold what it held when ``wrap`` ran (the same reaching
    definitions, and the use runs later when both are in one function)?"""
    if wrap.argument is None or wrap.where is None:
        return False
    flow = file.facts.names
    order = file.answer(ExecutionOrder)
    if flow.index.scope_of(use) is wrap.where.scope and not order.runs_before(wrap.call, at):
        return False
    at_wrap, at_use = flow.reaching(name, wrap.argument), flow.reaching(name, use)
    if not at_wrap.assignments or at_wrap.opaque or at_use.opaque:
        return False
    return [id(a) for a in at_wrap.assignments] == [id(a) for a in at_use.assignments]


def _visible(flow: Names, wrap: Wrap, use: cst.BaseExpression) -> Optional[str]:
    """The wrap's target, if the use site sees it bound to the wrapper and nothing else."""
    if wrap.target is None:
        return None
    single = flow.reaching(wrap.target, use).single
    return wrap.target if single is not None and single.value is wrap.call else None


def raw_name(
    file: ParsedFile, expr: cst.BaseExpression, wraps: Sequence[Wrap], at: cst.Call
) -> Optional[Unwrapped]:
    """``expr`` (an argument of the call ``at``) is a name that still holds the object one of
    ``wraps`` wrapped."""
    if type(expr) is not cst.Name:
        return None
    for wrap in wraps:
        if wrap.argument_name != expr.value or wrap.target in (None, expr.value):
            continue
        if _same_binding(file, expr.value, wrap, expr, at):
            wrapper = dotted_name(wrap.call.func) or "the wrapper"
            return Unwrapped(
                expr,
                _visible(file.facts.names, wrap, expr),
                f"the object that `{wrapper}(...)` wrapped",
            )
    return None


def raw_module(
    file: ParsedFile,
    expr: cst.BaseExpression,
    models: DistributedModelNames,
    functions: Sequence[cst.FunctionDef],
    at: cst.Call,
) -> Optional[Unwrapped]:
    """``expr`` is the module inside the ``smp.DistributedModel``: the name it wrapped,
    ``model.module`` or ``model.get_module()``."""
    found = raw_name(file, expr, file.facts.distributed_models, at)
    if found is not None:
        return found
    inner = expr
    if (
        type(inner) is cst.Call
        and not inner.args
        and type(inner.func) is cst.Attribute
        and inner.func.attr.value == "get_module"
    ):
        inner = inner.func
    elif not (type(inner) is cst.Attribute and inner.attr.value == "module"):
        return None
    assert type(inner) is cst.Attribute
    receiver = inner.value
    if type(receiver) is cst.Name and models.holds_model(receiver.value, functions):
        return Unwrapped(expr, receiver.value, "the module inside the `smp.DistributedModel`")
    return None
