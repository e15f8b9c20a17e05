"""SMP703: Horovod used against the library: ``hvd.init()``, ``hvd.DistributedOptimizer``, or
Horovod off.

Under ``"horovod": True`` the library starts Horovod itself, on the data-parallel group
(``hvd.init(dp_group)``), so ``hvd.allreduce`` averages over the model replicas and not over
ranks that hold different partitions. A script's own ``hvd.init()`` starts it over every
rank instead; ``hvd.DistributedOptimizer`` puts the allreduce inside the step, once per
microbatch; and without ``"horovod": True`` nothing starts Horovod for the script's
``hvd.allreduce``.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.edits import DeleteStatementLines
from smpfix.base.findings import Applicability, Severity
from smpfix.base.flavour import ONLY_TENSORFLOW
from smpfix.base.walker import Ancestry
from smpfix.job.jobfacts import Tri
from smpfix.program.model import Program
from smpfix.program.tensorflow.training import horovod_member
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet

# Horovod calls that need Horovod started (collectives, the ranks, and the Keras callbacks).
_NEEDS_INIT = frozenset(
    {
        "allreduce",
        "allgather",
        "broadcast",
        "broadcast_variables",
        "broadcast_global_variables",
        "alltoall",
        "grouped_allreduce",
        "join",
        "rank",
        "size",
        "local_rank",
        "local_size",
        "cross_rank",
        "cross_size",
        "callbacks.BroadcastGlobalVariablesCallback",
        "callbacks.MetricAverageCallback",
    }
)


class TfHorovodMisuse(Rule):
    summary = (
        'With Horovod, set `"horovod": True` and let the library start it: no `hvd.init()`, no'
        " `hvd.DistributedOptimizer`."
    )
    flavours = ONLY_TENSORFLOW
    fix_availability = FixAvailability.SOMETIMES_SAFE
    depends_on = ("HVD", "PP")
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        # Each `hvd.init()` with the statement a fix may delete (None when it is not alone there).
        self.inits: list[tuple[cst.Call, Optional[cst.SimpleStatementLine]]] = []
        self.uses: list[tuple[cst.Call, str]] = []

    def visit_Call(self, node: cst.Call) -> None:
        member = horovod_member(self.program.facts, node.func)
        if member == "init":
            self.inits.append((node, self._own_statement(node)))
        elif member == "DistributedOptimizer":
            self._flag_optimizer(node)
        elif member in _NEEDS_INIT:
            self.uses.append((node, member))

    def leave_Module(self, node: cst.Module) -> None:
        for call, statement in self.inits:
            self._flag_init(call, statement)
        if not self.inits and self.uses:
            self._flag_horovod_off(*self.uses[0])

    # -- hvd.init() --------------------------------------------------------------------------
    def _flag_init(self, call: cst.Call, statement: Optional[cst.SimpleStatementLine]) -> None:
        hvd = self.feature("HVD")
        spelled = self.program.code_for(call.func)
        if hvd.state is Tri.ON:
            message = (
                f"`{spelled}()` starts Horovod a second time: {hvd.condition()}, so the library"
                " already starts it in `smp.init()`, on the data-parallel group, and the"
                " documentation says not to call `hvd.init()` directly. Delete this call."
            )
            title = (
                f"{snippet(spelled + '()', 24)} starts Horovod a second time, after `smp.init()`"
            )
            self.report(
                call,
                title,
                explanation=message,
                severity=Severity.ERROR,
                fix=_delete(statement, Applicability.SAFE),
                job_facts=(hvd,),
            )
            return
        if hvd.state is Tri.OFF:
            pp = self.feature("PP")
            severity = self.severity_when(pp)
            if severity is None:
                # one partition: every rank is its own replica, and Horovod's world is the
                # data-parallel group
                return
            message = (
                f"`{spelled}()` starts Horovod over every rank, and {hvd.condition()}, so the"
                " library does not start it on the data-parallel group:"
                f" {'with' if pp.state is Tri.ON else 'if'} pipeline parallelism"
                f" {'on' if pp.state is Tri.ON else 'is enabled'}, `hvd.allreduce` then averages"
                " gradients across ranks that hold different partitions of the model. Set"
                ' `"horovod": True` in the configuration and delete this call.'
            )
            when = "" if pp.state is Tri.ON else " if pipelined"
            title = (
                f"{snippet(spelled + '()', 24)} starts Horovod over every rank: allreduce mixes"
                f" partitions{when}"
            )
            self.report(call, title, explanation=message, severity=severity, job_facts=(hvd, pp))
            return
        message = (
            f'`{spelled}()` starts Horovod over every rank. The documented way is `"horovod": True`'
            " in the configuration and no `hvd.init()`: the library then starts Horovod in"
            " `smp.init()` on the data-parallel group, so `hvd.allreduce` averages over model"
            ' replicas, not over ranks holding different partitions. Set `"horovod": True` and'
            " delete this call."
        )
        title = (
            f'{snippet(spelled + "()", 24)} instead of `"horovod": True` starts Horovod'
            " over every rank"
        )
        self.report(
            call,
            title,
            explanation=message,
            severity=Severity.WARNING,
            fix=_delete(statement, Applicability.UNSAFE),
            job_facts=(hvd,),
        )

    def _own_statement(self, call: cst.Call) -> Optional[cst.SimpleStatementLine]:
        """The statement ``call`` makes up alone, when its block keeps other statements."""
        statement = self.ancestry.parent(2)
        block = self.ancestry.parent(3)
        if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
            return None
        small = statement.body[0]
        if type(small) is not cst.Expr or small.value is not call:
            return None
        if not isinstance(block, (cst.IndentedBlock, cst.Module)) or len(block.body) < 2:
            return None
        return statement

    # -- hvd.DistributedOptimizer --------------------------------------------------------------
    def _flag_optimizer(self, call: cst.Call) -> None:
        spelled = self.program.code_for(call.func)
        message = (
            f"`{spelled}(...)` all-reduces gradients inside `get_gradients`, which runs in the step"
            " function, once per microbatch and inside the pipeline: the documentation warns of"
            " poor performance or hangs. Use the plain optimizer, and all-reduce the combined"
            " gradients after the step: `[hvd.allreduce(g.accumulate()) for g in gradients]`."
        )
        title = (
            f"{snippet(spelled + '(...)', 30)} all-reduces per microbatch inside the step: slow, or"
            f" hangs"
        )
        self.report(call, title, explanation=message, severity=Severity.WARNING)

    # -- Horovod used, never started --------------------------------------------------------------
    def _flag_horovod_off(self, call: cst.Call, member: str) -> None:
        hvd = self.feature("HVD")
        if hvd.state is not Tri.OFF:
            # on, or unknown: the script is written for `"horovod": True`, as the official one
            return
        spelled = self.program.code_for(call.func)
        message = (
            f"`{spelled}` needs Horovod started, but {hvd.condition()} and the script (rightly)"
            " does not call `hvd.init()`: the library starts Horovod, on the data-parallel group,"
            ' only with `"horovod": True`, so this fails when it first runs. Set `"horovod": True`'
            " in the configuration."
        )
        title = (
            f"{snippet(spelled, 24)} needs Horovod, which the library starts only with"
            ' `"horovod": True`'
        )
        self.report(call, title, explanation=message, severity=Severity.ERROR, job_facts=(hvd,))


def _delete(
    statement: Optional[cst.SimpleStatementLine], applicability: Applicability
) -> Optional[PendingFix]:
    if statement is None:
        return None
    return PendingFix(applicability, "Delete `hvd.init()`", (DeleteStatementLines(statement),))
