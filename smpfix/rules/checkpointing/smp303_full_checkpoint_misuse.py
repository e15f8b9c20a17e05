"""SMP303: checkpoints that silently lose state (the optimizer, or all but one partition)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument, called_name
from smpfix.base.edits import ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.walker import iter_nodes
from smpfix.job.groups import data_parallelism
from smpfix.job.jobfacts import FeatureState, Tri
from smpfix.program.objects.checkpoint_api import CHECKPOINT_API_SINCE
from smpfix.program.ranks.rank_groups import cut
from smpfix.rules.checkpointing._enclosing_guards import enclosing_guards
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet, unknown_settings

# smp.save_checkpoint(path, tag, partial=True, model=None, optimizer=None, ...)
_CHECKPOINT_PARTIAL, _CHECKPOINT_OPTIMIZER = 2, 4
# smp.save(obj, f, partial=True, ...)
_SAVE_OBJECT, _SAVE_PARTIAL = 0, 2


def _any_on(states: Sequence[FeatureState]) -> tuple[Tri, tuple[FeatureState, ...]]:
    """ON if one is on, OFF if all are off, else UNKNOWN; with the states that decide it."""
    on = tuple(s for s in states if s.state is Tri.ON)
    if on:
        return Tri.ON, on
    unknown = tuple(s for s in states if s.state is Tri.UNKNOWN)
    return (Tri.UNKNOWN, unknown) if unknown else (Tri.OFF, ())


def _words(state: Tri, states: Sequence[FeatureState]) -> str:
    """ "because tensor parallelism is enabled (...)" or "if A, B or C is enabled"."""
    if state is Tri.ON:
        return "because " + " and ".join(s.condition() for s in states)
    titles = [s.feature.title for s in states]
    listed = titles[0] if len(titles) == 1 else ", ".join(titles[:-1]) + " or " + titles[-1]
    return f"if {listed} is enabled"


def _lowered(text: str) -> str:
    """A sentence that goes on after a semicolon: its first letter in lower case."""
    return text[:1].lower() + text[1:]


class FullCheckpointMisuse(Rule):
    summary = (
        "A checkpoint that drops state: `smp.save_checkpoint(partial=False, optimizer=...)`, a"
        " full `optimizer.state_dict()` under TP/OSS/SDP, `local_state_dict()` saved with"
        " `smp.save(..., partial=False)`, or saved partially by one rank of a model replica."
    )
    fix_availability = FixAvailability.UNSAFE
    depends_on = ("TP", "OSS", "SDP", "PP")
    tensor_parallelism = TensorParallelism.BOTH

    def visit_Call(self, node: cst.Call) -> None:
        if called_name(node, self.program.facts.imports.bindings) not in (
            "save_checkpoint",
            "save",
            "state_dict",
        ):
            return
        member = self.program.facts.smp_member(node.func)
        if member == "save_checkpoint":
            self._check_save_checkpoint(node)
        elif member == "save":
            self._check_save(node)
        elif self._is_optimizer_state_dict(node):
            self._check_optimizer_state_dict(node)

    # -- smp.save_checkpoint(..., partial=False, optimizer=...) ---------------------------------
    def _check_save_checkpoint(self, call: cst.Call) -> None:
        partial = argument(call, "partial", _CHECKPOINT_PARTIAL)
        optimizer = argument(call, "optimizer", _CHECKPOINT_OPTIMIZER)
        if partial is None or optimizer is None:
            return
        if (
            self.program.facts.literal(partial.value) is not False
            or self.program.facts.literal(optimizer.value) is None
        ):
            return
        function = self.program.code_for(call.func)
        self.report(
            call,
            f"{snippet(function, 24)} with `partial=False` drops the optimizer state",
            explanation=(
                f"`{function}(..., partial=False, optimizer=...)` writes a full checkpoint, and a"
                " full checkpoint never holds the optimizer: the library skips it with only a"
                " warning, so a job resumed from it starts over with a fresh optimizer state. Save"
                " with `partial=True` to resume training; keep `partial=False` (without"
                " `optimizer`) for a final model export."
            ),
            severity=Severity.ERROR,
            fix=self._partial_fix(partial),
        )

    # -- smp.save(<local_state_dict()>, path, partial=False) ------------------------------------
    def _check_save(self, call: cst.Call) -> None:
        partial = argument(call, "partial", _SAVE_PARTIAL)
        saved = argument(call, "obj", _SAVE_OBJECT)
        if saved is not None and (
            partial is None or self.program.facts.literal(partial.value) is True
        ):
            self._check_partial_save(call, saved)
        if (
            partial is None
            or saved is None
            or self.program.facts.literal(partial.value) is not False
        ):
            return
        local = self._local_state_calls(saved.value)
        if not local:
            return
        states = [
            self.feature("PP", at=call),
            self.tp_distributed(at=call),
            self.feature("SDP", at=call),
        ]
        if any(self._receiver(c) in self.program.facts.optimizer_names() for c in local):
            states.append(self.feature("OSS", at=call))
        state, deciding = _any_on(states)
        if state is Tri.OFF:
            return
        spelled = self.program.code_for(local[0].func)
        when = _words(state, deciding)
        held = snippet(f"{spelled}()", 30)
        title = (
            f"{held} saved with `partial=False`: the ranks overwrite one file"
            if state is Tri.ON
            else f"{held} saved with `partial=False`: one file if the state is partitioned"
        )
        explanation = (
            f"`{spelled}()` holds only this rank's partition {when}, but"
            f" `{self.program.code_for(call.func)}(..., partial=False)` writes it to the one path"
            " every rank shares: the ranks overwrite each other and the file keeps a single"
            " partition. Save local state with `partial=True` (one file per partition), and load"
            " it with `partial=True`."
        )
        severity = Severity.ERROR if state is Tri.ON else Severity.WARNING
        self.report(
            call,
            title,
            explanation=explanation,
            severity=severity,
            fix=self._partial_fix(partial),
            job_facts=deciding,
        )

    # -- smp.save(<local_state_dict()>, path, partial=True) by one rank of a replica ------------
    def _check_partial_save(self, call: cst.Call, saved: cst.Arg) -> None:
        """A partial save writes one file per rank that calls it; under a guard that lets
        only one rank of a model replica through (``smp.rank() == 0``), the other pipeline
        stages and tensor-parallel slots never write theirs (developer guide, troubleshooting:
        save with ``dp_rank() == 0``, or ``rdp_rank() == 0`` under tensor parallelism). The
        ``dp_rank()`` guard under tensor parallelism is SMP301's."""
        if not self._local_state_calls(saved.value):
            return
        guards = enclosing_guards(self.ancestry.stack, self.program.facts, self.program.modules)
        functions = [g.function for guard in guards for g in guard.guards]
        if not functions or set(functions) <= {"dp_rank", "rdp_rank"}:
            return
        found = cut(functions, "MP_GROUP", self.program.job)
        if found is None:
            return
        test = " ".join(self.program.code_for(guards[-1].test).split())
        condition = found.condition()
        title = (
            f"partial save under {snippet(test, 30)}: the other partitions are never written"
            if not condition
            else "partial save by one rank of a replica misses partitions if"
            f" {unknown_settings(found.states)} is on"
        )
        self.report(
            call,
            title,
            explanation=(
                "`local_state_dict()` holds only this rank's partition of the model, and"
                " `smp.save(..., partial=True)` writes one file for each rank that calls it;"
                f" under `{test}` only one rank of the model replica does"
                f"{' ' + condition if condition else ''}, so the files of the other pipeline"
                " stages (and tensor-parallel slots) are missing and the checkpoint cannot be"
                " loaded. Guard the save with `smp.dp_rank() == 0` (`smp.rdp_rank() == 0` under"
                " tensor parallelism): every rank of one replica writes its partition."
            ),
            evidence=(f"the save runs only where `{test}`",),
            severity=Severity.ERROR if found.definite else Severity.WARNING,
            job_facts=found.states,
        )

    def _local_state_calls(self, expr: cst.BaseExpression, depth: int = 0) -> list[cst.Call]:
        """``x.local_state_dict()`` calls in ``expr``, also through the assignments of the names
        it uses that reach it (another branch's ``model_dict = model.local_state_dict()`` does not).
        """
        found: list[cst.Call] = []
        for node in iter_nodes(expr):
            if (
                type(node) is cst.Call
                and type(node.func) is cst.Attribute
                and node.func.attr.value == "local_state_dict"
            ):
                found.append(node)
            elif type(node) is cst.Name and depth < 2:
                for assignment in self.program.names.reaching(node.value, node).assignments:
                    if assignment.value is not node:
                        found.extend(self._local_state_calls(assignment.value, depth + 1))
        return found

    @staticmethod
    def _receiver(call: cst.Call) -> Optional[str]:
        func = call.func
        if type(func) is cst.Attribute and type(func.value) is cst.Name:
            return func.value.value
        return None

    # -- optimizer.state_dict() on the DistributedOptimizer --------------------------------------
    def _is_optimizer_state_dict(self, call: cst.Call) -> bool:
        func = call.func
        return (
            type(func) is cst.Attribute
            and func.attr.value == "state_dict"
            and type(func.value) is cst.Name
            and func.value.value in self.program.facts.optimizer_names()
        )

    def _check_optimizer_state_dict(self, call: cst.Call) -> None:
        # Tensor parallelism splits the optimizer state only where modules are distributed.
        sharding, single = self._optimizer_sharding(call)
        state, states = _any_on(
            [self.tp_distributed(at=call), sharding, self.feature("SDP", at=call)]
        )
        if state is Tri.OFF:
            return
        name = self._receiver(call)
        if single is not None and states == (sharding,):
            self._report_unsharded_flag(call, name, sharding, single)
            return
        when = _words(state, states)
        title = (
            f"`{name}.state_dict()` on a partitioned `smp.DistributedOptimizer` is unsupported"
            if state is Tri.ON
            else f"`{name}.state_dict()` is unsupported if the optimizer state is partitioned"
        )
        explanation = (
            f"`{name}.state_dict()` asks the `smp.DistributedOptimizer` for the full optimizer"
            f" state, which the library does not support {when}: the optimizer state is split"
            f" across ranks and cannot be saved whole. {self._partial_save_advice(name)}"
        )
        severity = Severity.ERROR if state is Tri.ON else Severity.WARNING
        self.report(call, title, explanation=explanation, severity=severity, job_facts=states)

    def _optimizer_sharding(self, call: cst.Call) -> tuple[FeatureState, Optional[FeatureState]]:
        """Optimizer state sharding as it bears on ``state_dict()``, and the job's single
        data-parallel rank when it has one (SMP824's "nothing to shard").

        With ``shard_optimizer_state`` set, the library's ``DistributedOptimizer.state_dict()``
        returns ``local_state_dict()`` before gathering anything (1.7 to 1.12.1), whatever the
        number of data-parallel ranks: with one, nothing is sharded, but the pipeline stages
        are still not gathered. Only with a single stage too (one process) is that the whole
        state, and the flag splits nothing.
        """
        sharding = self.feature("OSS", at=call)
        if sharding.state is not Tri.ON:
            return sharding, None
        ranks = data_parallelism(self.program.job)
        if ranks.state is not Tri.OFF:
            return sharding, None
        if self.feature("PP").state is Tri.OFF:
            return (
                FeatureState(
                    sharding.feature,
                    Tri.OFF,
                    f"{sharding.source}, with one data-parallel rank and one pipeline stage"
                    f" ({ranks.source}): nothing splits the state",
                ),
                None,
            )
        return sharding, ranks

    def _report_unsharded_flag(
        self, call: cst.Call, name: Optional[str], sharding: FeatureState, single: FeatureState
    ) -> None:
        """``state_dict()`` under a ``shard_optimizer_state`` that shards nothing (one
        data-parallel rank, several pipeline stages): the flag alone keeps the stages apart."""
        pipeline = self.feature("PP")
        self.report(
            call,
            f"`{name}.state_dict()` returns one pipeline stage's state: `shard_optimizer_state`"
            " is set",
            explanation=(
                f"`{name}.state_dict()` asks the `smp.DistributedOptimizer` for the full optimizer"
                f" state. Optimizer state sharding is enabled ({sharding.source}) and, with one"
                " data-parallel rank, it"
                " shards nothing (SMP824 reports that), but the setting alone makes the library"
                " return this rank's local state from `state_dict()` without gathering the other"
                " pipeline stages' (library 1.7 to 1.12.1), so the saved state holds one stage's."
                " Remove `shard_optimizer_state`, which gains nothing here, and `state_dict()`"
                f" gathers the stages again; or {_lowered(self._partial_save_advice(name))}"
            ),
            evidence=(f"nothing to shard: {single.source}",),
            severity=Severity.ERROR,
            job_facts=(sharding, pipeline),
        )

    def _partial_save_advice(self, name: Optional[str]) -> str:
        """``smp.save_checkpoint`` arrived in 1.10: a job known to run an older library gets only
        the ``local_state_dict`` way, which works in every release."""
        local = f"`{name}.local_state_dict()` with `smp.save(..., partial=True)`"
        checkpoint = f"`smp.save_checkpoint(path, tag, partial=True, optimizer={name})`"
        applies = self.program.job.version_applies(CHECKPOINT_API_SINCE, None)
        if applies is Tri.OFF:
            return (
                f"Save {local} ({self.version_condition(since=CHECKPOINT_API_SINCE)}, before"
                " `smp.save_checkpoint`)."
            )
        if applies is Tri.UNKNOWN:
            return f"Save it with {checkpoint} (SMP 1.10 and later), or {local}."
        return f"Save it with {checkpoint}, or {local}."

    @staticmethod
    def _partial_fix(partial: cst.Arg) -> PendingFix:
        return PendingFix(
            Applicability.UNSAFE,
            "Save a partial checkpoint (`partial=True`)",
            (ReplaceNode(partial.value, "True"),),
        )
