"""SMP108: a library call that runs before ``smp.init()``."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.findings import Severity
from smpfix.program.facts import RANK_FUNCTIONS, FileFacts
from smpfix.program.order.execution import Run
from smpfix.program.order.initialisation import (
    InitialisationMode,
    Initialisations,
    Mode,
    imports_initialise,
    initialisation_mode,
)
from smpfix.rules.rule import Rule, TensorParallelism

# Members that fail before initialisation, and what happens.
_CRASHES = {
    "DistributedModel": (
        "reads the library's configuration, which does not exist yet (AttributeError)"
    ),
    "model_creation": (
        "reads the library's configuration, which does not exist yet (AttributeError)"
    ),
    "delay_param_initialization": (
        "reads the library's configuration, which does not exist yet (AttributeError)"
    ),
    "resume_from_checkpoint": (
        "reads the library's configuration, which does not exist yet (AttributeError)"
    ),
    "save_checkpoint": "reads the library's state, which does not exist yet",
    "DistributedOptimizer": "finds no `smp.DistributedModel` and raises RuntimeError",
    **{member: "raises NotInitializedError" for member in (*RANK_FUNCTIONS, "size", "local_size")},
}
# Members that silently do nothing before initialisation; ``smp.init()`` also clears the
# module marks they would have made.
_NO_OPS = frozenset(
    {
        "tensor_parallelism",
        "partition",
        "set_tensor_parallelism",
        "set_partition",
        "set_activation_checkpointing",
    }
)
# Size queries return 1 before initialisation and the library caches the answer.
_POISONS = frozenset({"pp_size", "tp_size", "dp_size", "rdp_size", "mp_size"})


class SmpApiBeforeInit(Rule):
    summary = (
        "Library calls before `smp.init()` fail, do nothing, or (size queries) corrupt the rank"
        " layout."
    )
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        return bool(facts.smp_init_calls)

    def leave_Module(self, node: cst.Module) -> None:
        if imports_initialise(self.program.facts):
            return
        order = self.program.order
        inits = Initialisations(self.program.file, self.program.modules)
        candidates = [
            (run, member) for run in order.runs if (member := self._member(run.call)) is not None
        ]
        if not candidates:
            return
        # One pass each over the order: every initialisation, and the explicit smp.init() calls.
        initialising = order.matching(inits.any)
        explicit = [run for run in initialising if inits.explicit(run)]
        mode = initialisation_mode(self.program.facts, self.program.job)
        seen: set[int] = set()
        for run, member in candidates:
            if id(run.call) in seen or any(
                other.order < run.order and not other.exclusive_with(run) for other in initialising
            ):
                continue
            later = [
                other
                for other in explicit
                if other.order > run.order and not other.exclusive_with(run)
            ]
            if not later:
                continue
            seen.add(id(run.call))
            self._flag(run, member, later[0], mode)

    def _member(self, call: cst.Call) -> Optional[str]:
        member = self.program.facts.smp_member(call.func)
        if member == "delay_param_initialization":
            enabled = argument(call, "enabled", 0)
            if enabled is not None and self.program.facts.literal(enabled.value) is False:
                return None
        if member in _CRASHES or member in _NO_OPS or member in _POISONS:
            return member
        return None

    def _flag(self, run: Run, member: str, init: Run, mode: InitialisationMode) -> None:
        init_code = " ".join(self.program.code_for(init.call).split())
        init_code = init_code if len(init_code) <= 40 else "smp.init(...)"
        if member in _POISONS:
            harm = "ranks are laid out wrong"
            what = (
                "returns 1 before initialisation, and the library caches that answer for the life"
                f" of the process: `{init_code}` then lays out the ranks with it, so ranks, groups"
                " and the worker-count check are wrong"
            )
        elif member in _NO_OPS:
            harm = "it does nothing"
            what = (
                "does nothing before initialisation (and `smp.init()` clears the module marks made"
                " before it), so the model is built without it"
            )
        else:
            harm = "it fails"
            what = _CRASHES[member]
        before = f"`smp.{member}` runs before `smp.init`"
        lead = f"`smp.{member}` runs before `{init_code}`: it {what}."
        fix = (
            f"Call `{init_code}` first, before any other library call (move it up, or move this"
            " code after it)."
        )
        if mode.mode is Mode.BY_SCRIPT:
            self.report(
                run.call,
                f"{before}: {harm}",
                explanation=f"{lead} The library is initialised only by the script here. {fix}",
                evidence=(f"the library is initialised only by the script: {mode.reason}",),
            )
        elif mode.mode is Mode.ON_IMPORT:
            message = (
                f"`smp.{member}` runs before `{init_code}`. It works only because {mode.reason};"
                f" with SMP_MANUAL_INIT=1 or outside that launch it {what}. {fix}"
            )
            self.report(
                run.call,
                f"{before}: works only through import-time init",
                explanation=message,
                severity=Severity.HINT,
            )
        else:
            message = (
                f"`smp.{member}` runs before `{init_code}`: unless the library initialised itself"
                " on import (SMP 1.12 and later under SageMaker's MPI launcher, without"
                f" SMP_MANUAL_INIT=1), it {what}. {fix}"
            )
            self.report(
                run.call,
                f"{before}: {harm} without import-time init",
                explanation=message,
                severity=Severity.WARNING,
            )
