"""SMP101: an optimizer built from the model's parameters before ``smp.DistributedModel``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import libcst as cst

from smpfix.base.calls import bound_names, names_in
from smpfix.base.edits import DeleteStatementLines, InsertStatementAfter
from smpfix.base.findings import Applicability, Severity
from smpfix.base.walker import iter_nodes
from smpfix.job.jobfacts import Tri
from smpfix.program.facts import Wrap
from smpfix.program.names import Assignment, StatementRef
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism

_PARAMETER_METHODS = frozenset({"parameters", "named_parameters"})


class _RenameVariable(cst.CSTTransformer):
    """Rename a variable (not attributes or keywords of the same spelling)."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__()
        self.old, self.new = old, new

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.new) if updated.value == self.old else updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


class OptimizerBeforeDistributedModel(Rule):
    summary = (
        "An optimizer built from the model's parameters before `smp.DistributedModel` wraps it"
        " holds stale parameters under tensor parallelism."
    )
    fix_availability = FixAvailability.SOMETIMES_SAFE
    depends_on = ("TP",)
    satisfied_by_hf_trainer = True
    tensor_parallelism = TensorParallelism.MARKING

    def leave_Module(self, node: cst.Module) -> None:
        for wrap in self.program.facts.distributed_models:
            model = wrap.argument_name
            if model is None or wrap.where is None:
                continue
            for assignment in self._optimizers_before(wrap, model):
                self._flag(wrap, model, assignment)

    def _optimizers_before(self, wrap: Wrap, model: str) -> list[Assignment]:
        found = []
        for assignments in self.program.facts.assignments.values():
            for assignment in assignments:
                value = assignment.value
                where = assignment.where
                if where is None or not self.program.facts.is_optimizer_constructor(value):
                    continue
                assert type(value) is cst.Call
                if (
                    wrap.where is None
                    or where.scope is not wrap.where.scope
                    or not self.program.order.runs_before(value, wrap.call)
                ):
                    continue
                if self._derives_from(value, model, where):
                    found.append(assignment)
        return found

    def _derives_from(self, call: cst.Call, model: str, where: StatementRef) -> bool:
        """Does the optimizer take ``model``'s parameters (directly, via a helper, or a
        variable)?"""
        return self._directly_from(call, model) or bool(self._via_variables(call, model, where))

    def _directly_from(self, call: cst.Call, model: str) -> bool:
        return any(self._mentions_parameters_of(arg.value, model) for arg in call.args)

    def _via_variables(self, call: cst.Call, model: str, where: StatementRef) -> list[str]:
        """Names in the call whose value there is built from ``model`` (``param_groups = ...``)."""
        found = []
        for arg in call.args:
            for node in iter_nodes(arg.value):
                if type(node) is not cst.Name or node.value == model or node.value in found:
                    continue
                if any(
                    self._mentions_parameters_of(a.value, model)
                    for a in self.program.names.reaching(node.value, node).assignments
                ):
                    found.append(node.value)
        return found

    @staticmethod
    def _mentions_parameters_of(expr: cst.CSTNode, model: str) -> bool:
        for node in iter_nodes(expr):
            if type(node) is cst.Call:
                func = node.func
                if type(func) is cst.Attribute and func.attr.value in _PARAMETER_METHODS:
                    root = func.value
                    while type(root) is cst.Attribute:
                        root = root.value
                    if type(root) is cst.Name and root.value == model:
                        return True
                if any(type(a.value) is cst.Name and a.value.value == model for a in node.args):
                    return True
        return False

    def _fix(self, wrap: Wrap, model: str, optimizer: Assignment) -> Optional[PendingFix]:
        """Move the optimizer statement to just after the wrap; safe under the page's
        conditions."""
        opt_ref, wrap_ref = optimizer.where, wrap.where
        assert opt_ref is not None and wrap_ref is not None
        statement = opt_ref.statement
        if opt_ref.block is not wrap_ref.block or type(opt_ref.block) is cst.SimpleStatementSuite:
            return None
        if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
            return None
        if wrap.target is None:
            return None
        assert type(optimizer.value) is cst.Call
        if self._via_variables(optimizer.value, model, opt_ref):
            # Parameter groups computed before the wrap stay stale; moving one line is not a fix.
            return None
        between: Sequence[cst.CSTNode] = opt_ref.block.body[opt_ref.index + 1 : wrap_ref.index]  # type: ignore[union-attr]
        if any(optimizer.target in names_in(s) for s in [*between, wrap_ref.statement]):
            # Code between uses the optimizer (a scheduler, a wrapper): moving it would break that.
            return None
        inputs = names_in(optimizer.value) - {model}
        redefined = set().union(*(bound_names(s) for s in between)) if between else set()
        safe = not (inputs & redefined)
        moved = statement
        if wrap.target != model:
            moved = statement.visit(_RenameVariable(model, wrap.target))  # type: ignore[assignment]
        applicability = Applicability.SAFE if safe else Applicability.UNSAFE
        rename = "" if wrap.target == model else f", taking `{wrap.target}.parameters()`"
        return PendingFix(
            applicability,
            f"Create `{optimizer.target}` after the `smp.DistributedModel` call{rename}",
            (
                DeleteStatementLines(statement),
                InsertStatementAfter(wrap_ref.statement, moved, self.program.module),
            ),
        )

    def _flag(self, wrap: Wrap, model: str, optimizer: Assignment) -> None:
        replaced = self.program.tp_replacement
        tp = self.feature("TP", at=optimizer.value)
        if replaced.state is Tri.OFF or (replaced.state is not Tri.ON and tp.state is Tri.OFF):
            # Nothing is replaced: the optimizer's parameters are the model's (the non-TP
            # examples in the docs build the optimizer first on purpose).
            return
        why = (
            "`smp.DistributedModel` replaces the marked modules with tensor-parallel ones, so this"
            " optimizer would hold parameters that are no longer in the model"
            " (smp.DistributedOptimizer raises, or they never train)"
        )
        lead = f"optimizer `{optimizer.target}` built before `smp.DistributedModel`"
        if replaced.state is Tri.ON:
            # The degree, when it is what turned the marking on, is the fact a reader checks.
            deciding = tp if tp.state is Tri.ON else replaced.feature_state()
            severity, title, body, facts = (
                Severity.ERROR,
                f"{lead} holds parameters TP replaces",
                f", and {replaced.condition()}: {why}.",
                (deciding,),
            )
        elif tp.state is Tri.ON:
            severity, title, body, facts = (
                Severity.WARNING,
                f"{lead}: stale if modules are replaced for TP",
                f"; {tp.condition()} and {replaced.condition()}, {why}.",
                (tp,),
            )
        else:
            severity, title, body, facts = (
                Severity.WARNING,
                f"{lead}: stale if tensor parallelism is on",
                f"; {tp.condition()} and the program marks modules for it, {why}.",
                (tp,),
            )
        explanation = (
            f"The optimizer is built from `{model}`'s parameters before"
            f" `smp.DistributedModel({model})`{body} Create the optimizer after the wrap,"
            " from the wrapped model's parameters."
        )
        self.report(
            optimizer.value,
            title,
            explanation=explanation,
            severity=severity,
            fix=self._fix(wrap, model, optimizer),
            job_facts=facts,
        )
