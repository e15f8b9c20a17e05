"""Is a loss a sum over samples rather than a mean? (``F.cross_entropy(..., reduction="sum")``)

The library averages gradients across microbatches by default, which is right for a mean loss
and scales a summed loss down by the number of microbatches. A loss counts as summed when it
is built, inside one function, from

- a call with ``reduction="sum"`` (every ``torch.nn.functional`` loss, and the
  ``nn.*Loss(reduction="sum")`` module called as ``criterion(out, y)`` when the file builds
  ``criterion`` that way), or the deprecated ``size_average=False``;
- ``.sum()`` (or ``torch.sum``) over a ``reduction="none"`` loss;
- an addition or subtraction with a summed loss (``loss + aux``), or a name every assignment
  of which in the function is summed.

Anything divided (``/``, ``/=``), multiplied (a ``1 / n`` factor is a mean), or unreadable is
not summed: the rules stay quiet rather than guess.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.walker import iter_nodes
from smpfix.program.facts import FileFacts
from smpfix.program.steps import own_nodes

_MAX_DEPTH = 6


def _reduction(call: cst.Call, facts: FileFacts) -> Optional[str]:
    """``"sum"``/``"mean"``/``"none"`` as the call states it (``size_average=False`` is a sum)."""
    reduction = argument(call, "reduction")
    if reduction is not None:
        value = facts.literal(reduction.value)
        return value if isinstance(value, str) else None
    size_average = argument(call, "size_average")
    reduce = argument(call, "reduce")
    if size_average is not None and facts.literal(size_average.value) is False:
        if reduce is None or facts.literal(reduce.value) is not False:
            return "sum"
    return None


def _reads(expr: cst.BaseExpression, name: str) -> bool:
    return any(type(node) is cst.Name and node.value == name for node in iter_nodes(expr))


def _adds_to(expr: cst.BaseExpression, name: str) -> bool:
    """``loss + aux`` or ``aux - loss + reg`` for ``name`` ``loss``: still a sum of it."""
    if type(expr) is cst.Name:
        return expr.value == name
    if type(expr) is cst.BinaryOperation and isinstance(expr.operator, (cst.Add, cst.Subtract)):
        return _adds_to(expr.left, name) or _adds_to(expr.right, name)
    return False


class LossReductions:
    """Answers ``summed(expr)`` inside one function of one file."""

    def __init__(self, facts: FileFacts, function: cst.FunctionDef) -> None:
        self.facts = facts
        self.assignments: dict[str, list[cst.CSTNode]] = {}
        for node in own_nodes(function):
            if type(node) is cst.Assign:
                for target in node.targets:
                    if type(target.target) is cst.Name:
                        self.assignments.setdefault(target.target.value, []).append(node.value)
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and type(node.target) is cst.Name:
                self.assignments.setdefault(node.target.value, []).append(node)

    def summed(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        if depth > _MAX_DEPTH:
            return False
        if type(expr) is cst.Call:
            return self._summed_call(expr, depth)
        if type(expr) is cst.BinaryOperation:
            if isinstance(expr.operator, (cst.Add, cst.Subtract)):
                return self.summed(expr.left, depth + 1) or self.summed(expr.right, depth + 1)
            return False
        if type(expr) is cst.Name:
            values = self.assignments.get(expr.value, [])
            updates = [
                v for v in values if isinstance(v, cst.BaseExpression) and _reads(v, expr.value)
            ]
            others = [v for v in values if not any(v is u for u in updates)]
            return (
                any(isinstance(value, cst.BaseExpression) for value in others)
                and all(self._summed_binding(value, depth + 1) for value in others)
                and all(_adds_to(update, expr.value) for update in updates)
            )
        return False

    def _summed_binding(self, value: cst.CSTNode, depth: int) -> bool:
        if type(value) is cst.AugAssign:
            return isinstance(value.operator, (cst.AddAssign, cst.SubtractAssign))
        if type(value) is cst.AnnAssign:
            return value.value is not None and self.summed(value.value, depth)
        assert isinstance(value, cst.BaseExpression)
        return self.summed(value, depth)

    def _summed_call(self, call: cst.Call, depth: int) -> bool:
        if _reduction(call, self.facts) == "sum":
            return True
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "sum" and not call.args:
            return self._per_sample(func.value, depth + 1)
        if self.facts.qualified_name(func) == "torch.sum" and len(call.args) == 1:
            return self._per_sample(call.args[0].value, depth + 1)
        if type(func) is cst.Name:
            built = self.facts.names.assignment(func.value, func)
            return (
                built is not None
                and type(built.value) is cst.Call
                and _reduction(built.value, self.facts) == "sum"
            )
        return False

    def _per_sample(self, expr: cst.BaseExpression, depth: int) -> bool:
        """Does ``expr`` hold a ``reduction="none"`` loss (through names of the function)?"""
        if depth > _MAX_DEPTH:
            return False
        for node in iter_nodes(expr):
            if type(node) is cst.Call and _reduction(node, self.facts) == "none":
                return True
            if type(node) is cst.Name:
                for value in self.assignments.get(node.value, []):
                    if isinstance(value, cst.BaseExpression) and self._per_sample(value, depth + 1):
                        return True
        return False
