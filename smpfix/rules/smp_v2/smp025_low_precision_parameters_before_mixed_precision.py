"""SMP025: a model cast to bf16 or fp16 before an FSDP wrap with ``MixedPrecision``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

import libcst as cst

from smpfix.base.findings import Severity
from smpfix.job.versions import FIRST_V2
from smpfix.program.facts import FileFacts
from smpfix.rules.rule import FixAvailability, Rule, TensorParallelism
from smpfix.rules.scope import FileScope, Library
from smpfix.rules.smp_v2._script import TRANSFORM, V2Calls, first_argument, keyword
from smpfix.rules.titles import snippet

_LOW = frozenset({"torch.bfloat16", "torch.float16", "torch.half"})
_CASTS = frozenset({"half", "bfloat16"})


class LowPrecisionParametersBeforeMixedPrecision(Rule):
    summary = (
        "The model's parameters are cast to bf16 or fp16 before an FSDP wrap with"
        " `MixedPrecision`: FSDP then keeps its full-precision copy, and the optimizer's, in that"
        " low precision."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.NONE
    library = Library.V2
    scope = FileScope.SMP_V2
    since = FIRST_V2
    default_severity = Severity.WARNING

    def leave_Module(self, node: cst.Module) -> None:
        facts = self.program.facts
        for wrap in self.program.file.answer(V2Calls).fsdp:
            mixed = keyword(wrap, "mixed_precision")
            if mixed is None or facts.literal(mixed.value) is None:
                continue
            model = _model_name(facts, first_argument(wrap))
            if model is None:
                continue
            for cast in self._casts(model, wrap):
                wrapped = snippet(
                    f"{self.program.code_for(wrap.func)}({model}, mixed_precision=...)"
                )
                self.report(
                    cast,
                    f"`{model}`'s parameters are made {self._dtype(cast)} before the FSDP wrap"
                    " with `MixedPrecision`",
                    explanation=(
                        "FSDP's `MixedPrecision` casts full-precision parameters down for forward"
                        " and backward and keeps the originals for the optimizer step, so with"
                        " low-precision originals the sharded master weights and the optimizer's"
                        " updates are bf16 or fp16, and small updates round away. Build the model"
                        " in fp32 (the default) and let `MixedPrecision(param_dtype=...)` do the"
                        " casting."
                    ),
                    evidence=(f"the wrap after it: {wrapped}",),
                    severity=Severity.WARNING,
                )

    def _casts(self, model: str, wrap: cst.Call) -> Iterator[cst.CSTNode]:
        facts, order, parents = self.program.facts, self.program.order, self.program.parents
        for call in facts.call_order:
            if not order.runs_before(call, wrap) or parents.scope_of(call) is not parents.scope_of(
                wrap
            ):
                continue
            func = call.func
            if (
                type(func) is cst.Attribute
                and type(func.value) is cst.Name
                and func.value.value == model
                and (
                    func.attr.value in _CASTS
                    or (func.attr.value == "to" and any(self._low(arg.value) for arg in call.args))
                )
            ):
                yield call
            elif (
                type(func) is cst.Attribute
                and func.attr.value == "from_pretrained"
                and self._assigned_to(call, model)
                and any(
                    arg.keyword is not None
                    and arg.keyword.value == "torch_dtype"
                    and self._low(arg.value)
                    for arg in call.args
                )
            ):
                yield call

    def _assigned_to(self, call: cst.Call, name: str) -> bool:
        return any(
            assignment.value is call for assignment in self.program.facts.assignments.get(name, ())
        )

    def _low(self, expression: cst.BaseExpression) -> bool:
        return (self.program.facts.qualified_name(expression) or "") in _LOW

    def _dtype(self, cast: cst.CSTNode) -> str:
        text = self.program.code_for(cast)
        return "bf16" if "bfloat16" in text else "fp16"


def _model_name(facts: FileFacts, argument: Optional[cst.BaseExpression]) -> Optional[str]:
    """The model's name in ``FSDP(model)`` or ``FSDP(tsm.transform(model))``."""
    if type(argument) is cst.Call and facts.qualified_name(argument.func) == TRANSFORM:
        argument = first_argument(argument)
    return argument.value if type(argument) is cst.Name else None
