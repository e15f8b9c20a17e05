"""Where a script still uses the object it handed to ``smp.DistributedModel`` or ``smp.DistributedOptimizer``.

Scripts often keep both names: ``net = Net(); model = smp.DistributedModel(net)``, or
``opt = AdamW(...); optimizer = smp.DistributedOptimizer(opt)``. Library calls that need the
wrapper (``smp.save_checkpoint(model=..., optimizer=...)``) and calls that only see one
partition's parameters (``clip_grad_norm_(net.parameters())``) then get the raw object.

A name counts as the raw object at a use when the assignments of it that reach the use are
the ones that reached the wrap call (without flow analysis: ``reaching_assignments``), or,
for a wrap at module level, when the function of the use does not bind the name itself.
``model.module`` and ``model.get_module()`` on the wrapped model are its raw module too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import bound_names
from smpfix.base.imports import dotted_name
from smpfix.program.facts import FileFacts, Scope, Wrap
from smpfix.program.model_names import DistributedModelNames, parameter_names
from smpfix.program.wrapped_model import reaching_assignments


@dataclass(frozen=True)
class Unwrapped:
    """A use of a raw object. ``wrapped`` is how the use site can name the wrapper, when it can."""

    use: cst.BaseExpression
    wrapped: Optional[str]
    what: str


def _binds(scope: Scope, name: str) -> bool:
    if isinstance(scope, cst.Module):
        return True
    return name in bound_names(scope.body) or name in parameter_names(scope)


def _same_binding(facts: FileFacts, name: str, wrap: Wrap, scope: Scope, use: cst.Call) -> bool:
    """Does ``name`` at ``use`` hold what it held when ``wrap`` ran?"""
    if wrap.where is None:
        return False
    wrap_scope = wrap.where.scope
    if wrap_scope is scope:
        if not facts.runs_before(wrap.call, use) or _unordered_assignment(facts, name, scope):
            return False
        at_wrap = reaching_assignments(facts, name, scope, wrap.call)
        at_use = reaching_assignments(facts, name, scope, use)
        return bool(at_wrap) and [id(a) for a in at_wrap] == [id(a) for a in at_use]
    if isinstance(wrap_scope, cst.Module) and isinstance(scope, cst.FunctionDef) and not _binds(scope, name):
        module_level = [a for a in facts.assignments.get(name, ()) if a.where is not None and isinstance(a.where.scope, cst.Module)]
        return bool(module_level) and all(_assigned_before(facts, a.value, wrap.call) for a in module_level)
    return False


def _unordered_assignment(facts: FileFacts, name: str, scope: Scope) -> bool:
    """An assignment of ``name`` in ``scope`` whose value calls nothing (``net = model``):
    source order of calls cannot place it, so smpfix cannot tell what ``name`` holds."""
    from smpfix.base.walker import iter_nodes

    return any(
        a.where is not None and a.where.scope is scope and not any(isinstance(n, cst.Call) for n in iter_nodes(a.value))
        for a in facts.assignments.get(name, ())
    )


def _assigned_before(facts: FileFacts, value: cst.BaseExpression, call: cst.Call) -> bool:
    return isinstance(value, cst.Call) and value is not call and facts.runs_before(value, call)


def _visible(facts: FileFacts, wrap: Wrap, scope: Scope, use: cst.Call) -> Optional[str]:
    """The wrap's target, if the use site sees it bound to the wrapper."""
    target = wrap.target
    if target is None or wrap.where is None:
        return None
    if wrap.where.scope is scope:
        last = reaching_assignments(facts, target, scope, use)
        return target if last and last[0].value is wrap.call else None
    if isinstance(wrap.where.scope, cst.Module) and isinstance(scope, cst.FunctionDef) and not _binds(scope, target):
        return target if facts.single_assignment(target) is not None else None
    return None


def raw_name(facts: FileFacts, expr: cst.BaseExpression, wraps: Sequence[Wrap], scope: Scope, use: cst.Call) -> Optional[Unwrapped]:
    """``expr`` is a name that still holds the object one of ``wraps`` wrapped."""
    if not isinstance(expr, cst.Name):
        return None
    for wrap in wraps:
        if wrap.argument_name != expr.value or wrap.target in (None, expr.value):
            continue
        if _same_binding(facts, expr.value, wrap, scope, use):
            wrapper = dotted_name(wrap.call.func) or "the wrapper"
            return Unwrapped(expr, _visible(facts, wrap, scope, use), f"the object that `{wrapper}(...)` wrapped")
    return None


def raw_module(
    facts: FileFacts,
    expr: cst.BaseExpression,
    models: DistributedModelNames,
    functions: Sequence[cst.FunctionDef],
    scope: Scope,
    use: cst.Call,
) -> Optional[Unwrapped]:
    """``expr`` is the module inside the ``smp.DistributedModel``: the name it wrapped,
    ``model.module`` or ``model.get_module()``."""
    found = raw_name(facts, expr, facts.distributed_models, scope, use)
    if found is not None:
        return found
    inner = expr
    if isinstance(inner, cst.Call) and not inner.args and isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "get_module":
        inner = inner.func
    elif not (isinstance(inner, cst.Attribute) and inner.attr.value == "module"):
        return None
    assert isinstance(inner, cst.Attribute)
    receiver = inner.value
    if isinstance(receiver, cst.Name) and models.holds_model(receiver.value, functions):
        return Unwrapped(expr, receiver.value, "the module inside the `smp.DistributedModel`")
    return None
