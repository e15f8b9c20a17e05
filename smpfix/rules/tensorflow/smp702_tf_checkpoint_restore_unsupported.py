"""SMP702: TensorFlow's own checkpoint restore, its own manager, or an early
``smp.CheckpointManager`` restore.

``tf.train.Checkpoint(...).restore()`` is unsupported: each rank holds one partition of the
model, and only ``smp.CheckpointManager`` writes and reads one directory per partition
(``mp_rank_<i>``). ``tf.train.CheckpointManager`` writes every partition into one directory.
``smp.CheckpointManager.restore()`` before the first step hangs with SMP 1.0-1.2 (their
documentation: "must be called after the first training step"); from 1.3 the library defers
such a restore until the model is partitioned, so it is reported only for those versions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

import libcst as cst

from smpfix.base.findings import Severity
from smpfix.base.flavour import ONLY_TENSORFLOW
from smpfix.base.parents import CodeScope
from smpfix.base.walker import Ancestry, iter_nodes
from smpfix.program.model import Program
from smpfix.rules.rule import Rule, TensorParallelism
from smpfix.rules.titles import snippet

_TF_CHECKPOINT = frozenset({"tensorflow.train.Checkpoint", "tensorflow.compat.v2.train.Checkpoint"})
_TF_MANAGER = frozenset(
    {"tensorflow.train.CheckpointManager", "tensorflow.compat.v2.train.CheckpointManager"}
)
_RESTORING = frozenset({"restore", "read"})
_LOOPS = (cst.For, cst.While)


class TfCheckpointRestoreUnsupported(Rule):
    summary = (
        "Restore TensorFlow checkpoints with `smp.CheckpointManager`, not"
        " `tf.train.Checkpoint.restore()` or `tf.train.CheckpointManager`."
    )
    flavours = ONLY_TENSORFLOW
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        # Calls that train: a step function, or a local function that (indirectly) calls one.
        self.training = self.program.calls.reaching(self.program.facts.step_functions)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.program.facts.qualified_name(node.func)
        if qualified in _TF_MANAGER:
            self._flag_manager(node)
            return
        func = node.func
        if type(func) is not cst.Attribute or func.attr.value not in _RESTORING:
            return
        built = self._construction(func.value)
        if built is None:
            return
        kind = self.program.facts.qualified_name(built.func)
        if kind in _TF_CHECKPOINT:
            self._flag_tf_restore(node, func.attr.value)
        elif (
            func.attr.value == "restore"
            and self.program.facts.smp_member(built.func) == "CheckpointManager"
        ):
            self._check_early_restore(node)

    def _construction(self, expr: cst.BaseExpression) -> Optional[cst.Call]:
        """The call that built the object ``expr`` names (``ckpt`` bound once to
        ``tf.train.Checkpoint(...)``)."""
        if type(expr) is cst.Call:
            return expr
        if type(expr) is cst.Name:
            assignment = self.program.facts.names.assignment(expr.value, expr)
            if assignment is not None and type(assignment.value) is cst.Call:
                return assignment.value
        return None

    # -- reports -------------------------------------------------------------------------------
    def _flag_tf_restore(self, call: cst.Call, method: str) -> None:
        spelled = self.program.code_for(call.func)
        message = (
            f"`{spelled}(...)` restores a `tf.train.Checkpoint` directly, which the library does"
            " not support: each rank holds only its partition of the `smp.DistributedModel`, and"
            " only `smp.CheckpointManager` saves and restores one checkpoint per partition"
            " (`mp_rank_<i>` directories). Wrap the checkpoint in"
            " `smp.CheckpointManager(checkpoint, directory)` and call its `restore()` inside the"
            " training loop."
        )
        title = (
            f"{snippet(spelled + '(...)', 30)} restores a `tf.train.Checkpoint` without"
            f" `smp.CheckpointManager`"
        )
        self.report(call, title, explanation=message, severity=Severity.ERROR)

    def _flag_manager(self, call: cst.Call) -> None:
        spelled = self.program.code_for(call.func)
        message = (
            f"`{spelled}(...)` manages the checkpoints of a model the library splits across ranks:"
            " every pipeline rank saves its own partition into the same directory under the same"
            " names, and a restore reads another rank's variables. Use"
            " `smp.CheckpointManager(checkpoint, directory)`, which keeps one subdirectory per"
            " partition (same arguments)."
        )
        title = (
            f"{snippet(spelled + '(...)', 30)} mixes the partitions of every pipeline rank in one"
            f" directory"
        )
        self.report(call, title, explanation=message, severity=Severity.WARNING)

    def _check_early_restore(self, call: cst.Call) -> None:
        """``ckpt_manager.restore()`` before the training loop: before the first step call."""
        ref = self.program.facts.statement_of(self._statement(call))
        if ref is None or self.ancestry.nearest(*_LOOPS) is not None:
            return
        loop = next(
            (loop for loop in self._later_loops(ref.scope, call) if self._trains(loop)), None
        )
        if loop is None:
            return
        spelled = self.program.code_for(call.func)
        message = (
            f"`{spelled}()` runs before the training loop, so before the first step has partitioned"
            " the model: SMP 1.2 and earlier must restore after the first training step, and a"
            " restore before it may hang. This matters"
            f" {'because ' if self.program.job.smp_version is not None else ''}"
            f"{self.version_condition(until=(1, 2))}."
            " Move it into the loop, after the first step call (from SMP 1.3 the library defers an"
            " early restore until the model is partitioned)."
        )
        title = (
            f"{snippet(spelled + '()', 30)} restores before the first step: may hang on SMP 1.2 and"
            f" earlier"
        )
        self.report(call, title, explanation=message, severity=Severity.ERROR, until=(1, 2))

    # -- where the training loop is ----------------------------------------------------------
    def _statement(self, call: cst.Call) -> cst.CSTNode:
        for node in reversed(self.ancestry.stack):
            if self.program.facts.statement_of(node) is not None:
                return node
        return call

    def _later_loops(self, scope: CodeScope, call: cst.Call) -> Iterator[cst.CSTNode]:
        """Loops of the function (or module) that runs ``call``, after it in the source."""
        for node in iter_nodes(scope if isinstance(scope, cst.Module) else scope.body):
            if isinstance(node, _LOOPS) and self._after(node, call):
                yield node

    def _after(self, loop: cst.CSTNode, call: cst.Call) -> bool:
        calls = [node for node in iter_nodes(loop) if type(node) is cst.Call]
        return bool(calls) and self.program.order.runs_before(call, calls[0])

    def _trains(self, loop: cst.CSTNode) -> bool:
        return any(
            type(node) is cst.Call
            and type(node.func) is cst.Name
            and node.func.value in self.training
            for node in iter_nodes(loop)
        )
