"""SMP022: ``tsm.transform(load_state_dict_from_rank0=True)`` without FSDP's
``sync_module_states``."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.edits import NodeEdit, ReplaceNode
from smpfix.base.findings import Applicability
from smpfix.fixes.arguments import append_arguments
from smpfix.job.versions import FIRST_V2
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.scope import FileScope, Library
from smpfix.rules.smp_v2._script import V2Calls, has_star_kwargs, keyword, keyword_value
from smpfix.rules.titles import snippet


class Rank0LoadWithoutSyncModuleStates(Rule):
    summary = (
        "`tsm.transform(..., load_state_dict_from_rank0=True)` loads the weights into the first"
        " tensor parallel group only; without `sync_module_states=True` on the FSDP wrap the"
        " other ranks train from random weights."
    )
    fix_availability = FixAvailability.SOMETIMES_SAFE
    tensor_parallelism = TensorParallelism.NONE
    library = Library.V2
    scope = FileScope.SMP_V2
    since = FIRST_V2

    def leave_Module(self, node: cst.Module) -> None:
        facts = self.program.facts
        calls = self.program.file.answer(V2Calls)
        loading = [
            call
            for call in calls.transforms
            if keyword_value(facts, call, "load_state_dict_from_rank0") is True
        ]
        if not loading or not calls.fsdp:
            return
        unsynced = [
            wrap
            for wrap in calls.fsdp
            if keyword_value(facts, wrap, "sync_module_states") in (None, False)
        ]
        if len(unsynced) != len(calls.fsdp):
            return  # a wrap syncs, or might: quiet
        for call in loading:
            at = keyword(call, "load_state_dict_from_rank0")
            assert at is not None
            wrap = unsynced[0]
            passed = keyword(wrap, "sync_module_states")
            said = (
                "passes `sync_module_states=False`"
                if passed is not None and facts.literal(passed.value) is False
                else "leaves out `sync_module_states`"
            )

            wrapped = snippet(f"{self.program.code_for(wrap.func)}(...)")
            self.report(
                at,
                "`load_state_dict_from_rank0=True` without `sync_module_states=True`: other ranks"
                " start random",
                explanation=(
                    "`load_state_dict_from_rank0=True` loads the original weights into the tensor"
                    " parallel group of rank 0 only, and relies on FSDP to broadcast them to every"
                    " other process: without it every other group starts from freshly initialised"
                    " weights, and the fine-tuning silently diverges across replicas. Pass"
                    " `sync_module_states=True` to the FSDP wrap."
                ),
                evidence=(f"the FSDP wrap {wrapped} {said}",),
                fix=_sync_fix(wrap) if len(calls.fsdp) == 1 else None,
            )


def _sync_fix(wrap: cst.Call) -> Optional[PendingFix]:
    """``sync_module_states=True`` on the one FSDP wrap. FSDP broadcasts from GPU memory: with
    ``device_id`` passed it moves the module there itself, so the fix is safe; without it, a
    module still on the CPU makes the wrap raise, which a person should check (unsafe)."""
    if has_star_kwargs(wrap):
        return None
    passed = keyword(wrap, "sync_module_states")
    edit: NodeEdit
    if passed is not None:
        edit = ReplaceNode(passed.value, "True")
    else:
        appended = append_arguments(wrap, ["sync_module_states=True"])
        if appended is None:
            return None
        edit = appended
    on_device = keyword(wrap, "device_id") is not None
    return PendingFix(
        Applicability.SAFE if on_device else Applicability.UNSAFE,
        "Pass `sync_module_states=True` to the FSDP wrap",
        (edit,),
    )
