"""SMP110: ``smp.DistributedOptimizer`` runs before any ``smp.DistributedModel`` exists."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.calls import bound_names, names_in
from smpfix.base.edits import DeleteStatementLines, InsertStatementAfter
from smpfix.base.findings import Applicability
from smpfix.program.facts import FileFacts
from smpfix.program.names import StatementRef
from smpfix.program.order.execution import Run, happens
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism


class DistributedOptimizerBeforeModel(Rule):
    summary = (
        "`smp.DistributedOptimizer` raises RuntimeError unless an `smp.DistributedModel` was"
        " created before it."
    )
    fix_availability = FixAvailability.SAFE
    satisfied_by_hf_trainer = True
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        return bool(facts.distributed_optimizers)

    def leave_Module(self, node: cst.Module) -> None:
        order = self.program.order
        model_built = happens(
            node, lambda call: self.program.facts.is_smp_call(call, "DistributedModel")
        )
        for wrap in self.program.facts.distributed_optimizers:
            for run in order.runs_of(wrap.call):
                if order.before(run, model_built):
                    continue
                later = [
                    other
                    for other in order.after(run, model_built)
                    if self.program.facts.is_smp_call(other.call, "DistributedModel")
                ]
                if later:
                    self._flag(wrap.call, wrap.where, later[0])
                    break

    def _flag(self, call: cst.Call, where: Optional[StatementRef], model_run: Run) -> None:
        model_ref = next(
            (w.where for w in self.program.facts.distributed_models if w.call is model_run.call),
            None,
        )
        shown = self._shown(model_ref.statement if model_ref is not None else model_run.call)
        message = (
            f"`smp.DistributedOptimizer` runs before `{shown}`: it raises RuntimeError"
            ' ("smp.DistributedModel call must take place before smp.DistributedOptimizer"),'
            " because the optimizer wrapper partitions the optimizer state by the model's"
            " partitions, which do not exist yet. Wrap the model first, then the optimizer."
        )
        self.report(
            call,
            "`smp.DistributedOptimizer` runs before `smp.DistributedModel`: RuntimeError",
            explanation=message,
            fix=self._fix(call, where, model_ref),
        )

    def _shown(self, node: cst.CSTNode) -> str:
        text = " ".join(self.program.code_for(node).split())
        return text if len(text) <= 60 else text[:57] + "..."

    def _fix(
        self, call: cst.Call, where: Optional[StatementRef], model_ref: Optional[StatementRef]
    ) -> Optional[PendingFix]:
        """Move ``x = smp.DistributedOptimizer(...)`` to just after the model wrap, when both sit in
        one block and nothing between reads ``x`` or rebinds what the wrap reads."""
        if (
            where is None
            or model_ref is None
            or where.block is not model_ref.block
            or where.index >= model_ref.index
        ):
            return None
        statement = where.statement
        if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
            return None
        small = statement.body[0]
        if type(small) is not cst.Assign or small.value is not call or len(small.targets) != 1:
            return None
        target = small.targets[0].target
        if type(target) is not cst.Name:
            return None
        between = list(where.block.body[where.index + 1 : model_ref.index + 1])  # type: ignore[union-attr]
        if any(target.value in names_in(other) for other in between):
            return None
        inputs = names_in(call)
        if any(inputs & bound_names(other) for other in between):
            return None
        return PendingFix(
            Applicability.SAFE,
            "Wrap the optimizer right after the `smp.DistributedModel` call",
            (
                DeleteStatementLines(statement),
                InsertStatementAfter(model_ref.statement, statement, self.program.module),
            ),
        )
