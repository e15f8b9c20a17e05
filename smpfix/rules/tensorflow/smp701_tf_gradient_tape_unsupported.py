"""SMP701: ``tf.GradientTape`` in a TensorFlow SMP script, which the library does not support."""

from __future__ import annotations

import libcst as cst

from smpfix.base.findings import Severity
from smpfix.base.flavour import ONLY_TENSORFLOW
from smpfix.base.walker import Ancestry
from smpfix.program.model import Program
from smpfix.program.order.call_graph import innermost_function, run_inside_steps
from smpfix.program.tensorflow.training import is_gradient_tape
from smpfix.rules.rule import Rule, TensorParallelism
from smpfix.rules.titles import snippet


class TfGradientTapeUnsupported(Rule):
    summary = (
        "`tf.GradientTape` is not supported by the library; compute gradients with"
        " `optimizer.get_gradients(loss, model.trainable_variables)` inside `@smp.step`."
    )
    flavours = ONLY_TENSORFLOW
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.in_step = run_inside_steps(self.program.file)

    def visit_Call(self, node: cst.Call) -> None:
        if not is_gradient_tape(self.program.facts, node.func):
            return
        spelled = self.program.code_for(node.func)
        step = innermost_function(self.ancestry.stack, self.in_step)
        if step is not None:
            message = (
                f"`{spelled}()` records gradients inside the step function `{step}`: the library"
                " does not support `tf.GradientTape`, because `smp.step` traces the function into"
                " a partitioned, pipelined graph whose backward pass the library builds itself, so"
                " the tape's gradients miss the other partitions' work. Compute them with"
                " `optimizer.get_gradients(loss, model.trainable_variables)` inside the step, and"
                " apply them after it."
            )
            title = (
                f"{snippet(spelled + '()', 24)} in step `{step}`: tapes are unsupported by the"
                f" library"
            )
            self.report(node, title, explanation=message, severity=Severity.ERROR)
            return
        message = (
            f"`{spelled}()` in a script that uses the TensorFlow flavour of the library: the"
            " library does not support `tf.GradientTape`, and a tape cannot see the gradients of a"
            " `smp.DistributedModel` split across ranks. Compute gradients with"
            " `optimizer.get_gradients(loss, model.trainable_variables)` inside an `@smp.step`"
            " function."
        )
        title = f"{snippet(spelled + '()', 24)} cannot see a `smp.DistributedModel`'s gradients"
        self.report(node, title, explanation=message, severity=Severity.WARNING)
