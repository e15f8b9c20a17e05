"""SMP602: gradient accumulation under sharded data parallelism without
``backward_passes_per_step``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument, has_star_kwargs, names_in
from smpfix.base.edits import AppendElement, NodeEdit, ReplaceNode
from smpfix.base.findings import Applicability
from smpfix.base.imports import dotted_name
from smpfix.base.literals import UNKNOWN
from smpfix.base.parents import CodeScope
from smpfix.base.walker import Ancestry, iter_nodes
from smpfix.program.facts import Wrap
from smpfix.program.model import Program
from smpfix.program.names import StatementRef
from smpfix.program.objects.training_objects import SCHEDULER, looks_like_optimizer, object_kind
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism

_BOUNDARY_HELPER = re.compile(r"accum|boundary", re.IGNORECASE)
# DistributedModel(module, trace_device, ..., overlapping_allreduce, backward_passes_per_step, ...)
_POSITION = 5


@dataclass(frozen=True)
class _Accumulation:
    """An optimizer step that runs only at accumulation boundaries."""

    step_call: cst.Call
    test: cst.BaseExpression
    k: Optional[cst.BaseExpression]  # the accumulation count, when the test shows it


class GradAccumulationWithoutBackwardPassesPerStep(Rule):
    summary = (
        "Under sharded data parallelism, gradient accumulation needs `backward_passes_per_step` on"
        " `smp.DistributedModel`."
    )
    fix_availability = FixAvailability.SOMETIMES_SAFE
    depends_on = ("SDP",)
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.accumulation: Optional[_Accumulation] = None
        self.order: dict[cst.CSTNode, int] = {}
        self._counters: dict[int, set[str]] = {}

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.order[node] = len(self.order)

    def visit_Call(self, node: cst.Call) -> None:
        if self.accumulation is not None or not self._is_optimizer_step(node):
            return
        found = self._guard(node)
        if found is not None:
            self.accumulation = _Accumulation(node, found[0], found[1])

    def _is_optimizer_step(self, call: cst.Call) -> bool:
        func = call.func
        if type(func) is not cst.Attribute or func.attr.value != "step":
            return False
        receiver = func.value
        if (
            object_kind(self.program.facts, receiver) == SCHEDULER
            or "sched" in (dotted_name(receiver) or "").lower()
        ):
            return False
        return looks_like_optimizer(self.program.facts, receiver)

    # -- the accumulation guard -------------------------------------------------------------
    def _guard(
        self, call: cst.Call
    ) -> Optional[tuple[cst.BaseExpression, Optional[cst.BaseExpression]]]:
        stack = self.ancestry.stack
        scope: CodeScope = self.program.module
        for index in range(len(stack) - 2, -1, -1):
            node = stack[index]
            if type(node) is cst.FunctionDef:
                scope = node
                break
        for index in range(len(stack) - 2, -1, -1):
            node = stack[index]
            if type(node) is cst.FunctionDef:
                break
            if type(node) is cst.If and stack[index + 1] is node.body:
                found = self._boundary_test(node.test, scope)
                if found is not None:
                    return node.test, found[1]
            ref = self.program.facts.statement_of(node)
            if ref is not None:
                exit_test = self._early_exit_before(ref, scope)
                if exit_test is not None:
                    return exit_test
        return None

    def _early_exit_before(
        self, ref: StatementRef, scope: CodeScope
    ) -> Optional[tuple[cst.BaseExpression, Optional[cst.BaseExpression]]]:
        """``if (i + 1) % k != 0: continue`` earlier in the same block."""
        for earlier in ref.block.body[: ref.index]:
            if (
                type(earlier) is not cst.If
                or earlier.orelse is not None
                or len(earlier.body.body) != 1
            ):
                continue
            only = earlier.body.body[0]
            if not (
                type(only) is cst.SimpleStatementLine
                and isinstance(only.body[0], (cst.Continue, cst.Return))
            ):
                continue
            found = self._boundary_test(earlier.test, scope, negated=True)
            if found is not None:
                return earlier.test, found[1]
        return None

    def _boundary_test(
        self, test: cst.BaseExpression, scope: CodeScope, negated: bool = False
    ) -> Optional[tuple[bool, Optional[cst.BaseExpression]]]:
        """(True, k) when ``test`` holds at accumulation boundaries (or, ``negated``, between
        them)."""
        if type(test) is cst.BooleanOperation:
            return self._boundary_test(test.left, scope, negated) or self._boundary_test(
                test.right, scope, negated
            )
        if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            modulo = _modulo(test.expression)
            if modulo is not None and not negated:
                return True, modulo.right
            return None
        if type(test) is cst.Comparison and len(test.comparisons) == 1:
            operator = test.comparisons[0].operator
            wanted = cst.NotEqual if negated else cst.Equal
            for side in (test.left, test.comparisons[0].comparator):
                modulo = _modulo(side)
                if modulo is not None and isinstance(operator, wanted):
                    return True, modulo.right
            if not negated and isinstance(operator, (cst.Equal, cst.GreaterThanEqual)):
                counter, limit = test.left, test.comparisons[0].comparator
                if type(counter) is cst.Name and counter.value in self._incremented(scope):
                    return True, limit
            return None
        if type(test) is cst.Call and not negated:
            name = dotted_name(test.func) or ""
            if _BOUNDARY_HELPER.search(name.rsplit(".", 1)[-1]):
                return True, None
        modulo = _modulo(test)
        if modulo is not None and negated:
            return True, modulo.right  # `if i % k: continue`
        return None

    def _incremented(self, scope: CodeScope) -> set[str]:
        """Names counted up with ``n += 1`` in ``scope`` (accumulation counters)."""
        key = id(scope)
        if key not in self._counters:
            self._counters[key] = {
                node.target.value
                for node in iter_nodes(scope)
                if type(node) is cst.AugAssign
                and type(node.operator) is cst.AddAssign
                and type(node.target) is cst.Name
            }
        return self._counters[key]

    # -- the DistributedModel call -----------------------------------------------------------
    def leave_Module(self, node: cst.Module) -> None:
        accumulation = self.accumulation
        if accumulation is None:
            return
        sdp = self.feature("SDP")
        severity = self.severity_when(sdp)
        if severity is None:
            return
        for wrap in self.program.facts.distributed_models:
            if has_star_kwargs(wrap.call):
                continue
            given = argument(wrap.call, "backward_passes_per_step", _POSITION)
            if given is not None and (
                accumulation.k is None or self._same(given.value, accumulation.k)
            ):
                continue
            title, explanation, evidence = self._message(
                accumulation, given, sdp.state.value == "on"
            )
            self.report(
                wrap.call,
                title,
                explanation=explanation,
                evidence=evidence,
                severity=severity,
                fix=self._fix(wrap, given, accumulation.k),
                job_facts=(sdp,),
            )

    def _same(self, given: cst.BaseExpression, k: cst.BaseExpression) -> bool:
        code = self.program.module.code_for_node
        if "".join(code(given).split()) == "".join(code(k).split()):
            return True
        left, right = self.program.facts.literal(given), self.program.facts.literal(k)
        return left is not UNKNOWN and left == right

    def _message(
        self, accumulation: _Accumulation, given: Optional[cst.Arg], on: bool
    ) -> tuple[str, str, tuple[str, ...]]:
        """The title, explanation and evidence of a finding at a wrap."""
        code = self.program.code_for
        test = code(accumulation.test)
        test = test if len(test) <= 60 and "\n" not in test else "an accumulation condition"
        k = f"`{code(accumulation.k)}`" if accumulation.k is not None else "the accumulation count"
        step = code(accumulation.step_call)
        if given is None:
            title = "no `backward_passes_per_step` for accumulated gradients"
            setting = "`smp.DistributedModel(...)` does not set `backward_passes_per_step`"
            accumulated = f"gradients are accumulated: `{step}` runs only when `{test}`"
        else:
            title = "`backward_passes_per_step` is not the accumulation count"
            setting = (
                f"`smp.DistributedModel(...)` sets `backward_passes_per_step={code(given.value)}`"
            )
            accumulated = (
                f"gradients are accumulated over {k} backward passes: `{step}` runs only when"
                f" `{test}`"
            )
        title += ": reduced at every pass" if on else " if sharded data parallelism is on"
        explanation = (
            "Under sharded data parallelism the library then takes every backward pass for an"
            " accumulation boundary and reduces the gradients across the replication group each"
            " time instead of once at the boundary. Pass"
            f" `backward_passes_per_step={k.strip('`')}` to `smp.DistributedModel`."
        )
        return title, explanation, (accumulated, setting)

    def _fix(
        self, wrap: Wrap, given: Optional[cst.Arg], k: Optional[cst.BaseExpression]
    ) -> Optional[PendingFix]:
        """Safe to add ``k`` when it is a name or attribute already bound where the model is
        wrapped.

        Any other expression (a literal, arithmetic) is offered as unsafe, and so is replacing a
        value the script sets explicitly; a ``k`` not bound at the wrap gets no fix.
        """
        if k is None or wrap.where is None:
            return None
        where = wrap.where
        if not all(self._in_scope(name, where) for name in names_in(k)):
            return None
        code = self.program.module.code_for_node(k)
        edits: tuple[NodeEdit, ...]
        if given is None:
            if not wrap.call.args:
                return None
            edits = (AppendElement(wrap.call, (f"backward_passes_per_step={code}",)),)
            applicability = (
                Applicability.SAFE if dotted_name(k) is not None else Applicability.UNSAFE
            )
        else:
            edits = (ReplaceNode(given.value, code),)
            applicability = Applicability.UNSAFE
        return PendingFix(
            applicability,
            f"Pass `backward_passes_per_step={code}` to `smp.DistributedModel`",
            edits,
        )

    def _in_scope(self, name: str, where: StatementRef) -> bool:
        """Is ``name`` bound before the wrap runs: an import, a parameter, an earlier local, a
        global?"""
        if (
            name in self.program.facts.imports.bindings
            or name in self.program.facts.functions
            or name in self.program.facts.classes
        ):
            return True
        scope = where.scope
        if type(scope) is cst.FunctionDef:
            params = scope.params
            every = (*params.posonly_params, *params.params, *params.kwonly_params)
            if name in {param.name.value for param in every}:
                return True
        wrap_order = self.order.get(where.statement, -1)
        for assignment in self.program.facts.assignments.get(name, ()):
            ref = assignment.where
            if ref is None:
                continue
            if ref.scope is scope and self.order.get(ref.statement, len(self.order)) < wrap_order:
                return True
            if type(ref.scope) is cst.Module and type(scope) is cst.FunctionDef:
                return True
        return False


def _modulo(node: cst.BaseExpression) -> Optional[cst.BinaryOperation]:
    if type(node) is cst.BinaryOperation and type(node.operator) is cst.Modulo:
        return node
    return None
