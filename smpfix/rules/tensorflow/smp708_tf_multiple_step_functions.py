"""SMP708: more than one TensorFlow step function computes gradients (a hint, nothing more).

It is sometimes said that the TensorFlow library refuses a second ``smp.step``
function, from a check in its source (``raise_if_different_compilation_target``). That check
is never called in the published TensorFlow code, its test is commented out, the library's
own ``DistributedModel`` defines two step functions (training and evaluation), and every
official example pairs a training step with an evaluation step. So two step functions are
not reported. What no document or example shows is several *training* steps, each tracing
the model's backward pass: this rule points those out as a hint, for a person to check.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from smpfix.base.findings import Severity
from smpfix.base.flavour import ONLY_TENSORFLOW
from smpfix.base.walker import iter_nodes
from smpfix.program.facts import FileFacts
from smpfix.program.order.call_graph import LocalCalls
from smpfix.program.steps import StepFunction
from smpfix.program.tensorflow.training import is_gradient_tape
from smpfix.rules.rule import Rule, TensorParallelism

_GRADIENT_METHODS = frozenset({"get_gradients", "compute_gradients", "gradient"})
_GRADIENT_FUNCTIONS = frozenset({"tensorflow.gradients"})


class TfMultipleStepFunctions(Rule):
    summary = (
        "More than one TensorFlow `smp.step` function computes gradients; the documented pattern is"
        " one training step (and optionally an evaluation step)."
    )
    flavours = ONLY_TENSORFLOW
    default_severity = Severity.HINT
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        return len(facts.step_functions) > 1

    def leave_Module(self, node: cst.Module) -> None:
        calls = self.program.calls
        training = [
            step
            for step in self.program.steps
            if step.function is not None and self._computes_gradients(step, calls)
        ]
        training.sort(key=lambda step: self._order(step))
        if len(training) < 2:
            return
        for step in training[1:]:
            self._flag(step, training[0])

    def _order(self, step: StepFunction) -> int:
        """Where the step's ``def`` is in the file (``facts.functions`` is in source order)."""
        assert step.function is not None
        return (
            list(self.program.facts.functions).index(step.function.name.value)
            if step.function.name.value in self.program.facts.functions
            else 0
        )

    def _computes_gradients(self, step: StepFunction, calls: LocalCalls) -> bool:
        assert step.function is not None
        names = calls.reached_from([step.function.name.value])
        bodies: Sequence[cst.FunctionDef] = [
            self.program.facts.functions[name]
            for name in sorted(names)
            if name in self.program.facts.functions
        ]
        for body in bodies:
            for inner in iter_nodes(body.body):
                if type(inner) is not cst.Call:
                    continue
                func = inner.func
                if (
                    type(func) is cst.Attribute
                    and func.attr.value in _GRADIENT_METHODS
                    and self.program.facts.qualified_name(func) is None
                ):
                    return True
                if self.program.facts.qualified_name(
                    func
                ) in _GRADIENT_FUNCTIONS or is_gradient_tape(self.program.facts, func):
                    return True
        return False

    def _flag(self, step: StepFunction, first: StepFunction) -> None:
        assert step.function is not None
        message = (
            f"`{step.name}` is a second step function that computes gradients (so does"
            f" `{first.name}`). Several step functions are supported, and the official examples"
            " pair one training step with an evaluation step, but none shows two training steps;"
            " the claim that the library refuses a second step function rests on a check the"
            " published library never calls (`raise_if_different_compilation_target` in"
            " `v2/step_mod.py`), so this is only a hint. If both train the same"
            " model, consider one training step whose differences are arguments"
            " (`non_split_inputs` for flags)."
        )
        title = f"second gradient step function `{step.name}` besides `{first.name}`"
        self.report(step.function.name, title, explanation=message, severity=Severity.HINT)
