"""SMP103: an optimizer of the distributed model that never reaches ``smp.DistributedOptimizer``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.call_binding import bind_arguments
from smpfix.base.calls import argument, names_in
from smpfix.base.edits import InsertStatementAfter, NodeEdit
from smpfix.base.findings import Applicability, Severity
from smpfix.base.imports import dotted_name
from smpfix.base.walker import Ancestry, iter_nodes
from smpfix.fixes.references import smp_reference
from smpfix.job.jobfacts import FeatureState, Tri
from smpfix.program.facts import FileFacts
from smpfix.program.model import Program
from smpfix.program.names import StatementRef
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet

_PARAMETER_METHODS = frozenset(
    {"parameters", "named_parameters", "local_parameters", "local_named_parameters"}
)
# Functions from these libraries never wrap an optimizer in `smp.DistributedOptimizer`; a
# function imported from anywhere else (the user's own package) might, so passing the
# optimizer there leaves smpfix unable to tell.
_KNOWN_LIBRARIES = (
    "torch.",
    "transformers.",
    "smdistributed.",
    "apex.",
    "numpy.",
    "math.",
    "os.",
    "time.",
    "logging.",
    "json.",
)
_SEVERITY_FEATURES = ("FP16", "BF16", "SDP", "OSS")
_WHY = {
    "FP16": (
        "the fp16 loss scaling and fp32 master weights live in that wrapper, so the loss is not"
        " scaled and updates go wrong"
    ),
    "BF16": (
        "the bf16 master weights live in that wrapper, so updates are applied to low-precision"
        " weights"
    ),
    "SDP": "the sharded optimizer lives in that wrapper, and `model.backward` fails without it",
    "OSS": "optimizer state sharding happens in that wrapper, and the first step fails without it",
}


@dataclass(frozen=True)
class _Optimizer:
    """An optimizer construction that is not itself an argument of ``smp.DistributedOptimizer``."""

    call: cst.Call
    target: Optional[str]
    line: Optional[cst.SimpleStatementLine]
    function: Optional[cst.FunctionDef]
    returned: bool


@dataclass(frozen=True)
class _Holders:
    """What carries the optimizer onwards: the names it is bound to, or the construction itself."""

    names: frozenset[str]
    call: cst.Call

    def holds(self, expr: cst.BaseExpression) -> bool:
        return expr is self.call or dotted_name(expr) in self.names


def _root_name(expr: cst.BaseExpression) -> Optional[str]:
    while isinstance(expr, (cst.Attribute, cst.Call, cst.Subscript)):
        expr = expr.func if isinstance(expr, cst.Call) else expr.value
    return expr.value if type(expr) is cst.Name else None


def _parameter_names(function: cst.FunctionDef) -> list[str]:
    params = function.params
    return [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]


class MissingDistributedOptimizer(Rule):
    summary = (
        "The optimizer of the `smp.DistributedModel` must be wrapped with"
        " `smp.DistributedOptimizer`."
    )
    fix_availability = FixAvailability.UNSAFE
    depends_on = _SEVERITY_FEATURES
    satisfied_by_hf_trainer = True
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        # Only files that wrap a model have its optimizer.
        return bool(facts.distributed_models)

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self._optimizers: list[_Optimizer] = []
        self._checkpointed: set[str] = set()
        self._calls: dict[str, list[cst.Call]] = {}
        self._foreign_calls: list[cst.Call] = []

    # -- collecting --------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        if type(node.func) is cst.Name:
            self._calls.setdefault(node.func.value, []).append(node)
        qualified = self.program.facts.qualified_name(node.func)
        if qualified is not None and not qualified.startswith(_KNOWN_LIBRARIES):
            self._foreign_calls.append(node)
        member = (
            self.program.facts.smp_member(node.func)
            if qualified is not None and qualified.startswith("smdistributed.")
            else None
        )
        if member == "save_checkpoint":
            found = argument(node, "optimizer", 4)
            name = dotted_name(found.value) if found is not None else None
            if name is not None:
                self._checkpointed.add(name)
        if (
            (qualified is not None or type(node.func) is cst.Name)
            and self.program.facts.is_optimizer_constructor(node)
            and not self._inside_wrapper()
        ):
            self._optimizers.append(self._describe(node))

    def _inside_wrapper(self) -> bool:
        return any(
            self.program.facts.is_smp_call(node, "DistributedOptimizer")
            for node in self.ancestry.stack[:-1]
        )

    def _describe(self, node: cst.Call) -> _Optimizer:
        parent = self.ancestry.parent(1)
        target = None
        if type(parent) is cst.Assign and parent.value is node and len(parent.targets) == 1:
            target = dotted_name(parent.targets[0].target)
        line = self.ancestry.nearest(cst.SimpleStatementLine)
        function = self.ancestry.nearest(cst.FunctionDef)
        return _Optimizer(
            node,
            target,
            line if type(line) is cst.SimpleStatementLine else None,
            function if type(function) is cst.FunctionDef else None,
            type(parent) is cst.Return,
        )

    # -- deciding ----------------------------------------------------------------------------
    def leave_Module(self, node: cst.Module) -> None:
        if not self.program.facts.distributed_models:
            return
        for optimizer in self._optimizers:
            if self._takes_model_parameters(optimizer) and not self._may_be_wrapped(optimizer):
                self._flag(optimizer)

    def _model_names(self) -> set[str]:
        names = {w.target for w in self.program.facts.distributed_models if w.target}
        names |= {w.argument_name for w in self.program.facts.distributed_models if w.argument_name}
        return names

    def _takes_model_parameters(self, optimizer: _Optimizer) -> bool:
        """Auxiliary models (a discriminator never wrapped) keep their own, plain optimizers."""
        models = self._model_names()
        sources = self._parameter_sources(optimizer)
        if any(self._mentions_parameters(source, models) for source in sources):
            return True
        return optimizer.function is not None and self._called_with_model(
            optimizer.function, sources, models
        )

    def _parameter_sources(self, optimizer: _Optimizer) -> list[cst.BaseExpression]:
        """The optimizer's arguments, and the values of same-function variables they read."""
        sources = [arg.value for arg in optimizer.call.args]
        scope = optimizer.function
        for name in set().union(*(names_in(source) for source in sources)) if sources else set():
            for assignment in self.program.facts.assignments.get(name, ()):
                where = assignment.where
                if where is not None and (
                    where.scope is scope or (scope is None and type(where.scope) is cst.Module)
                ):
                    sources.append(assignment.value)
        return sources

    @staticmethod
    def _mentions_parameters(expr: cst.CSTNode, models: set[str]) -> bool:
        for node in iter_nodes(expr):
            if type(node) is not cst.Call:
                continue
            func = node.func
            if (
                type(func) is cst.Attribute
                and func.attr.value in _PARAMETER_METHODS
                and _root_name(func.value) in models
            ):
                return True
            if any(type(a.value) is cst.Name and a.value.value in models for a in node.args):
                return True
        return False

    def _called_with_model(
        self, function: cst.FunctionDef, sources: list[cst.BaseExpression], models: set[str]
    ) -> bool:
        """A factory ``def make(model): return Adam(model.parameters())`` called with the wrapped
        model."""
        used = {
            p
            for p in _parameter_names(function)
            if any(self._mentions_parameters(source, {p}) for source in sources)
        }
        for call in self._calls.get(function.name.value, ()):
            bound = bind_arguments(function, call)
            if bound and any(_root_name(bound[p]) in models for p in used if p in bound):
                return True
        return False

    def _holders(self, optimizer: _Optimizer) -> tuple[set[str], list[cst.Call]]:
        """Names the optimizer is held under, and calls of the factory that returns it."""
        names = {optimizer.target} if optimizer.target else set()
        factory_calls: list[cst.Call] = []
        function = optimizer.function
        if function is not None and (
            optimizer.returned or self._returns_name(function, optimizer.target)
        ):
            factory_calls = list(self._calls.get(function.name.value, ()))
            for assignments in self.program.facts.assignments.values():
                for assignment in assignments:
                    if any(assignment.value is call for call in factory_calls):
                        names.add(assignment.target)
        return names, factory_calls

    @staticmethod
    def _returns_name(function: cst.FunctionDef, name: Optional[str]) -> bool:
        if name is None:
            return False
        return any(
            type(n) is cst.Return and n.value is not None and dotted_name(n.value) == name
            for n in iter_nodes(function.body)
        )

    def _may_be_wrapped(self, optimizer: _Optimizer) -> bool:
        names, factory_calls = self._holders(optimizer)
        wrapped_args = [
            w.argument for w in self.program.facts.distributed_optimizers if w.argument is not None
        ]
        if any(arg is call for arg in wrapped_args for call in factory_calls):
            return True
        if any(dotted_name(arg) in names for arg in wrapped_args):
            return True
        held = _Holders(frozenset(names), optimizer.call)
        if any(held.holds(arg.value) for call in self._foreign_calls for arg in call.args):
            return True
        return self._passed_to_wrapper_function(held)

    def _passed_to_wrapper_function(self, held: _Holders) -> bool:
        """``def wrap(opt): return smp.DistributedOptimizer(opt)`` called as ``wrap(optimizer)``."""
        for wrap in self.program.facts.distributed_optimizers:
            scope = wrap.where.scope if wrap.where is not None else None
            if type(scope) is not cst.FunctionDef or wrap.argument_name not in _parameter_names(
                scope
            ):
                continue
            for call in self._calls.get(scope.name.value, ()):
                bound = bind_arguments(scope, call)
                if (
                    bound is not None
                    and wrap.argument_name in bound
                    and held.holds(bound[wrap.argument_name])
                ):
                    return True
        return False

    # -- reporting ---------------------------------------------------------------------------
    def _flag(self, optimizer: _Optimizer) -> None:
        states = [self.feature(key) for key in _SEVERITY_FEATURES]
        enabled = [state for state in states if state.state is Tri.ON]
        names, _ = self._holders(optimizer)
        checkpointed = sorted(names & self._checkpointed)
        shown = (
            f"`{optimizer.target}`"
            if optimizer.target
            else snippet(f"{self.program.code_for(optimizer.call.func)}(...)", 24)
        )
        lead = (
            f"The optimizer {shown} of the `smp.DistributedModel` is never wrapped with"
            " `smp.DistributedOptimizer`"
        )
        title = f"`smp.DistributedOptimizer` never wraps {shown}"
        reasons = [f"{state.condition()}: {_WHY[state.feature.key]}" for state in enabled]
        if checkpointed:
            reasons.append(
                f"`smp.save_checkpoint(..., optimizer={checkpointed[0]})` rejects an optimizer that"
                " is not a `smp.DistributedOptimizer` (SMPValidationError)"
            )
        if reasons:
            title += (
                f" under {enabled[0].feature.title}"
                if enabled
                else ": `smp.save_checkpoint` rejects it"
            )
            explanation = f"{lead}, and " + "; ".join(reasons) + "."
            severity = Severity.ERROR
            job_facts: list[FeatureState] = enabled
        else:
            title += ": fp16 and sharding need it"
            explanation = (
                f"{lead}: saving and loading its state with `smp.save_checkpoint`, fp16 and bf16"
                " training, sharded data parallelism and optimizer state sharding all work through"
                " that wrapper, and without it they fail or silently train wrong."
            )
            severity = Severity.WARNING
            job_facts = [state for state in states if state.state is Tri.UNKNOWN]
        held = optimizer.target or (sorted(names)[0] if names else "optimizer")
        reference = smp_reference(self.program.file, "DistributedOptimizer")
        wrapper = reference.text if reference is not None else "smp.DistributedOptimizer"
        explanation += f" Wrap it once the model is wrapped: `{held} = {wrapper}({held})`."
        self.report(
            optimizer.call,
            title,
            explanation=explanation,
            severity=severity,
            fix=self._fix(optimizer),
            job_facts=job_facts,
        )

    def _fix(self, optimizer: _Optimizer) -> Optional[PendingFix]:
        """Insert the wrap after the later of the optimizer and ``DistributedModel`` statements
        (same block)."""
        if optimizer.target is None or optimizer.line is None:
            return None
        ref = self.program.facts.statement_of(optimizer.line)
        if ref is None or not isinstance(ref.block, (cst.Module, cst.IndentedBlock)):
            return None
        wraps = [
            w.where
            for w in self.program.facts.distributed_models
            if w.where is not None and w.where.block is ref.block
        ]
        if not wraps:
            return None
        anchor: StatementRef = max([ref, wraps[0]], key=lambda r: r.index)
        module = self.program.module
        reference = smp_reference(self.program.file, "DistributedOptimizer")
        if reference is None:
            return None
        statement = cst.parse_statement(
            f"{optimizer.target} = {reference.text}({optimizer.target})\n",
            config=module.config_for_parsing,
        )
        assert type(statement) is cst.SimpleStatementLine
        edits: tuple[NodeEdit, ...] = (
            *reference.edits,
            InsertStatementAfter(anchor.statement, statement, module),
        )
        return PendingFix(
            Applicability.UNSAFE, f"Wrap `{optimizer.target}` with `{reference.text}`", edits
        )
