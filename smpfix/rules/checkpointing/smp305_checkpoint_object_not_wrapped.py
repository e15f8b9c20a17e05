"""SMP305: ``smp.save_checkpoint`` given the raw module or optimizer instead of the library's
wrappers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Optional

import libcst as cst

from smpfix.base.call_binding import bind_arguments
from smpfix.base.edits import ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.walker import Ancestry
from smpfix.job.jobfacts import FeatureState, Tri
from smpfix.program.model import Program
from smpfix.program.objects.checkpoint_api import CHECKPOINT_API_SINCE, checkpoint_call
from smpfix.program.objects.model_names import DistributedModelNames, parameter_names
from smpfix.program.objects.unwrapped import Unwrapped, raw_module, raw_name
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet


class CheckpointObjectNotWrapped(Rule):
    summary = (
        "`smp.save_checkpoint(model=..., optimizer=...)` given the module or optimizer that was"
        " wrapped, not the `smp.Distributed*` wrapper."
    )
    fix_availability = FixAvailability.SAFE
    depends_on = ("SDP", "FP16", "BF16")
    since = CHECKPOINT_API_SINCE
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.models = self.program.file.answer(DistributedModelNames)
        self.calls = self.program.facts.calls_by_name

    def visit_Call(self, node: cst.Call) -> None:
        found = checkpoint_call(self.program.facts, node)
        if found is None or not found.saves:
            return
        functions: list[cst.FunctionDef] = [
            n for n in self.ancestry.stack[:-1] if type(n) is cst.FunctionDef
        ]
        for parameter, flag in (("model", self._flag_model), ("optimizer", self._flag_optimizer)):
            given = found.argument(parameter)
            if given is None or given.star:
                continue
            for raw, via in self._raw_objects(parameter, given.value, functions, node):
                flag(raw, via)

    def _raw_objects(
        self,
        parameter: str,
        expr: cst.BaseExpression,
        functions: Sequence[cst.FunctionDef],
        use: cst.Call,
    ) -> Iterator[tuple[Unwrapped, str]]:
        """The raw object ``expr`` is here, or, when ``expr`` is a parameter of the saving
        function, the raw objects its callers in this file pass for it."""
        raw = self._raw(parameter, expr, functions, use)
        if raw is not None:
            yield raw, ""
            return
        function = functions[-1] if functions else None
        if (
            type(expr) is not cst.Name
            or function is None
            or expr.value not in parameter_names(function)
        ):
            return
        parents = self.program.names.index
        for call in self.calls.get(function.name.value, ()):
            bound = bind_arguments(function, call)
            passed = bound.get(expr.value) if bound is not None else None
            if passed is None:
                continue
            callers = [n for n in parents.ancestors(call) if type(n) is cst.FunctionDef][::-1]
            raw = self._raw(parameter, passed, callers, call)
            if raw is not None:
                yield (
                    raw,
                    (
                        f" (through parameter `{expr.value}` of `{function.name.value}`, which"
                        " saves it)"
                    ),
                )

    def _raw(
        self,
        parameter: str,
        expr: cst.BaseExpression,
        functions: Sequence[cst.FunctionDef],
        use: cst.Call,
    ) -> Optional[Unwrapped]:
        if parameter == "model":
            return raw_module(self.program.file, expr, self.models, functions, use)
        return raw_name(self.program.file, expr, self.program.facts.distributed_optimizers, use)

    def _flag_model(self, raw: Unwrapped, via: str) -> None:
        sdp = self.feature("SDP", raw.use)
        spelled = self.program.code_for(raw.use)
        wrapper = f"`{raw.wrapped}`" if raw.wrapped else "the `smp.DistributedModel`"
        given = snippet(spelled, 22)
        needs = f"`smp.save_checkpoint(model=...)` needs the `smp.DistributedModel` ({wrapper})"
        if sdp.state is Tri.ON:
            title = f"{given} is not the wrapped model `save_checkpoint` expects"
            explanation = (
                f"{needs}. With sharded data parallelism on the library ignores this argument and"
                " saves the wrapped model it knows, so this works; without it the call raises"
                f" SMPValidationError. Pass {wrapper}."
            )
            severity = Severity.HINT
        else:
            when = "" if sdp.state is Tri.OFF else " unless sharded data parallelism is enabled"
            title = (
                f"{given} is not the wrapped model: `save_checkpoint` raises"
                if sdp.state is Tri.OFF
                else f"{given} is not the wrapped model: raises unless sharded data parallelism"
                " is on"
            )
            explanation = (
                f"{needs}: it raises SMPValidationError{when}, at the job's first checkpoint. Pass"
                f" {wrapper}, which saves each rank's partition."
            )
            severity = Severity.ERROR if sdp.state is Tri.OFF else Severity.WARNING
        self.report(
            raw.use,
            title,
            explanation=explanation,
            evidence=(f"`{spelled}` is {raw.what}{via}",),
            severity=severity,
            fix=self._fix(raw, "model"),
            job_facts=(sdp,),
            implied=CHECKPOINT_API_SINCE,
        )

    def _flag_optimizer(self, raw: Unwrapped, via: str) -> None:
        states = [self.feature(key, raw.use) for key in ("FP16", "BF16", "SDP")]
        on = [s for s in states if s.state is Tri.ON]
        unknown = [s for s in states if s.state is Tri.UNKNOWN]
        if not on and not unknown:
            # fp32 without sharding: the wrapper patches the optimizer in place, so it is the same
            # object
            return
        spelled = self.program.code_for(raw.use)
        wrapper = f"`{raw.wrapped}`" if raw.wrapped else "the `smp.DistributedOptimizer`"
        given = snippet(spelled, 22)
        needs = (
            f"`smp.save_checkpoint(optimizer=...)` needs the `smp.DistributedOptimizer` ({wrapper})"
        )
        if on:
            why = (
                f"{_conditions(on)}, so the wrapper is a different object and the call raises at"
                " the job's first checkpoint"
            )
            severity = Severity.ERROR
            title = f"{given} is not the wrapped optimizer: `save_checkpoint` raises"
        else:
            title = f"{given} is not the wrapped optimizer: raises under fp16, bf16 or sharding"
            why = (
                f"the call raises {_titles(unknown)}, where the wrapper is a different object (in"
                " fp32 without sharding the library patches the optimizer in place and both names"
                " work)"
            )
            severity = Severity.WARNING
        self.report(
            raw.use,
            title,
            explanation=f"{needs}: {why}. Pass {wrapper}.",
            evidence=(f"`{spelled}` is {raw.what}{via}",),
            severity=severity,
            fix=self._fix(raw, "optimizer"),
            job_facts=tuple(on or unknown),
            implied=CHECKPOINT_API_SINCE,
        )

    @staticmethod
    def _fix(raw: Unwrapped, what: str) -> Optional[PendingFix]:
        if raw.wrapped is None:
            return None
        return PendingFix(
            Applicability.SAFE,
            f"Pass the wrapped {what} `{raw.wrapped}`",
            (ReplaceNode(raw.use, raw.wrapped),),
        )


def _conditions(states: Sequence[FeatureState]) -> str:
    return " and ".join(state.condition() for state in states)


def _titles(states: Sequence[FeatureState]) -> str:
    titles = [state.feature.title for state in states]
    listed = titles[0] if len(titles) == 1 else ", ".join(titles[:-1]) + " or " + titles[-1]
    return f"if {listed} is enabled"
