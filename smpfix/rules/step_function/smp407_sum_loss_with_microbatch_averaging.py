"""SMP407: a summed loss while ``smp.DistributedModel`` averages gradients across microbatches."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.calls import argument, has_star_kwargs
from smpfix.base.findings import Applicability, Severity
from smpfix.base.walker import Ancestry
from smpfix.fixes.arguments import append_arguments
from smpfix.job.jobfacts import Tri
from smpfix.program.facts import FileFacts
from smpfix.program.model import Program
from smpfix.program.objects.model_names import DistributedModelNames
from smpfix.program.steps import enclosing_step, step_bodies
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.step_function._loss_reduction import LossReductions
from smpfix.rules.titles import snippet

_SETTING = "average_grads_across_microbatches"


class SumLossWithMicrobatchAveraging(Rule):
    summary = (
        "A loss summed over samples is backpropagated while `smp.DistributedModel` averages"
        " gradients across microbatches."
    )
    fix_availability = FixAvailability.UNSAFE
    depends_on = ("MB",)
    default_severity = Severity.WARNING
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        return bool(facts.distributed_models)

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        steps = self.program.steps
        self.bodies = step_bodies(steps)
        self.models = self.program.file.answer(DistributedModelNames)
        self.found: list[tuple[cst.Call, cst.BaseExpression]] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (
            type(func) is cst.Attribute and func.attr.value == "backward" and len(node.args) == 1
        ):
            return
        step = enclosing_step(self.ancestry, self.bodies, self.program.facts)
        if step is None or type(func.value) is not cst.Name:
            return
        functions: list[cst.FunctionDef] = self.ancestry.all_of(cst.FunctionDef)  # type: ignore[assignment]
        if not self.models.holds_model(func.value.value, functions):
            return
        loss = node.args[0].value
        if LossReductions(self.program.facts, functions[-1]).summed(loss):
            self.found.append((node, loss))

    def leave_Module(self, node: cst.Module) -> None:
        if not self.found or not self._averaging():
            return
        fix = self._fix(node)
        for call, loss in self.found:
            mb = self.feature("MB", call)
            if mb.state is Tri.OFF:
                continue
            severity = Severity.WARNING if mb.state is Tri.ON else Severity.HINT
            spelled = self.program.code_for(loss)
            backward = f"{self.program.code_for(call.func)}({spelled})"
            title = (
                f"{snippet(backward, 32)} backpropagates a summed loss: gradients 1/microbatches"
                " too small"
            )
            message = (
                f"`{self.program.code_for(call.func)}({spelled})` backpropagates a loss summed over"
                " the samples, but `smp.DistributedModel` averages gradients across microbatches"
                " by default, so the gradients are 1/microbatches of what this sum asks for"
                f" ({mb.condition()}); plain SGD then takes steps that much smaller. Pass"
                f" `{_SETTING}=False` to `smp.DistributedModel(...)`, as the API documentation asks"
                " for a loss that is not divided by the batch size, or use a mean loss."
            )
            self.report(
                call, title, explanation=message, severity=severity, fix=fix, job_facts=(mb,)
            )

    def _averaging(self) -> bool:
        """Every ``smp.DistributedModel`` of the file averages (the setting left out or True)."""
        for wrap in self.program.facts.distributed_models:
            given = argument(wrap.call, _SETTING)
            if given is None and has_star_kwargs(wrap.call):
                return False
            if given is not None and self.program.facts.literal(given.value) is not True:
                return False
        return True

    def _fix(self, module: cst.Module) -> Optional[PendingFix]:
        wraps = self.program.facts.distributed_models
        if len(wraps) != 1 or argument(wraps[0].call, _SETTING) is not None:
            return None
        call = wraps[0].call
        edit = append_arguments(call, [f"{_SETTING}=False"])
        if edit is None:
            return None
        return PendingFix(
            Applicability.UNSAFE, f"Pass `{_SETTING}=False` to `smp.DistributedModel`", (edit,)
        )
