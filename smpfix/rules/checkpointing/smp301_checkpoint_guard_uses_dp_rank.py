"""SMP301: a checkpoint block guarded by ``dp_rank() == 0`` hangs under tensor parallelism."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import libcst as cst

from smpfix.base.edits import NodeEdit, ReplaceNode
from smpfix.base.findings import Applicability
from smpfix.base.walker import iter_nodes
from smpfix.fixes.references import smp_reference
from smpfix.program.ranks.guards import RankGuard, early_exit_guard, rank_zero_guards
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet

_SMP_CHECKPOINT_CALLS = frozenset({"save", "load"})
_MODEL_STATE_METHODS = frozenset(
    {"state_dict", "local_state_dict", "load_state_dict", "local_optimizer_state_dict"}
)


class CheckpointGuardUsesDpRank(Rule):
    summary = (
        "Checkpoint code guarded by `smp.dp_rank() == 0` hangs under tensor parallelism; guard with"
        " `smp.rdp_rank()`."
    )
    fix_availability = FixAvailability.SAFE
    depends_on = ("TP",)
    tensor_parallelism = TensorParallelism.DEGREE

    def visit_If(self, node: cst.If) -> None:
        guards = [
            g
            for g in rank_zero_guards(node.test, self.program.facts, self.program.modules)
            if g.function == "dp_rank"
        ]
        if guards and self._has_checkpoint_call(node.body):
            self._flag(guards[0], node.test)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._check_early_exits(node.body)

    def visit_Module(self, node: cst.Module) -> None:
        self._check_early_exits(node.body)

    def _check_early_exits(self, body: Sequence[cst.BaseStatement]) -> None:
        for index, statement in enumerate(body):
            guards = [
                g
                for g in early_exit_guard(statement, self.program.facts)
                if g.function == "dp_rank"
            ]
            if guards and any(self._has_checkpoint_call(rest) for rest in body[index + 1 :]):
                self._flag(guards[0], statement.test)  # type: ignore[attr-defined]

    def _has_checkpoint_call(self, body: cst.CSTNode) -> bool:
        for node in iter_nodes(body):
            if type(node) is not cst.Call:
                continue
            if self.program.facts.smp_member(node.func) in _SMP_CHECKPOINT_CALLS:
                return True
            member = self.program.facts.smp_member(node.func) or ""
            if (
                member.startswith("nn.huggingface.")
                and ".translate_" in f".{member.rsplit('.', 1)[-1]}"
            ):
                return True
            if self._is_state_call(node):
                return True
            if self.program.facts.qualified_name(
                node.func
            ) == "torch.save" and self._saves_model_state(node):
                return True
        return False

    def _wrapped_names(self) -> frozenset[str]:
        return self.program.facts.distributed_model_names() | self.program.facts.optimizer_names()

    def _is_state_call(self, call: cst.Call) -> bool:
        """``model.state_dict()`` and friends on the wrapped model or optimizer.

        A file that wraps nothing itself (a helper module handed the model) counts any
        receiver, since it cannot tell the wrapped model from others.
        """
        func = call.func
        if type(func) is not cst.Attribute or func.attr.value not in _MODEL_STATE_METHODS:
            return False
        if self.program.facts.qualified_name(func) is not None:
            return False
        wrapped = self._wrapped_names()
        if not wrapped:
            return True
        root = func.value
        while isinstance(root, (cst.Attribute, cst.Call, cst.Subscript)):
            root = root.func if isinstance(root, cst.Call) else root.value
        return type(root) is cst.Name and root.value in wrapped

    def _saves_model_state(self, call: cst.Call) -> bool:
        wrapped = self._wrapped_names()
        return any(type(node) is cst.Name and node.value in wrapped for node in iter_nodes(call))

    def _fix(self, guard: RankGuard) -> Optional[PendingFix]:
        """Rewrite the rank call the guard tests, wherever it is; only that call changes."""
        edits: list[NodeEdit] = []
        if guard.via_variable:
            reference = smp_reference(self.program.file, "rdp_rank")
            if reference is None or guard.via_helper is not None:
                return None
            edits.extend(reference.edits)
            edits.append(ReplaceNode(guard.node, f"{reference.text}()"))
        elif guard.call is not None and type(guard.call.func) is cst.Attribute:
            edits.append(ReplaceNode(guard.call.func.attr, "rdp_rank"))
        elif guard.call is not None:
            reference = smp_reference(self.program.file, "rdp_rank")
            if reference is None:
                return None
            edits.extend(reference.edits)
            edits.append(ReplaceNode(guard.call.func, reference.text))
        else:
            return None
        return PendingFix(
            Applicability.SAFE, "Guard with `rdp_rank()` instead of `dp_rank()`", tuple(edits)
        )

    def _flag(self, guard: RankGuard, test: cst.BaseExpression) -> None:
        tp = self.feature("TP", at=test)
        severity = self.severity_when(tp)
        if severity is None:
            return
        spelled = self.program.code_for(test)
        why = (
            "tensor-parallel peers have different `dp_rank()` values, so only one of them enters"
            " this block and the `state_dict()` gather or partial save inside waits for the others:"
            " the job hangs"
        )
        guard_code = snippet(spelled, 30)
        title = (
            f"checkpoint guarded by {guard_code} under tensor parallelism: peers hang"
            if tp.state.value == "on"
            else f"checkpoint guarded by {guard_code} hangs if tensor parallelism is on"
        )
        self.report(
            test,
            title,
            explanation=(
                f"{why[:1].upper()}{why[1:]}. Guard it with `rdp_rank() == 0`, which equals"
                " `dp_rank()` when tensor parallelism is off."
            ),
            evidence=(f"checkpoint code is guarded by `{spelled}`",),
            severity=severity,
            fix=self._fix(guard),
            job_facts=(tp,),
        )
