"""SMP020: an optimizer built from the model's parameters before FSDP wraps the model."""

from __future__ import annotations

import libcst as cst

from smpfix.base.walker import iter_nodes
from smpfix.job.versions import FIRST_V2
from smpfix.rules.rule import FixAvailability, Rule, TensorParallelism
from smpfix.rules.scope import FileScope, Library
from smpfix.rules.smp_v2._script import V2Calls, first_argument
from smpfix.rules.titles import snippet

_PARAMETER_METHODS = frozenset({"parameters", "named_parameters"})


class OptimizerBeforeFsdpWrap(Rule):
    summary = (
        "An optimizer built from the model's parameters before PyTorch FSDP wraps the model: FSDP"
        " replaces the parameters, so the optimizer updates tensors training no longer uses."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.NONE
    library = Library.V2
    scope = FileScope.SMP_V2
    since = FIRST_V2

    def leave_Module(self, node: cst.Module) -> None:
        facts = self.program.facts
        for wrap in self.program.file.answer(V2Calls).fsdp:
            model = first_argument(wrap)
            if not isinstance(model, cst.Name):
                continue
            for call in facts.call_order:
                if (
                    facts.is_optimizer_constructor(call)
                    and self.program.order.runs_before(call, wrap)
                    and self.program.parents.scope_of(call) is self.program.parents.scope_of(wrap)
                    and _takes_parameters_of(call, model.value)
                    and not _rebound_between(self, model.value, call, wrap)
                ):
                    wrapped = snippet(f"{self.program.code_for(wrap.func)}({model.value}, ...)")
                    self.report(
                        call,
                        f"optimizer takes `{model.value}`'s parameters before {wrapped} wraps it",
                        explanation=(
                            "FSDP flattens and shards the parameters in place, so the optimizer"
                            " holds tensors the wrapped model no longer trains, and the weights"
                            " never change (or the step fails on their freed storage). Create the"
                            " optimizer after the wrap, from the wrapped model:"
                            " `optimizer = ...(model.parameters(), ...)` with the FSDP model."
                        ),
                    )


def _takes_parameters_of(call: cst.Call, model: str) -> bool:
    for node in iter_nodes(call):
        if (
            type(node) is cst.Call
            and type(node.func) is cst.Attribute
            and node.func.attr.value in _PARAMETER_METHODS
            and type(node.func.value) is cst.Name
            and node.func.value.value == model
        ):
            return True
    return False


def _rebound_between(rule: Rule, model: str, optimizer: cst.Call, wrap: cst.Call) -> bool:
    """The name the wrap takes is bound again between the optimizer and the wrap (the optimizer
    took another model's parameters)."""
    names = rule.program.names
    at_wrap = names.reaching(model, wrap).assignments
    at_optimizer = names.reaching(model, optimizer).assignments
    return {id(a.value) for a in at_wrap} != {id(a.value) for a in at_optimizer}
