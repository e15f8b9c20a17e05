"""SMP402: ``loss.backward()`` where the library needs ``model.backward(loss)``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.edits import ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.imports import dotted_name
from smpfix.base.parents import CodeScope
from smpfix.base.walker import Ancestry
from smpfix.job.jobfacts import Tri
from smpfix.program.model import Program
from smpfix.program.objects.model_names import DistributedModelNames
from smpfix.program.objects.training_objects import looks_like_optimizer
from smpfix.program.steps import contains_name_call, enclosing_step, step_bodies
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet

_UNSUPPORTED = ("retain_graph", "create_graph")
_AUTOGRAD_BACKWARD = "torch.autograd.backward"
_MODEL_NAME = re.compile(r"(^|_)model$", re.IGNORECASE)


def _without_parens(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=[], rpar=[]) if getattr(node, "lpar", None) else node


class TensorBackwardInsteadOfModelBackward(Rule):
    summary = (
        "`loss.backward()` or `torch.autograd.backward` in a step function bypasses"
        " `smp.DistributedModel`; call `model.backward(loss)`."
    )
    fix_availability = FixAvailability.SOMETIMES_SAFE
    depends_on = ("FP16", "SDP", "PP")
    satisfied_by_hf_trainer = True
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        steps = self.program.steps
        self.bodies = step_bodies(steps)
        self.models = self.program.file.answer(DistributedModelNames)
        self._calls_model: dict[int, bool] = {}

    def visit_Call(self, node: cst.Call) -> None:
        receiver = self._tensor_receiver(node)
        autograd = self.program.facts.qualified_name(node.func) == _AUTOGRAD_BACKWARD
        if receiver is None and not autograd:
            return
        functions: list[cst.FunctionDef] = self.ancestry.all_of(cst.FunctionDef)  # type: ignore[assignment]
        step = enclosing_step(self.ancestry, self.bodies, self.program.facts)
        if (
            receiver is not None
            and type(receiver) is cst.Name
            and self.models.holds_model(receiver.value, functions)
        ):
            return
        if step is not None:
            self._flag_in_step(node, receiver, step, functions)
        else:
            self._flag_outside_step(node, receiver, functions)

    def _tensor_receiver(self, call: cst.Call) -> Optional[cst.BaseExpression]:
        """``X`` in ``X.backward(...)`` when ``X`` may be a tensor (not a module, model or
        optimizer)."""
        func = call.func
        if type(func) is not cst.Attribute or func.attr.value != "backward":
            return None
        receiver = func.value
        if self.program.facts.qualified_name(receiver) is not None:
            return None
        dotted = dotted_name(receiver)
        if dotted is not None:
            last = dotted.rsplit(".", 1)[-1]
            if _MODEL_NAME.search(last) or last in self.models.targets or last == "self":
                return None
            if looks_like_optimizer(self.program.facts, receiver):
                return None
        return receiver

    # -- findings ----------------------------------------------------------------------
    def _spelled(self, call: cst.Call) -> str:
        text = self.program.code_for(call)
        return text if len(text) <= 60 and "\n" not in text else "this backward call"

    def _flag_in_step(
        self,
        call: cst.Call,
        receiver: Optional[cst.BaseExpression],
        step: cst.FunctionDef,
        functions: Sequence[cst.FunctionDef],
    ) -> None:
        names = self.models.names_in_scope(functions)
        model = sorted(names)[0] if len(names) == 1 else "model"
        title = (
            f"{snippet(self.program.code_for(call), 30)} in step `{step.name.value}` bypasses"
            " `smp.DistributedModel`"
        )
        why = (
            "`smp.DistributedModel` must run the backward pass itself: it schedules it across"
            " pipeline stages and microbatches, applies the fp16 loss scale and, under sharded data"
            " parallelism, routes it through the optimizer"
        )
        advice, fix = self._advice_and_fix(call, receiver, names, model, Applicability.SAFE)
        explanation = (
            f"`{self._spelled(call)}` inside step function `{step.name.value}` computes gradients"
            f" behind the library's back; {why}. {advice}"
        )
        self.report(call, title, explanation=explanation, severity=Severity.ERROR, fix=fix)

    def _flag_outside_step(
        self,
        call: cst.Call,
        receiver: Optional[cst.BaseExpression],
        functions: Sequence[cst.FunctionDef],
    ) -> None:
        if self.feature("PP").state is Tri.ON:
            return  # the model itself may not run outside a step then (SMP403)
        enabled = [
            state for state in (self.feature("FP16"), self.feature("SDP")) if state.state is Tri.ON
        ]
        if not enabled:
            return
        names = self.models.names_in_scope(functions)
        scope: CodeScope = functions[-1] if functions else self.program.module
        if not names or not self._scope_calls_model(scope, names):
            return
        model = sorted(names)[0] if len(names) == 1 else "model"
        reasons = " and ".join(state.condition() for state in enabled)
        effect = []
        skipped = []
        if any(state.feature.key == "FP16" for state in enabled):
            effect.append("skips the fp16 loss scaling that `model.backward` applies")
            skipped.append("fp16 loss scaling")
        if any(state.feature.key == "SDP" for state in enabled):
            effect.append(
                "bypasses the sharded optimizer that `model.backward` routes gradients through"
            )
            skipped.append("the sharded optimizer")
        title = (
            f"tensor backward {snippet(self.program.code_for(call), 30)} skips"
            f" {' and '.join(skipped)}"
        )
        advice, fix = self._advice_and_fix(call, receiver, names, model, Applicability.UNSAFE)
        explanation = (
            f"`{self._spelled(call)}` is a plain tensor backward on `{model}`'s loss, and"
            f" {reasons}: it {' and '.join(effect)}. {advice}"
        )
        self.report(
            call,
            title,
            explanation=explanation,
            severity=Severity.ERROR,
            fix=fix,
            job_facts=tuple(enabled),
        )

    def _scope_calls_model(self, scope: CodeScope, names: frozenset[str]) -> bool:
        """Evidence that the loss comes from the wrapped model: the same function calls it."""
        key = id(scope)
        if key not in self._calls_model:
            self._calls_model[key] = contains_name_call(scope, names)
        return self._calls_model[key]

    def _advice_and_fix(
        self,
        call: cst.Call,
        receiver: Optional[cst.BaseExpression],
        names: frozenset[str],
        model: str,
        applicability: Applicability,
    ) -> tuple[str, Optional[PendingFix]]:
        """What to call instead (the last sentences of the explanation), and the fix."""
        unsupported = [name for name in _UNSUPPORTED if argument(call, name) is not None]
        if unsupported:
            spelled = " and ".join(f"`{name}`" for name in unsupported)
            return (
                (
                    f"`{model}.backward(...)` replaces it but does not support {spelled}:"
                    " restructure the step so that a single backward pass suffices."
                ),
                None,
            )
        if self._is_scaler_scale(receiver):
            return (
                (
                    f"With a loss scaler, use `smp.amp.GradScaler` and call"
                    f" `{model}.backward(scaler.scale(loss))`; a `torch.cuda.amp.GradScaler` does"
                    " not work with the library."
                ),
                None,
            )
        replacement = self._replacement(call, receiver, model)
        suggestion = (
            replacement[1]
            if replacement is not None and receiver is not None
            else f"{model}.backward(...)"
        )
        if len(suggestion) > 60:
            suggestion = f"{model}.backward(...)"
        message = f"Call `{suggestion}` instead."
        if replacement is None or len(names) != 1:
            return message, None
        node, text = replacement
        return message, PendingFix(
            applicability, f"Call `{suggestion}` instead", (ReplaceNode(node, text),)
        )

    def _is_scaler_scale(self, receiver: Optional[cst.BaseExpression]) -> bool:
        return (
            type(receiver) is cst.Call
            and type(receiver.func) is cst.Attribute
            and receiver.func.attr.value == "scale"
        )

    def _replacement(
        self, call: cst.Call, receiver: Optional[cst.BaseExpression], model: str
    ) -> Optional[tuple[cst.CSTNode, str]]:
        """``L.backward(G)`` -> ``M.backward(L, G)``; ``torch.autograd.backward(...)`` ->
        ``M.backward(...)``."""
        code = self.program.module.code_for_node
        if receiver is None:
            allowed = {"tensors", "grad_tensors"}
            positional = [arg for arg in call.args if arg.keyword is None]
            if any(arg.star for arg in call.args) or len(positional) > 2:
                return None
            if any(
                arg.keyword is not None and arg.keyword.value not in allowed for arg in call.args
            ):
                return None
            return call.func, f"{model}.backward"
        if any(arg.star for arg in call.args) or len(call.args) > 1:
            return None
        gradient = argument(call, "gradient", 0)
        if call.args and gradient is None:
            return None
        parts = [code(_without_parens(receiver))]
        if gradient is not None:
            parts.append(code(gradient.value))
        return call, f"{model}.backward({', '.join(parts)})"
