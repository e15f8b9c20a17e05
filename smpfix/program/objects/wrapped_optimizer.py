"""Which ``smp.DistributedOptimizer(...)`` an expression holds, and what optimizer it wraps.

``StepLR(optimizer)`` is wrong under fp16 when ``optimizer`` is what ``smp.DistributedOptimizer``
returned; ``optimizer.step()`` matters in SMP 1.3 when the wrapped optimizer is ``Adadelta``.
Both start from a use of a name and need the wrap behind it: the last assignment of the name
in its function before the use, or, for a parameter, what every call site of the function in
this file passes (one level up). Anything else is None: the rules then stay quiet.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.call_binding import bind_arguments
from smpfix.program.facts import FileFacts, Wrap
from smpfix.program.objects.wrapped_model import latest_assignment
from smpfix.program.project.parsed_file import ParsedFile


def optimizer_wrap(
    file: ParsedFile, expr: cst.BaseExpression, at: cst.Call, depth: int = 0
) -> Optional[Wrap]:
    """The ``smp.DistributedOptimizer`` call whose result ``expr`` (used in ``at``) holds, if the
    file shows it."""
    facts, parents = file.facts, file.parents
    wraps = {id(wrap.call): wrap for wrap in facts.distributed_optimizers}
    if type(expr) is cst.Call:
        return wraps.get(id(expr))
    if type(expr) is not cst.Name:
        return None
    scope = parents.scope_of(at)
    assignment = latest_assignment(facts, expr)
    if assignment is not None:
        return wraps.get(id(assignment.value))
    if type(scope) is cst.FunctionDef and depth < 1:
        return _through_parameter(file, scope, expr.value, depth)
    return None


def _through_parameter(
    file: ParsedFile, function: cst.FunctionDef, name: str, depth: int
) -> Optional[Wrap]:
    """What the callers of ``function`` pass as parameter ``name``: one wrap, when all agree."""
    found: Optional[Wrap] = None
    calls = file.facts.calls_by_name.get(function.name.value, ())
    for call in calls:
        bound = bind_arguments(function, call)
        value = bound.get(name) if bound is not None else None
        wrap = optimizer_wrap(file, value, call, depth + 1) if value is not None else None
        if wrap is None or (found is not None and wrap is not found):
            return None
        found = wrap
    return found


def wrapped_optimizer_class(facts: FileFacts, wrap: Wrap) -> Optional[str]:
    """The qualified class of the optimizer ``wrap`` wraps (``torch.optim.Adadelta``), if shown."""
    inner = wrap.argument
    if type(inner) is cst.Name and wrap.where is not None:
        assignment = latest_assignment(facts, inner)
        inner = assignment.value if assignment is not None else None
    if type(inner) is cst.Call:
        return facts.qualified_name(inner.func)
    return None
