"""SMP109: PyTorch's own ``DistributedDataParallel`` or process group in a script that uses the
library."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.edits import ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.job.jobfacts import Tri
from smpfix.program.facts import FileFacts
from smpfix.program.names import StatementRef
from smpfix.program.objects.wrapped_model import latest_assignment
from smpfix.program.order.execution import ExecutionOrder, Run, happens
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.wiring._conditions import condition_evidence

_DDP = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "apex.parallel.DistributedDataParallel",
    }
)
_INIT_PROCESS_GROUP = frozenset(
    {
        "torch.distributed.init_process_group",
        "torch.distributed.distributed_c10d.init_process_group",
    }
)
_IS_INITIALIZED = frozenset(
    {"torch.distributed.is_initialized", "torch.distributed.distributed_c10d.is_initialized"}
)
_DDP_WHY = (
    'the library runs data parallelism itself inside the `smp.DistributedModel` (with `"ddp":'
    " True`) and does not support PyTorch's wrapper around or inside it: gradients would be reduced"
    " by two mechanisms that know nothing of the model's partitions"
)


class NativeDdpOrProcessGroup(Rule):
    summary = (
        "PyTorch's `DistributedDataParallel` and `init_process_group` clash with the library's own"
        " data parallelism."
    )
    fix_availability = FixAvailability.UNSAFE
    depends_on = ("DDP",)
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        return facts.imports.imports_module("torch")

    def leave_Module(self, node: cst.Module) -> None:
        order: Optional[ExecutionOrder] = None
        for call, where in self._calls(_DDP):
            self._check_ddp(call, where)
        for call, _ in self._calls(_INIT_PROCESS_GROUP):
            if not self.program.facts.smp_init_calls:
                return
            order = order or self.program.order
            self._check_process_group(order, node, call)

    def _calls(self, names: frozenset[str]) -> list[tuple[cst.Call, Optional[StatementRef]]]:
        return [(call, self._where(call)) for call in self.program.facts.calls_of(*names)]

    def _where(self, call: cst.Call) -> Optional[StatementRef]:
        for wrap in self.program.facts.distributed_models:
            if wrap.call is call:
                return wrap.where
        for assignments in self.program.facts.assignments.values():
            for assignment in assignments:
                if assignment.value is call:
                    return assignment.where
        return None

    # -- DistributedDataParallel ------------------------------------------------------------
    def _check_ddp(self, call: cst.Call, where: Optional[StatementRef]) -> None:
        wrapped = argument(call, "module", 0)
        if wrapped is not None and self._is_distributed_model(wrapped.value, call, where):
            message = (
                f"`{self._name(call)}` wraps the `smp.DistributedModel`: {_DDP_WHY}. Remove the"
                ' wrapper and set `"ddp": True` in the modelparallel parameters.'
            )
            self.report(
                call,
                f"`{self._name(call)}` wraps the `smp.DistributedModel`",
                explanation=message,
                evidence=condition_evidence(self.program, call),
                fix=self._unwrap(call, wrapped.value),
            )
            return
        if self._reaches_distributed_model(call, where):
            message = (
                f"The module wrapped in `{self._name(call)}` is then given to"
                f" `smp.DistributedModel`: {_DDP_WHY}. Give `smp.DistributedModel` the plain module"
                ' and set `"ddp": True` in the modelparallel parameters.'
            )
            fix = self._unwrap(call, wrapped.value) if wrapped is not None else None
            self.report(
                call,
                f"the module wrapped in `{self._name(call)}` is given to `smp.DistributedModel`",
                explanation=message,
                evidence=condition_evidence(self.program, call),
                fix=fix,
            )

    def _name(self, call: cst.Call) -> str:
        qualified = self.program.facts.qualified_name(call.func) or "DistributedDataParallel"
        return (
            "apex DistributedDataParallel"
            if qualified.startswith("apex.")
            else "DistributedDataParallel"
        )

    def _is_distributed_model(
        self, expr: cst.BaseExpression, call: cst.Call, where: Optional[StatementRef]
    ) -> bool:
        if self.program.facts.is_smp_call(expr, "DistributedModel"):
            return True
        if type(expr) is not cst.Name or where is None:
            return False
        assignment = latest_assignment(self.program.facts, expr)
        return assignment is not None and self.program.facts.is_smp_call(
            assignment.value, "DistributedModel"
        )

    def _reaches_distributed_model(self, call: cst.Call, where: Optional[StatementRef]) -> bool:
        for wrap in self.program.facts.distributed_models:
            if wrap.argument is call:
                return True
            if (
                where is None
                or wrap.where is None
                or wrap.where.scope is not where.scope
                or type(wrap.argument) is not cst.Name
            ):
                continue
            if not self.program.order.runs_before(call, wrap.call):
                continue
            assignment = latest_assignment(self.program.facts, wrap.argument)
            if assignment is not None and assignment.value is call:
                return True
        return False

    def _unwrap(self, call: cst.Call, inner: cst.BaseExpression) -> PendingFix:
        return PendingFix(
            Applicability.UNSAFE,
            'Remove the DistributedDataParallel wrapper (set `"ddp": True` in the modelparallel'
            " parameters)",
            (ReplaceNode(call, self.program.code_for(inner)),),
        )

    # -- init_process_group -----------------------------------------------------------------
    def _check_process_group(
        self, order: ExecutionOrder, module: cst.Module, call: cst.Call
    ) -> None:
        smp_init = happens(module, lambda other: self.program.facts.is_smp_call(other, "init"))
        for run in order.runs_of(call):
            inits_before = order.before(run, smp_init)
            if not inits_before and not order.after(run, smp_init):
                continue
            guarded = self._guarded(run)
            ddp = self.feature("DDP")
            if guarded and inits_before and ddp.state is not Tri.OFF:
                return
            explicit = all(argument(call, key) is not None for key in ("rank", "world_size"))
            if ddp.state is Tri.ON:
                message = (
                    "`torch.distributed.init_process_group` and `smp.init()` both run, and"
                    f" {ddp.condition()}: `smp.init()` then creates the default process group"
                    ' itself, and the second initialisation raises RuntimeError ("trying to'
                    ' initialize the default process group twice"). Remove this call; use'
                    " `smp.get_dp_process_group()` and the other library groups for your own"
                    " collectives."
                )
                self.report(
                    call,
                    "`init_process_group` beside `smp.init()` with ddp on: initialised twice",
                    explanation=message,
                    job_facts=(ddp,),
                )
            elif not explicit:
                why = (
                    "SageMaker's MPI launcher sets no `RANK`, `WORLD_SIZE` or `MASTER_ADDR`, so the"
                    " default `env://` initialisation fails"
                )
                if ddp.state is Tri.OFF:
                    lead = (
                        "`torch.distributed.init_process_group` runs in a script that uses the"
                        f" library ({ddp.condition()}): {why}."
                    )
                else:
                    lead = (
                        "`torch.distributed.init_process_group` runs beside `smp.init()`:"
                        f" {ddp.condition()}, `smp.init()` creates the default process group and"
                        f" this second one raises RuntimeError; if not, {why}."
                    )
                message = (
                    f'{lead} Set `"ddp": True` and use the library\'s process groups'
                    " (`smp.get_dp_process_group()`)."
                )
                title = (
                    "`init_process_group` under SageMaker's MPI launch: `env://` settings are unset"
                    if ddp.state is Tri.OFF
                    else "`init_process_group` beside `smp.init()`: fails with or without ddp"
                )
                self.report(
                    call,
                    title,
                    explanation=message,
                    severity=Severity.WARNING,
                    job_facts=(ddp,),
                )
            return

    def _guarded(self, run: Run) -> bool:
        """Inside ``if not torch.distributed.is_initialized():``."""
        for side in run.sides:
            branch = side.branch
            if type(branch) is not cst.If:
                continue
            test = branch.test
            negated = type(test) is cst.UnaryOperation and type(test.operator) is cst.Not
            inner = test.expression if type(test) is cst.UnaryOperation else test
            if (
                type(inner) is cst.Call
                and (self.program.facts.qualified_name(inner.func) or "") in _IS_INITIALIZED
            ):
                if (side.arm == 0) == negated:
                    return True
        return False
