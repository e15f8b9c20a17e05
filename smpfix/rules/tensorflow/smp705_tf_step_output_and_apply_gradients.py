"""SMP705: TensorFlow step outputs used uncombined, and weight updates inside the step.

A TensorFlow step function returns, for each tensor it returns, a ``StepOutput`` holding one
value per microbatch; the gradients come back as a list of them. They must be combined after
the step (``g.accumulate()`` or ``g.reduce_mean()`` for gradients, ``.reduce_mean()`` for a
loss, ``.merge()`` for batch-shaped outputs) before ``optimizer.apply_gradients``, a Keras
metric, a ``tf`` op or ``hvd.allreduce`` sees them. The other way round, the weight update
itself (``apply_gradients``, ``minimize``) must not be inside the step, which runs once per
microbatch; an allreduce there runs once per microbatch too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.edits import ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.flavour import ONLY_TENSORFLOW
from smpfix.base.walker import Ancestry
from smpfix.program.facts import FileFacts
from smpfix.program.model import Program
from smpfix.program.order.call_graph import innermost_function, run_inside_steps
from smpfix.program.steps import returns_container
from smpfix.program.tensorflow.training import STEP_OUTPUT_METHODS, horovod_member, is_keras_metric
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet

_UPDATES = frozenset({"apply_gradients", "minimize"})
_METRIC_METHODS = frozenset({"update_state"})
# `tf` functions that take anything and do no math on it.
_HARMLESS_TF = frozenset({"tensorflow.print", "tensorflow.identity", "tensorflow.summary.scalar"})


@dataclass(frozen=True)
class _Output:
    """A name bound to what a step call returned, in one scope."""

    name: str
    step: str


class TfStepOutputAndApplyGradients(Rule):
    summary = (
        "Combine TensorFlow step outputs (`accumulate()`, `reduce_mean()`, `merge()`) before using"
        " them, and apply gradients after the step, not inside it."
    )
    flavours = ONLY_TENSORFLOW
    fix_availability = FixAvailability.UNSAFE
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        return bool(facts.step_functions)

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        steps = self.program.steps
        self.single = {
            step.name
            for step in steps
            if step.function is not None and not returns_container(step.function)
        }
        self.in_step = run_inside_steps(self.program.file)
        self.scopes: list[dict[str, _Output]] = [{}]
        self.reported: set[int] = set()

    # -- scopes and bindings -------------------------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.append({})

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.pop()

    def leave_Assign(self, node: cst.Assign) -> None:
        scope = self.scopes[-1]
        for target in node.targets:
            for name in _names(target.target):
                scope.pop(name, None)
        step = self._step_called(node.value)
        if step is None or len(node.targets) != 1:
            return
        bound = node.targets[0].target
        if isinstance(bound, (cst.Tuple, cst.List)):
            for element in bound.elements:
                if type(element.value) is cst.Name:
                    scope[element.value.value] = _Output(element.value.value, step)
        elif type(bound) is cst.Name and step in self.single:
            scope[bound.value] = _Output(bound.value, step)

    def _step_called(self, value: cst.BaseExpression) -> Optional[str]:
        if (
            type(value) is cst.Call
            and type(value.func) is cst.Name
            and value.func.value in self.program.facts.step_functions
        ):
            return value.func.value
        return None

    def _output(self, node: cst.BaseExpression) -> Optional[_Output]:
        return self.scopes[-1].get(node.value) if type(node) is cst.Name else None

    # -- uses ------------------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        method = func.attr.value if type(func) is cst.Attribute else None
        hvd = horovod_member(self.program.facts, func)
        step = innermost_function(self.ancestry.stack, self.in_step)
        if step is not None and hvd == "allreduce":
            self._flag_inside_step(node, step, "hvd.allreduce")
            return
        if (
            step is not None
            and method in _UPDATES
            and self.program.facts.qualified_name(func) is None
        ):
            self._flag_inside_step(node, step, method)
            return
        if method == "apply_gradients":
            self._check_apply(node)
            return
        what = self._consumer(node, method, hvd)
        if what is None:
            return
        for arg in node.args:
            output = self._output(arg.value)
            if output is not None:
                self._flag_raw(arg.value, output, what)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        """``loss.numpy()``, ``logits.shape``: a tensor's attribute on what is not a tensor."""
        output = self._output(node.value)
        if output is not None and node.attr.value not in STEP_OUTPUT_METHODS:
            self._flag_raw(node.value, output, f"`.{node.attr.value}`")

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        for side in (node.left, node.right):
            output = self._output(side)
            if output is not None:
                self._flag_raw(side, output, "arithmetic")

    def _consumer(self, call: cst.Call, method: Optional[str], hvd: Optional[str]) -> Optional[str]:
        """What ``call`` is, when it needs tensors: a Keras metric, a ``tf`` op, an allreduce."""
        if hvd == "allreduce":
            return "`hvd.allreduce`"
        if is_keras_metric(self.program.facts, call.func):
            return f"the Keras metric `{self.program.code_for(call.func)}`"
        if (
            method in _METRIC_METHODS
            and type(call.func) is cst.Attribute
            and is_keras_metric(self.program.facts, call.func.value)
        ):
            return f"the Keras metric `{self.program.code_for(call.func.value)}`"
        qualified = self.program.facts.qualified_name(call.func) or ""
        if qualified.startswith("tensorflow.") and qualified not in _HARMLESS_TF:
            return f"`{self.program.code_for(call.func)}`"
        return None

    # -- apply_gradients ---------------------------------------------------------------------------
    def _check_apply(self, call: cst.Call) -> None:
        if not call.args:
            return
        pairs = call.args[0].value
        gradients: Optional[cst.BaseExpression] = None
        if (
            type(pairs) is cst.Call
            and type(pairs.func) is cst.Name
            and pairs.func.value == "zip"
            and pairs.args
        ):
            gradients = pairs.args[0].value
        output = self._output(gradients) if gradients is not None else None
        if output is None or gradients is None or id(gradients) in self.reported:
            return
        self.reported.add(id(gradients))
        name = output.name
        variable = "grad" if name == "g" else "g"
        message = (
            f"`{name}` is what the step function `{output.step}` returned: a list of `StepOutput`s,"
            " one value per microbatch for each gradient, not the gradients."
            f" `{self.program.code_for(call.func)}` needs one tensor per variable: combine them"
            f" first, `[{variable}.accumulate() for {variable} in {name}]` (or `.reduce_mean()`)."
        )
        fix = PendingFix(
            Applicability.UNSAFE,
            "Accumulate the gradients over the microbatches",
            (ReplaceNode(gradients, f"[{variable}.accumulate() for {variable} in {name}]"),),
        )
        title = f"`{name}` (from step `{output.step}`) holds `StepOutput`s, not gradients"
        self.report(gradients, title, explanation=message, severity=Severity.ERROR, fix=fix)

    # -- reports -----------------------------------------------------------------------------------
    def _flag_raw(self, node: cst.BaseExpression, output: _Output, what: str) -> None:
        if id(node) in self.reported:
            return
        self.reported.add(id(node))
        name = output.name
        message = (
            f"`{name}` is what the step function `{output.step}` returned, a `StepOutput` holding"
            f" one value per microbatch, not a tensor, and {what} uses it as a tensor. Combine it"
            f" first: `{name}.reduce_mean()` for a loss or other scalar, `{name}.merge()` for"
            f" batch-shaped outputs such as predictions, `{name}.accumulate()` for gradients."
        )
        title = f"`StepOutput` `{name}` (from step `{output.step}`) used as a tensor"
        self.report(node, title, explanation=message, severity=Severity.ERROR)

    def _flag_inside_step(self, call: cst.Call, step: str, what: Optional[str]) -> None:
        spelled = self.program.code_for(call.func)
        if what == "hvd.allreduce":
            message = (
                f"`{spelled}(...)` runs inside the step function `{step}`, so once per microbatch"
                " and inside the pipeline: a collective per microbatch, on partial values."
                " All-reduce the combined gradients after the step:"
                " `[hvd.allreduce(g.accumulate()) for g in gradients]`."
            )
            title = (
                f"{snippet(spelled + '(...)', 30)} in step `{step}` runs a collective per"
                f" microbatch"
            )
            self.report(call, title, explanation=message, severity=Severity.WARNING)
            return
        message = (
            f"`{spelled}(...)` updates the weights inside the step function `{step}`, which runs"
            " once per microbatch: each update uses one microbatch's partial gradients, and the"
            " documentation says to apply gradients to what the step returns. Return the gradients"
            " from the step (`optimizer.get_gradients(loss, model.trainable_variables)`) and apply"
            " `[g.accumulate() for g in gradients]` after it."
        )
        title = (
            f"{snippet(spelled + '(...)', 30)} in step `{step}` updates weights once per microbatch"
        )
        self.report(call, title, explanation=message, severity=Severity.ERROR)


def _names(target: cst.BaseExpression) -> list[str]:
    if type(target) is cst.Name:
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in _names(element.value)]
    if type(target) is cst.StarredElement:
        return _names(target.value)
    return []
