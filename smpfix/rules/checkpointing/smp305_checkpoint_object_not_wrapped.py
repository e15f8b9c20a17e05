"""SMP305: ``smp.save_checkpoint`` given the raw module or optimizer instead of the library's wrappers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import libcst as cst

from smpfix.base.edits import ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.job.jobfacts import FeatureState, Tri
from smpfix.program.checkpoint_api import CHECKPOINT_API_SINCE, CheckpointCall, checkpoint_call
from smpfix.program.model_names import DistributedModelNames
from smpfix.program.numeric_values import enclosing_scope
from smpfix.program.steps import step_functions
from smpfix.program.unwrapped import Unwrapped, raw_module, raw_name
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, RuleContext


class CheckpointObjectNotWrapped(Rule):
    code = "SMP305"
    name = "checkpoint-object-not-wrapped"
    summary = "`smp.save_checkpoint(model=..., optimizer=...)` given the module or optimizer that was wrapped, not the `smp.Distributed*` wrapper."
    fix_availability = FixAvailability.SAFE
    depends_on = ("SDP", "FP16", "BF16")
    since = CHECKPOINT_API_SINCE
    since_is_api = True

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self.models = DistributedModelNames(self.facts, step_functions(self.facts))

    def visit_Call(self, node: cst.Call) -> None:
        found = checkpoint_call(self.facts, node)
        if found is None or not found.saves:
            return
        scope = enclosing_scope(self.ancestry.stack, self.context.module)
        functions = [n for n in self.ancestry.stack[:-1] if isinstance(n, cst.FunctionDef)]
        model = found.argument("model")
        if model is not None and not model.star:
            raw = raw_module(self.facts, model.value, self.models, functions, scope, node)
            if raw is not None:
                self._flag_model(found, raw)
        optimizer = found.argument("optimizer")
        if optimizer is not None and not optimizer.star:
            raw = raw_name(self.facts, optimizer.value, self.facts.distributed_optimizers, scope, node)
            if raw is not None:
                self._flag_optimizer(found, raw)

    def _flag_model(self, found: CheckpointCall, raw: Unwrapped) -> None:
        sdp = self.feature("SDP")
        spelled = self.context.code_for(raw.use)
        wrapper = f"`{raw.wrapped}`" if raw.wrapped else "the `smp.DistributedModel`"
        lead = f"`model={spelled}` passes {raw.what}, but `smp.save_checkpoint` needs the `smp.DistributedModel` ({wrapper})"
        if sdp.state is Tri.ON:
            message = (
                f"{lead}. With sharded data parallelism on ({sdp.source}) the library ignores this argument and saves "
                "the wrapped model it knows, so this works; without it the call raises SMPValidationError. Pass "
                f"{wrapper}."
            )
            severity = Severity.HINT
        else:
            when = "" if sdp.state is Tri.OFF else " unless sharded data parallelism is enabled"
            message = (
                f"{lead}: it raises SMPValidationError{when}, at the job's first checkpoint. Pass {wrapper}, which "
                "saves each rank's partition."
            )
            severity = Severity.ERROR if sdp.state is Tri.OFF else Severity.WARNING
        self.report(raw.use, message, severity=severity, fix=self._fix(raw, "model"), job_facts=(sdp,))

    def _flag_optimizer(self, found: CheckpointCall, raw: Unwrapped) -> None:
        states = [self.feature(key) for key in ("FP16", "BF16", "SDP")]
        on = [s for s in states if s.state is Tri.ON]
        unknown = [s for s in states if s.state is Tri.UNKNOWN]
        if not on and not unknown:
            return  # fp32 without sharding: the wrapper patches the optimizer in place, so it is the same object
        spelled = self.context.code_for(raw.use)
        wrapper = f"`{raw.wrapped}`" if raw.wrapped else "the `smp.DistributedOptimizer`"
        lead = f"`optimizer={spelled}` passes {raw.what}, but `smp.save_checkpoint` needs the `smp.DistributedOptimizer` ({wrapper})"
        if on:
            why = f"{_conditions(on)}, so the wrapper is a different object and the call raises at the job's first checkpoint"
            severity = Severity.ERROR
        else:
            why = (
                f"the call raises {_titles(unknown)}, where the wrapper is a different object (in fp32 without "
                "sharding the library patches the optimizer in place and both names work)"
            )
            severity = Severity.WARNING
        message = f"{lead}: {why}. Pass {wrapper}."
        self.report(raw.use, message, severity=severity, fix=self._fix(raw, "optimizer"), job_facts=tuple(on or unknown))

    @staticmethod
    def _fix(raw: Unwrapped, what: str) -> Optional[PendingFix]:
        if raw.wrapped is None:
            return None
        return PendingFix(Applicability.SAFE, f"Pass the wrapped {what} `{raw.wrapped}`", (ReplaceNode(raw.use, raw.wrapped),))


def _conditions(states: Sequence[FeatureState]) -> str:
    return " and ".join(state.condition() for state in states)


def _titles(states: Sequence[FeatureState]) -> str:
    titles = [state.feature.title for state in states]
    listed = titles[0] if len(titles) == 1 else ", ".join(titles[:-1]) + " or " + titles[-1]
    return f"if {listed} is enabled"
