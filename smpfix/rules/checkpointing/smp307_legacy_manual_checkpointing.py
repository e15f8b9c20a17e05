"""SMP307: the hand-built checkpoint of the optimizer under a rank guard, which hangs with optimizer
state sharding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument, bound_names, names_in
from smpfix.base.edits import DeleteStatementLines, InsertStatementBefore
from smpfix.base.findings import Applicability, Severity
from smpfix.job.jobfacts import FeatureState, Tri
from smpfix.program.ranks.rank_groups import cut
from smpfix.rules.checkpointing._enclosing_guards import EnclosingGuard, enclosing_guards
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet


class LegacyManualCheckpointing(Rule):
    summary = (
        "`optimizer.local_state_dict()` called under a rank guard: with `shard_optimizer_state` it"
        " gathers across ranks and hangs."
    )
    fix_availability = FixAvailability.UNSAFE
    depends_on = ("OSS",)
    tensor_parallelism = TensorParallelism.NONE

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (type(func) is cst.Attribute and func.attr.value == "local_state_dict"):
            return
        if not (
            type(func.value) is cst.Name
            and func.value.value in self.program.facts.optimizer_names()
        ):
            return
        gather = argument(node, "gather_if_shard", 0)
        if gather is not None and self.program.facts.literal(gather.value) is False:
            return  # no gather: each rank returns its own shard
        guards = self._guards()
        split = (
            cut(
                [g.function for guard in guards for g in guard.guards],
                "RDP_GROUP",
                self.program.job,
            )
            if guards
            else None
        )
        oss = self.feature("OSS", node)
        if split is not None and oss.state is not Tri.OFF:
            self._flag_hang(node, guards, oss)

    def _guards(self) -> list[EnclosingGuard]:
        return enclosing_guards(self.ancestry.stack, self.program.facts, self.program.modules)

    def _flag_hang(
        self, call: cst.Call, guards: Sequence[EnclosingGuard], oss: FeatureState
    ) -> None:
        known = oss.state is Tri.ON
        test = " ".join(self.program.code_for(guards[-1].test).split())
        spelled = self.program.code_for(call.func)
        called = snippet(f"{spelled}()", 30)
        if known:
            lead = "With optimizer state sharding on"
            severity = Severity.ERROR
            title = f"{called} under a rank guard with optimizer state sharding: the job hangs"
        else:
            lead = "If `shard_optimizer_state` is enabled"
            severity = Severity.HINT
            title = f"{called} under a rank guard hangs if `shard_optimizer_state` is on"
        self.report(
            call,
            title,
            explanation=(
                f"{lead}, `{spelled}()` gathers the optimizer state from every rank of its"
                f" reduced-data-parallel group, but under `if {test}:` only some of those ranks"
                " call it, and they wait for the others forever: the job hangs at its first"
                " checkpoint. Call it on every rank and keep only the file write under the guard,"
                " or save with `smp.save_checkpoint(path, tag, partial=True, model=model,"
                " optimizer=optimizer)` on every rank (SMP 1.10 and later), which handles sharded"
                " optimizer state."
            ),
            severity=severity,
            fix=self._hoist(call, guards),
            job_facts=(oss,),
        )

    def _hoist(self, call: cst.Call, guards: Sequence[EnclosingGuard]) -> Optional[PendingFix]:
        """``x = optimizer.local_state_dict()`` directly in the body of the one guarding ``if``
        moves before that ``if``, so every rank calls it."""
        if len(guards) != 1 or guards[0].if_node is None:
            return None
        if_node = guards[0].if_node
        statement, block = self.ancestry.parent(2), self.ancestry.parent(3)
        small = self.ancestry.parent(1)
        if not (
            type(small) is cst.Assign
            and small.value is call
            and type(statement) is cst.SimpleStatementLine
        ):
            return None
        if len(statement.body) != 1 or block is not if_node.body or len(if_node.body.body) < 2:
            return None
        body = if_node.body.body
        earlier = body[: next(i for i, s in enumerate(body) if s is statement)]
        reads = names_in(statement)
        if any(reads & bound_names(other) for other in earlier):
            return None
        edits = (
            DeleteStatementLines(statement),
            InsertStatementBefore(if_node, statement, self.program.module),
        )
        return PendingFix(
            Applicability.UNSAFE,
            "Call `local_state_dict()` on every rank, before the rank guard",
            edits,
        )
