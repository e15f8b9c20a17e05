"""SMP115: device placement and start-up chores the library does (or wants done) differently."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.edits import DeleteStatementLines
from smpfix.base.findings import Applicability, Severity
from smpfix.program.objects.wrapped_model import latest_assignment
from smpfix.program.order.execution import ExecutionOrder, Run
from smpfix.program.order.initialisation import Initialisations
from smpfix.program.ranks.guards import early_exit_guard, rank_zero_guards
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet

_DATASET_MODULES = ("torchvision.datasets.", "torchtext.datasets.")
_DTYPES = frozenset({"float16", "half", "bfloat16", "float32", "float", "float64", "double"})
# Ranks of which exactly one process per host (or per job) is 0.
_ONE_PER_HOST = frozenset({"local_rank", "rank"})


class ManualDevicePlacement(Rule):
    summary = (
        "Moving the `smp.DistributedModel` before the first step is ignored; CUDA and dataset"
        " downloads before set-up misbehave."
    )
    fix_availability = FixAvailability.SOMETIMES_SAFE
    default_severity = Severity.HINT
    tensor_parallelism = TensorParallelism.NONE

    def leave_Module(self, node: cst.Module) -> None:
        order: Optional[ExecutionOrder] = None
        for call in self.program.facts.call_order:
            qualified = self.program.facts.qualified_name(call.func) or ""
            if qualified.startswith(_DATASET_MODULES):
                self._download(node, call)
            elif qualified == "torch.cuda.synchronize":
                order = order or self.program.order
                self._synchronize(node, order, call)
            elif type(call.func) is cst.Attribute and call.func.attr.value in ("to", "cuda"):
                self._move(node, call)
            elif self.program.facts.is_smp_call(call, "DistributedModel"):
                self._tracing(call)

    # -- model.to(device) -------------------------------------------------------------------
    def _move(self, module: cst.Module, call: cst.Call) -> None:
        assert type(call.func) is cst.Attribute
        receiver = call.func.value
        if not self._holds_distributed_model(receiver, call) or not self._moves_to_device(call):
            return
        order = self.program.order
        runs = order.runs_of(call)
        steps = self.program.facts.step_functions
        is_step = lambda run: type(run.call.func) is cst.Name and run.call.func.value in steps  # noqa: E731
        if not runs or any(order.before(run, is_step) for run in runs):
            return
        shown = self.program.code_for(call)
        message = (
            f"`{shown}` runs before the first step, so smdistributed.modelparallel ignores it and"
            ' logs "Model has not been partitioned yet, ignoring move of params and buffers to'
            ' devices". It breaks nothing: the model is partitioned at the first call of an'
            " `smp.step` function, and the library then moves each partition to its own GPU"
            " (`smp.local_rank()`). The call can go (moving inputs with `.to(device)` is still"
            " needed)."
        )
        self.report(
            call,
            f"{snippet(shown, 40)} before the first step is ignored (harmless, can go)",
            explanation=message,
            severity=Severity.HINT,
            fix=self._delete(call),
        )

    def _holds_distributed_model(self, receiver: cst.BaseExpression, call: cst.Call) -> bool:
        if self.program.facts.is_smp_call(receiver, "DistributedModel"):
            return True
        if (
            type(receiver) is not cst.Name
            or receiver.value not in self.program.facts.distributed_model_names()
        ):
            return False
        assignment = latest_assignment(self.program.facts, receiver)
        return assignment is not None and self.program.facts.is_smp_call(
            assignment.value, "DistributedModel"
        )

    def _moves_to_device(self, call: cst.Call) -> bool:
        """``.cuda(...)``, or ``.to(...)`` with a device that is not a string (a string device is
        not recognised by the library's patched ``to`` and does move the model)."""
        assert type(call.func) is cst.Attribute
        if call.func.attr.value == "cuda":
            return True
        if argument(call, "device") is not None:
            return True
        if not call.args or call.args[0].keyword is not None:
            return False
        first = call.args[0].value
        if isinstance(first, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
            return False
        qualified = self.program.facts.qualified_name(first) or ""
        return not (qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in _DTYPES)

    def _is_torch_device(self, expr: cst.BaseExpression) -> bool:
        if type(expr) is cst.Name:
            assignment = self.program.facts.names.assignment(expr.value, expr)
            expr = assignment.value if assignment is not None else expr
        return (
            type(expr) is cst.Call
            and self.program.facts.qualified_name(expr.func) == "torch.device"
        )

    def _delete(self, call: cst.Call) -> Optional[PendingFix]:
        """Delete ``model.to(device)`` / ``model = model.to(device)``: safe when the device is a
        ``torch.device`` (the library ignores exactly that), unsafe otherwise."""
        assert type(call.func) is cst.Attribute
        statement = self._statement_of(call)
        if statement is None or len(statement.body) != 1:
            return None
        small = statement.body[0]
        receiver = call.func.value
        bare = type(small) is cst.Expr and small.value is call
        rebinds_itself = (
            type(small) is cst.Assign
            and small.value is call
            and len(small.targets) == 1
            and type(receiver) is cst.Name
            and type(small.targets[0].target) is cst.Name
            and small.targets[0].target.value == receiver.value
        )
        if not (bare or rebinds_itself):
            return None
        device = argument(call, "device", 0)
        safe = (
            call.func.attr.value == "to"
            and device is not None
            and self._is_torch_device(device.value)
        )
        return PendingFix(
            Applicability.SAFE if safe else Applicability.UNSAFE,
            "Remove the move of the distributed model",
            (DeleteStatementLines(statement),),
        )

    def _statement_of(self, node: cst.CSTNode) -> Optional[cst.SimpleStatementLine]:
        parents = self.program.parents
        for ancestor in parents.ancestors(node):
            if type(ancestor) is cst.SimpleStatementLine:
                return ancestor
            if isinstance(ancestor, cst.BaseCompoundStatement):
                return None
        return None

    # -- torch.cuda.synchronize() before smp.init() -----------------------------------------
    def _synchronize(self, module: cst.Module, order: ExecutionOrder, call: cst.Call) -> None:
        inits = Initialisations(self.program.file, self.program.modules)
        facts = self.program.facts

        def set_device(run: Run) -> bool:
            return facts.qualified_name(run.call.func) == "torch.cuda.set_device"

        for run in order.runs_of(call):
            if (
                order.before(run, inits.any)
                or order.before(run, set_device)
                or not order.after(run, inits.explicit)
            ):
                continue
            message = (
                "`torch.cuda.synchronize()` runs before `smp.init()` and before any"
                " `torch.cuda.set_device(...)`: it creates a CUDA context on GPU 0 in every process"
                " of the host, which takes memory on that GPU for the whole job. Call it after"
                " `smp.init()` (which selects `smp.local_rank()`'s GPU), or set the device first."
            )
            self.report(
                call,
                "`torch.cuda.synchronize()` before `smp.init()` opens a context on GPU 0",
                explanation=message,
                severity=Severity.HINT,
            )
            return

    # -- datasets downloaded by every process ------------------------------------------------
    def _download(self, module: cst.Module, call: cst.Call) -> None:
        download = argument(call, "download")
        if download is None or self.program.facts.literal(download.value) is not True:
            return
        if self._one_process_per_host(module, call):
            return
        name = self.program.code_for(call.func)
        message = (
            f"`{name}(..., download=True)` runs on every process: the processes of a host download"
            " into the same folder at once and can leave corrupt files. Download on one process"
            " per host, `if smp.local_rank() == 0:`, then `smp.barrier()`, then build the dataset"
            " with `download=False`."
        )
        self.report(
            call,
            f"{snippet(name, 40)} downloads on every process of a host at once",
            explanation=message,
            severity=Severity.HINT,
        )

    def _one_process_per_host(self, module: cst.Module, call: cst.Call) -> bool:
        parents = self.program.parents
        child: cst.CSTNode = call
        for ancestor in parents.ancestors(call):
            if type(ancestor) is cst.If and child is ancestor.body:
                if any(
                    guard.function in _ONE_PER_HOST
                    for guard in rank_zero_guards(
                        ancestor.test, self.program.facts, self.program.modules
                    )
                ):
                    return True
            if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
                for statement in (
                    ancestor.body[: ancestor.body.index(child)] if child in ancestor.body else ()
                ):
                    if any(
                        guard.function in _ONE_PER_HOST
                        for guard in early_exit_guard(statement, self.program.facts)
                    ):
                        return True
            child = ancestor
        return False

    # -- tracing options the library warns about --------------------------------------------
    def _tracing(self, call: cst.Call) -> None:
        device = argument(call, "trace_device")
        times = argument(call, "trace_execution_times")
        if device is None or times is None:
            return
        if (
            self.program.facts.literal(device.value) == "cpu"
            and self.program.facts.literal(times.value) is True
        ):
            message = (
                '`trace_device="cpu"` with `trace_execution_times=True`: execution times measured'
                " on the CPU say nothing about the GPU partitions, and the library warns that this"
                ' combination is not supported. Trace on the GPU (`trace_device="gpu"`) or drop'
                " `trace_execution_times`."
            )
            self.report(
                call,
                '`trace_device="cpu"` with `trace_execution_times=True` times the wrong device',
                explanation=message,
                severity=Severity.HINT,
            )
