"""SMP117: in SMP 1.3, ``optimizer.step()`` of Adadelta crashes on a pipeline stage without
parameters."""

from __future__ import annotations

import libcst as cst

from smpfix.base.findings import Severity
from smpfix.base.walker import iter_nodes
from smpfix.job.jobfacts import Tri
from smpfix.program.facts import FileFacts
from smpfix.program.objects.wrapped_optimizer import optimizer_wrap, wrapped_optimizer_class
from smpfix.rules.rule import Rule, TensorParallelism
from smpfix.rules.titles import snippet

# The release notes name AdaDelta; PyTorch's fix (pytorch#52944) was to Adadelta's step.
_AFFECTED = frozenset({"torch.optim.Adadelta", "torch.optim.adadelta.Adadelta"})


class OptimizerStepOnEmptyPartition(Rule):
    summary = (
        "SMP 1.3 (PyTorch 1.8): Adadelta's `step()` crashes on a pipeline stage with no parameters;"
        " step only where `model.local_parameters()` is not empty."
    )
    depends_on = ("PP",)
    default_severity = Severity.WARNING
    since = (1, 3)
    until = (1, 3)
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        return bool(facts.distributed_optimizers)

    def leave_Module(self, node: cst.Module) -> None:
        pp = self.feature("PP")
        # A historical bug: without a known 1.3 job it is not worth a word.
        if (
            pp.state is not Tri.ON
            or self.program.job.version_applies(self.since, self.until) is not Tri.ON
        ):
            return
        parents = self.program.parents
        for call in self.program.facts.call_order:
            func = call.func
            if not (type(func) is cst.Attribute and func.attr.value == "step" and not call.args):
                continue
            wrap = optimizer_wrap(self.program.file, func.value, call)
            if wrap is None or wrapped_optimizer_class(self.program.facts, wrap) not in _AFFECTED:
                continue
            if any(_checks_local_parameters(ancestor) for ancestor in parents.ancestors(call)):
                continue
            message = (
                f"`{self.program.code_for(func)}()` steps an Adadelta optimizer; {pp.condition()}"
                f" and {self.version_condition()}. A known issue of SMP 1.3 is that this step"
                " crashes on a pipeline stage that was given no parameters (a PyTorch bug, fixed"
                " later). Guard it as the release notes say: `if"
                " len(list(model.local_parameters())) > 0: optimizer.step()`."
            )
            self.report(
                call,
                f"{snippet(self.program.code_for(func) + '()', 30)} on Adadelta can crash on a"
                " stage without parameters (SMP 1.3)",
                explanation=message,
                severity=Severity.WARNING,
                job_facts=(pp,),
            )


def _checks_local_parameters(node: cst.CSTNode) -> bool:
    """An ``if`` whose test calls ``local_parameters()`` (the documented guard, however written)."""
    if type(node) is not cst.If:
        return False
    return any(
        type(inner) is cst.Call
        and type(inner.func) is cst.Attribute
        and inner.func.attr.value == "local_parameters"
        for inner in iter_nodes(node.test)
    )
