"""SMP306: ``smp.resume_from_checkpoint`` in the wrong place or with arguments that cannot work."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import libcst as cst

from smpfix.base.calls import bound_names, names_in
from smpfix.base.edits import DeleteStatementLines, InsertStatementAfter
from smpfix.base.findings import Applicability, Severity
from smpfix.base.parents import ParentIndex
from smpfix.base.walker import Ancestry
from smpfix.job.jobfacts import Tri
from smpfix.program.facts import Wrap
from smpfix.program.model import Program
from smpfix.program.objects.checkpoint_api import (
    CHECKPOINT_API_SINCE,
    CheckpointCall,
    checkpoint_call,
    raises_on_purpose,
)
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism


class ResumeFromCheckpointMisuse(Rule):
    summary = (
        "`smp.resume_from_checkpoint` before `smp.DistributedOptimizer` under sharded data"
        " parallelism, a full load without a tag, or arguments the load ignores."
    )
    fix_availability = FixAvailability.UNSAFE
    depends_on = ("SDP",)
    since = CHECKPOINT_API_SINCE
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.resumes: list[CheckpointCall] = []

    def visit_Call(self, node: cst.Call) -> None:
        found = checkpoint_call(self.program.facts, node)
        if found is None or found.saves:
            return
        self.resumes.append(found)
        if not raises_on_purpose(self.ancestry.stack):
            self._check_arguments(found)

    # -- arguments -------------------------------------------------------------------------
    def _check_arguments(self, found: CheckpointCall) -> None:
        partial = found.value("partial")
        sdp = self.feature("SDP", found.call)
        if partial is False and found.value("tag") is None:
            self.report(
                found.call,
                "`resume_from_checkpoint(..., partial=False)` without a `tag` raises",
                explanation=(
                    'It raises SMPValidationError ("tag is required to load a full checkpoint"):'
                    " only partial checkpoints are found through the `newest` file. Pass the tag"
                    ' the full checkpoint was saved with, e.g. `tag="fullmodel.pt"`.'
                ),
                severity=Severity.ERROR,
                implied=CHECKPOINT_API_SINCE,
            )
        sharded = found.argument("load_sharded_optimizer_state")
        if sharded is not None and sdp.state is Tri.OFF:
            self.report(
                sharded,
                "`load_sharded_optimizer_state=` does nothing without sharded data parallelism",
                explanation=(
                    "The library reads `load_sharded_optimizer_state=` only under sharded data"
                    " parallelism, which is off in this job: the argument does nothing here."
                ),
                severity=Severity.HINT,
                job_facts=(sdp,),
                implied=CHECKPOINT_API_SINCE,
            )
        translate = found.argument("translate_function")
        if translate is not None and partial is True:
            self.report(
                translate,
                "`translate_function=` is ignored by this partial load",
                explanation=(
                    "`translate_function=` is used only for full loads (`partial=False`); this"
                    " partial load ignores it."
                ),
                severity=Severity.HINT,
                implied=CHECKPOINT_API_SINCE,
            )

    # -- order against smp.DistributedOptimizer -----------------------------------------------
    def leave_Module(self, node: cst.Module) -> None:
        if not self.resumes or not self.program.facts.distributed_optimizers:
            return
        parents = self.program.parents
        for found in self.resumes:
            sdp = self.feature("SDP", found.call)
            if sdp.state is Tri.OFF:
                continue
            later = self._wrap_after(found.call, parents)
            if later is None:
                continue
            wrapped = (
                f"`{later.target} = {self.program.code_for(later.call.func)}(...)`"
                if later.target
                else "`smp.DistributedOptimizer(...)`"
            )
            if sdp.state is Tri.ON:
                lead = "With sharded data parallelism on"
                severity = Severity.ERROR
                effect = "here it raises SMPValidationError"
                title = "`resume_from_checkpoint` before the optimizer wrap raises under sharding"
            else:
                lead = "If sharded data parallelism is enabled"
                severity = Severity.WARNING
                effect = "it raises SMPValidationError there"
                title = (
                    "`resume_from_checkpoint` before the optimizer wrap raises if sharded data"
                    " parallelism is on"
                )
            self.report(
                found.call,
                title,
                explanation=(
                    f"{lead}, `smp.resume_from_checkpoint` must run after {wrapped}, because the"
                    " sharded optimizer state can only be loaded into the wrapped optimizer:"
                    f" {effect}. Move the call after the optimizer is wrapped (without sharding"
                    " the load is deferred, so that order works in every job)."
                ),
                severity=severity,
                fix=self._move(found.call, later, parents),
                job_facts=(sdp,),
                implied=CHECKPOINT_API_SINCE,
            )

    def _wrap_after(self, call: cst.Call, parents: ParentIndex) -> Optional[Wrap]:
        """The ``smp.DistributedOptimizer`` of the same function that runs after ``call``, when
        none runs before it on the same path."""
        later: Optional[Wrap] = None
        order = self.program.order
        for wrap in self.program.facts.distributed_optimizers:
            if not order.same_function(wrap.call, call):
                continue
            if order.runs_before(wrap.call, call):
                return None
            if later is None and order.runs_before(call, wrap.call):
                later = wrap
        return later

    def _move(self, call: cst.Call, wrap: Wrap, parents: ParentIndex) -> Optional[PendingFix]:
        """Move the resume statement to just after the wrap, when both sit in one block and
        nothing in between reads what the resume binds or rebinds what it reads."""
        statement = parents.parent_of(parents.parent_of(call) or call)
        if (
            type(statement) is not cst.SimpleStatementLine
            or len(statement.body) != 1
            or wrap.where is None
        ):
            return None
        small = statement.body[0]
        if not (type(small) is cst.Expr and small.value is call) and not (
            type(small) is cst.Assign and small.value is call
        ):
            return None
        block = parents.parent_of(statement)
        body: Sequence[cst.CSTNode] = getattr(block, "body", ())
        if wrap.where.block is not block:
            return None
        start = next(i for i, s in enumerate(body) if s is statement)
        between = body[start + 1 : wrap.where.index + 1]
        binds, reads = bound_names(statement), names_in(statement)
        for other in between:
            if binds & names_in(other) or reads & bound_names(other):
                return None
        edits = (
            DeleteStatementLines(statement),
            InsertStatementAfter(wrap.where.statement, statement, self.program.module),
        )
        return PendingFix(
            Applicability.UNSAFE,
            "Move `smp.resume_from_checkpoint` after `smp.DistributedOptimizer`",
            edits,
        )
