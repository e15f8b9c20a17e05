"""SMP111: more than one ``smp.DistributedModel`` in one process."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.findings import Severity
from smpfix.program.facts import FileFacts
from smpfix.program.order.execution import ExecutionOrder, Run, happens
from smpfix.rules.rule import Rule, TensorParallelism

_ERROR_SHOWN_AS = (
    "raises MultipleDistributedModelError (which in 1.12 surfaces as the puzzling "
    "`TypeError: __str__ returned non-string`)"
)
_INSTEAD = (
    "Wrap a single `nn.Module` that holds every network you train (a GAN's generator and"
    " discriminator, a teacher and a student) and call `smp.DistributedModel` once."
)


class MultipleDistributedModels(Rule):
    summary = (
        "Only one `smp.DistributedModel` may be created per process; a second one raises"
        " MultipleDistributedModelError."
    )
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        return bool(facts.distributed_models)

    def leave_Module(self, node: cst.Module) -> None:
        order = self.program.order
        wraps = [
            run
            for wrap in self.program.facts.distributed_models
            for run in order.runs_of(wrap.call)
        ]
        wraps.sort(key=lambda run: run.order)
        reported: set[int] = set()
        for run in wraps:
            if id(run.call) in reported:
                continue
            earlier = [
                other
                for other in wraps
                if other.order < run.order and not other.exclusive_with(run)
            ]
            if run.repeated:
                self._flag(order, node, run, None)
            elif earlier:
                self._flag(order, node, run, earlier[0])
            else:
                continue
            reported.add(id(run.call))

    def _flag(
        self, order: ExecutionOrder, module: cst.Module, run: Run, first: Optional[Run]
    ) -> None:
        if first is None:
            title = "`smp.DistributedModel` runs in a loop"
            what = (
                "This `smp.DistributedModel` call runs in a loop, so its second pass creates a"
                " second distributed model"
            )
        elif first.call is run.call:
            title = "`smp.DistributedModel` runs twice in one process"
            what = (
                "This `smp.DistributedModel` call runs twice in one process (its function is called"
                " again)"
            )
        else:
            shown = " ".join(self.program.code_for(first.call).split())
            shown = shown if len(shown) <= 50 else shown[:47] + "..."
            what = f"A second `smp.DistributedModel` runs after `{shown}`"
            title = "a second `smp.DistributedModel` in one process"
        message = (
            f"{what}: the library keeps one model per process (the pipeline schedule, partitioning"
            f" and gradient reduction all belong to it), and the second wrap {_ERROR_SHOWN_AS}."
            f" {_INSTEAD}"
        )
        severity = Severity.ERROR
        reset = happens(module, lambda call: self.program.facts.is_smp_call(call, "reset"))
        if first is not None and any(
            other.order > first.order for other in order.before(run, reset)
        ):
            severity = Severity.HINT
            title += " (after the undocumented `smp.reset()`)"
            message += (
                " `smp.reset()` runs in between, which clears the model, but it is not a documented"
                " API and its behaviour may change: check this on a small job first."
            )
        if severity is Severity.ERROR:
            title += ": MultipleDistributedModelError"
        self.report(run.call, title, explanation=message, severity=severity)
