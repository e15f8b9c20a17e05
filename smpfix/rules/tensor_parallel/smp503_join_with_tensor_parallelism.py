"""SMP503: ``with model.join():`` without ``ddp``, or with tensor parallelism."""

from __future__ import annotations

import libcst as cst

from smpfix.base.findings import Severity
from smpfix.base.walker import Ancestry
from smpfix.job.jobfacts import Tri
from smpfix.program.model import Program
from smpfix.program.objects.model_names import DistributedModelNames
from smpfix.rules.rule import FixAvailability, Rule, TensorParallelism


class JoinWithTensorParallelism(Rule):
    summary = (
        "`DistributedModel.join()` needs `ddp=True`, and under tensor parallelism every rank of a"
        " TP group must still see the same number of batches."
    )
    fix_availability = FixAvailability.NONE
    depends_on = ("DDP", "TP")
    tensor_parallelism = TensorParallelism.DEGREE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.models = self.program.file.answer(DistributedModelNames)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        call = node.item
        if (
            type(call) is not cst.Call
            or type(call.func) is not cst.Attribute
            or call.func.attr.value != "join"
        ):
            return
        receiver = call.func.value
        if type(receiver) is not cst.Name:
            return
        functions: list[cst.FunctionDef] = self.ancestry.all_of(cst.FunctionDef)  # type: ignore[assignment]
        if not self.models.holds_model(receiver.value, functions):
            return
        model = receiver.value
        ddp, tp = self.feature("DDP", at=call), self.feature("TP", at=call)
        if ddp.state is Tri.OFF:
            self.report(
                call,
                f"`{model}.join()` is only supported with `ddp=True`, and ddp is off",
                explanation=(
                    "The library's `join` wraps PyTorch DDP's uneven-input handling, which does"
                    ' not exist without it. Enable `"ddp": True` in the modelparallel parameters,'
                    " or make every rank see the same number of batches (a `DistributedSampler`"
                    " with `drop_last=True`) and drop the `join()`."
                ),
                severity=Severity.ERROR,
                job_facts=(ddp,),
            )
        elif tp.state is Tri.ON:
            self.report(
                call,
                f"`{model}.join()` under tensor parallelism: a rank out of batches hangs its peers",
                explanation=(
                    f"`{model}.join()` lets data-parallel ranks run different numbers of batches,"
                    " but the ranks of one tensor-parallel group run collectives together in every"
                    " layer, so if one of them runs out of batches first the others hang. Make the"
                    " ranks of each tensor-parallel group see the same number of batches, e.g."
                    " with a `DistributedSampler` and `drop_last=True`."
                ),
                severity=Severity.WARNING,
                job_facts=(tp,),
            )
