"""SMP404: optimizer steps, gradient clipping and allreduce inside a step function."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.call_binding import bind_arguments
from smpfix.base.calls import bound_names, names_in
from smpfix.base.edits import (
    DeleteStatementLines,
    InsertStatementAfter,
    InsertStatementBefore,
    NodeEdit,
)
from smpfix.base.findings import Applicability, Severity
from smpfix.base.imports import dotted_name
from smpfix.base.walker import Ancestry, iter_nodes
from smpfix.job.jobfacts import FeatureState, Tri
from smpfix.program.model import Program
from smpfix.program.names import StatementRef
from smpfix.program.objects.model_names import DistributedModelNames
from smpfix.program.objects.training_objects import (
    GRAD_SCALER,
    SCHEDULER,
    looks_like_optimizer,
    object_kind,
)
from smpfix.program.objects.wrapped_model import model_class, wrapped_constructions
from smpfix.program.steps import (
    body_statements,
    enclosing_step,
    step_bodies,
)
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.step_function._once_per_microbatch import (
    BATCH_SIZE,
    MODEL_STATE,
    SEED,
    StepHazard,
    StepHazards,
    batch_norm_in,
)
from smpfix.rules.titles import snippet

_CLIP_FUNCTIONS = frozenset({"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"})
_ALLREDUCE_FUNCTIONS = frozenset({"all_reduce", "all_reduce_coalesced", "all_reduce_multigpu"})
_HVD_ALLREDUCE = frozenset(
    {
        "allreduce",
        "allreduce_",
        "allreduce_async",
        "allreduce_async_",
        "grouped_allreduce",
        "grouped_allreduce_",
    }
)


@dataclass(frozen=True)
class _Work:
    """One once-per-batch call found in a step body, and why it must not be there."""

    call: cst.Call
    step: cst.FunctionDef
    what: str
    effect: str
    statement: Optional[cst.SimpleStatementLine]


class OncePerBatchWorkInsideStep(Rule):
    summary = (
        "`optimizer.step()`, `zero_grad()`, scheduler steps, gradient clipping and allreduce inside"
        " `@smp.step` run once per microbatch; so do batch-size shapes, logging, counters, model"
        " attributes and seeding there."
    )
    fix_availability = FixAvailability.UNSAFE
    depends_on = ("MB", "PP")
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.steps = self.program.steps
        self.bodies = step_bodies(self.steps)
        self.calls = self.program.facts.calls_by_name
        self.models = self.program.file.answer(DistributedModelNames)
        self.found: list[_Work] = []

    # -- detection -----------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        step = enclosing_step(self.ancestry, self.bodies, self.program.facts)
        if step is None:
            return
        kind = self._classify(node)
        if kind is None:
            return
        self.found.append(_Work(node, step, kind[0], kind[1], self._own_statement(node, step)))

    def _classify(self, call: cst.Call) -> Optional[tuple[str, str]]:
        """(what the call is, what running it per microbatch does) for once-per-batch work."""
        func = call.func
        qualified = self.program.facts.qualified_name(func) or ""
        last = qualified.rsplit(".", 1)[-1]
        if qualified.startswith("torch.") and last in _CLIP_FUNCTIONS:
            return (
                "gradient clipping",
                "clips each microbatch's partial gradients instead of the whole batch's",
            )
        if qualified.startswith("torch.distributed.") and last in _ALLREDUCE_FUNCTIONS:
            return (
                "`dist.all_reduce`",
                "runs a collective per microbatch, which is slow and reduces partial values",
            )
        if qualified.startswith("horovod.") and last in _HVD_ALLREDUCE:
            return (
                "`hvd.allreduce`",
                "runs a collective per microbatch, which is slow and reduces partial values",
            )
        if type(func) is not cst.Attribute or qualified:
            return None
        method, receiver = func.attr.value, func.value
        spelled = dotted_name(receiver) or "..."
        if method == "zero_grad":
            return (
                f"`{spelled}.zero_grad()`",
                "wipes the gradients that the earlier microbatches accumulated",
            )
        if method == "apply_gradients":
            return (
                f"`{spelled}.apply_gradients(...)`",
                "applies a weight update per microbatch, from partial gradients",
            )
        if method in ("clip_master_grads", "clip_grad_norm_", "clip_grad_value_"):
            return (
                "gradient clipping",
                "clips each microbatch's partial gradients instead of the whole batch's",
            )
        if method == "step" and looks_like_optimizer(self.program.facts, receiver):
            kind = object_kind(self.program.facts, receiver)
            if kind == SCHEDULER or (kind is None and "sched" in spelled.lower()):
                return (
                    f"`{spelled}.step()`",
                    "advances the learning-rate schedule once per microbatch",
                )
            if kind == GRAD_SCALER or (kind is None and "scaler" in spelled.lower()):
                return (
                    f"`{spelled}.step(...)`",
                    "updates the weights once per microbatch, from partial gradients",
                )
            return (
                f"`{spelled}.step()`",
                "updates the weights once per microbatch, from partial gradients",
            )
        return None

    def _own_statement(
        self, call: cst.Call, step: cst.FunctionDef
    ) -> Optional[cst.SimpleStatementLine]:
        """The statement ``call`` makes up by itself, when it sits directly in the step's body."""
        stack = self.ancestry.stack
        index = stack.index(step)
        if len(stack) < index + 5 or type(stack[index + 1]) is not cst.IndentedBlock:
            return None
        statement, small = stack[index + 2], stack[index + 3]
        if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
            return None
        if type(small) is not cst.Expr or small.value is not call:
            return None
        return statement

    # -- reporting -----------------------------------------------------------------------
    def leave_Module(self, node: cst.Module) -> None:
        self._report_work()
        hazards = StepHazards(self.program.facts, self.models)
        seen: set[int] = set()
        for step in self.steps:
            if step.function is not None and id(step.function) not in seen:
                seen.add(id(step.function))
                for hazard in hazards.of(step.function):
                    self._report_hazard(hazard, step.function)
        self._report_batch_norm()

    def _report_work(self) -> None:
        severity, states, condition = self._severity()
        when = {
            Severity.ERROR: "runs once per microbatch",
            Severity.WARNING: "runs once per microbatch if microbatches > 1",
            Severity.HINT: "belongs outside the step",
        }[severity]
        fixes: dict[cst.FunctionDef, Optional[PendingFix]] = {}
        for work in self.found:
            if work.step not in fixes:
                fixes[work.step] = self._fix([w for w in self.found if w.step is work.step])
            step_name = work.step.name.value
            where = "before the" if work.what.endswith(".zero_grad()`") else "after the"
            title = f"{_short(work.what, 24)} in step `{step_name}` {when}"
            explanation = (
                f"{_capital(work.what)} inside step function `{step_name}` runs once per"
                f" microbatch, not once per batch: it {work.effect}. {condition} Move it to the"
                f" training loop, {where} `{step_name}(...)` call."
            )
            self.report(
                work.call,
                title,
                explanation=explanation,
                severity=severity,
                fix=fixes[work.step],
                job_facts=states,
            )

    def _severity(self) -> tuple[Severity, tuple[FeatureState, ...], str]:
        mb, pp = self.feature("MB"), self.feature("PP")
        on = tuple(state for state in (mb, pp) if state.state is Tri.ON)
        if on:
            return Severity.ERROR, on, f"Here {' and '.join(state.condition() for state in on)}."
        unknown = tuple(state for state in (mb, pp) if state.state is Tri.UNKNOWN)
        if unknown:
            return (
                Severity.WARNING,
                unknown,
                "This is wrong whenever the job uses more than one microbatch.",
            )
        return (
            Severity.HINT,
            (mb, pp),
            (
                "With one microbatch and no pipeline it runs once, but the library documents that"
                " it belongs outside the step."
            ),
        )

    def _report_hazard(self, hazard: StepHazard, step: cst.FunctionDef) -> None:
        """Python that assumes one run per batch: how much that matters depends on the job."""
        mb, pp = self.feature("MB", hazard.node), self.feature("PP", hazard.node)
        name = step.name.value
        runs = f"runs once per microbatch inside step function `{name}`"
        if hazard.kind == BATCH_SIZE:
            severity = self.severity_when(mb)
            states: tuple[FeatureState, ...] = (mb,)
            title = f"{_short(hazard.what)} shapes a microbatch with the full batch size"
            if mb.state is not Tri.ON:
                title += " if microbatches > 1"
            message = (
                f"{hazard.what} uses the DataLoader's batch size as a shape, but the body {runs}"
                f" and sees batch_size / microbatches rows ({mb.condition()}): the shape is wrong"
                " for every microbatch. Use the tensor's own size (`x.size(0)`, or `-1` in"
                " `view`)."
            )
        elif hazard.kind == MODEL_STATE:
            severity = self._model_state_severity(mb, pp)
            states = (pp, mb)
            title = (
                f"{_short(hazard.what)} in a step sets model state other pipeline stages never see"
            )
            message = (
                f"{hazard.what} sets state on the model inside step function `{name}`: the body"
                " runs only on the first pipeline stage, once per microbatch, so the modules of"
                f" the other stages never see the value ({pp.condition()}). Set it before the"
                f" `{name}(...)` call; the developer guide says modules must not depend on state"
                " modified inside `smp.step`."
            )
        elif hazard.kind == SEED:
            severity = Severity.HINT if mb.state is Tri.ON else None
            states = (mb,)
            title = (
                f"{_short(hazard.what)} reseeds every microbatch: random draws repeat in a batch"
            )
            message = (
                f"{hazard.what} {runs}: every microbatch restarts the same random stream, so"
                " dropout masks and other random draws repeat across the microbatches of a batch"
                f" ({mb.condition()}). Seed once, before the training loop."
            )
        else:
            severity = Severity.HINT if Tri.ON in (mb.state, pp.state) else None
            states = tuple(state for state in (mb, pp) if state.state is Tri.ON)
            title = f"{_short(hazard.what)} runs several times per batch in step `{name}`"
            message = (
                f"{hazard.what} {runs}, only on the first pipeline stage, and once more while the"
                " library traces the first call"
                f" ({' and '.join(state.condition() for state in states)}): it logs or counts that"
                f" many times per batch. Do it on what `{name}(...)` returns, after the call."
            )
        if severity is not None:
            self.report(
                hazard.node,
                title,
                explanation=_capital(message),
                severity=severity,
                job_facts=states,
            )

    @staticmethod
    def _model_state_severity(mb: FeatureState, pp: FeatureState) -> Optional[Severity]:
        """A warning when other pipeline stages exist for certain; a hint when only microbatches
        repeat the assignment, or when the pipeline is unknown."""
        if pp.state is Tri.ON:
            return Severity.WARNING
        if mb.state is Tri.ON or pp.state is Tri.UNKNOWN:
            return Severity.HINT
        return None

    def _report_batch_norm(self) -> None:
        mb = self.feature("MB")
        if mb.state is not Tri.ON:
            return
        for wrap in self.program.facts.distributed_models:
            for built in wrapped_constructions(self.program.facts, wrap):
                cls = model_class(self.program.file, built.call, self.program.modules)
                layer = batch_norm_in(cls) if cls is not None else None
                if cls is None or layer is None:
                    continue
                title = f"`{cls.name}` has `{layer}` layers: their statistics are per microbatch"
                message = (
                    f"The model `{cls.name}` has `{layer}` layers, and {mb.condition()}: the step"
                    " runs each microbatch through the model separately, so batch statistics come"
                    " from batch_size / microbatches samples and the running statistics update"
                    " once per microbatch. Check that this is what the recipe wants (a larger"
                    " batch, or `nn.GroupNorm`/`nn.LayerNorm`, avoid it)."
                )
                self.report(
                    wrap.call,
                    title,
                    explanation=message,
                    severity=Severity.HINT,
                    job_facts=(mb,),
                )
                break

    # -- fix -------------------------------------------------------------------------------
    def _fix(self, works: Sequence[_Work]) -> Optional[PendingFix]:
        """Move every flagged statement of one step to its single call site, or none of them.

        Statements before the step's first forward or backward call (``zero_grad``) go before
        the call site; the others after it, in their order. Moving only some would reorder
        them relative to each other (``zero_grad`` after ``step`` trains nothing).
        """
        step_function = works[0].step
        statements = [work.statement for work in works]
        if any(statement is None for statement in statements):
            return None
        moved: list[cst.SimpleStatementLine] = [s for s in statements if s is not None]
        body = list(body_statements(step_function))
        if len(set(map(id, moved))) != len(moved) or len(moved) >= len(
            [s for s in body if not _is_return(s)]
        ):
            return None
        site = self._single_call_site(step_function)
        if site is None:
            return None
        call, ref = site
        renames = self._renames(step_function, call, ref, moved)
        if renames is None:
            return None
        positions = {id(statement): index for index, statement in enumerate(body)}
        first_work = next(
            (i for i, s in enumerate(body) if self._runs_model(s, step_function)), len(body)
        )
        before = [s for s in moved if positions[id(s)] < first_work]
        after = [s for s in moved if positions[id(s)] > first_work]
        if len(before) + len(after) != len(moved) or not self._only_moved_or_return_after(
            body, after, moved
        ):
            return None
        module = self.program.module
        edits: list[NodeEdit] = [DeleteStatementLines(statement) for statement in moved]
        edits += [
            InsertStatementBefore(ref.statement, _renamed(s, renames), module) for s in before
        ]
        edits += [InsertStatementAfter(ref.statement, _renamed(s, renames), module) for s in after]
        callee = call.func.value if type(call.func) is cst.Name else step_function.name.value
        return PendingFix(
            Applicability.UNSAFE,
            f"Move the once-per-batch statements out of `{callee}`, around its call",
            tuple(edits),
        )

    def _single_call_site(
        self, function: cst.FunctionDef
    ) -> Optional[tuple[cst.Call, StatementRef]]:
        names = {step.name for step in self.steps if step.function is function}
        calls = [call for name in names for call in self.calls.get(name, ())]
        if len(calls) != 1:
            return None
        call = calls[0]
        for statement, ref in self.program.facts.statements.items():
            if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
                continue
            if (
                type(ref.block) is cst.SimpleStatementSuite
                or _statement_call(statement.body[0]) is not call
            ):
                continue
            if _inside(statement, function):
                return None  # a recursive call: the statements have nowhere to go
            return call, ref
        return None

    def _renames(
        self,
        function: cst.FunctionDef,
        call: cst.Call,
        ref: StatementRef,
        moved: Sequence[cst.SimpleStatementLine],
    ) -> Optional[Mapping[str, cst.BaseExpression]]:
        """How the moved statements' names are spelled at the call site; None if they cannot be."""
        bound = bind_arguments(function, call)
        if bound is None:
            return None
        params = {
            p.name.value
            for p in (
                *function.params.posonly_params,
                *function.params.params,
                *function.params.kwonly_params,
            )
        }
        for star in (function.params.star_arg, function.params.star_kwarg):
            if type(star) is cst.Param:
                params.add(star.name.value)
        local = bound_names(function.body) - params
        caller_bound: set[str] = set()
        if type(ref.scope) is cst.FunctionDef:
            caller_bound = bound_names(ref.scope.body) | {
                p.name.value for p in ref.scope.params.params
            }
        renames: dict[str, cst.BaseExpression] = {}
        for statement in moved:
            for name in names_in(statement):
                if name in local:
                    return None
                if name in params:
                    value = bound.get(name)
                    if value is None or dotted_name(value) is None:
                        return None
                    renames[name] = value
                elif name in caller_bound:
                    return None
        return renames

    def _runs_model(self, statement: cst.CSTNode, function: cst.FunctionDef) -> bool:
        """Does the statement run the model's forward or a backward pass?"""
        for node in iter_nodes(statement):
            if type(node) is not cst.Call:
                continue
            func = node.func
            if type(func) is cst.Attribute and func.attr.value == "backward":
                return True
            if type(func) is cst.Name and self.models.holds_model(func.value, [function]):
                return True
        return False

    @staticmethod
    def _only_moved_or_return_after(
        body: Sequence[cst.BaseStatement],
        after: Sequence[cst.SimpleStatementLine],
        moved: Sequence[cst.SimpleStatementLine],
    ) -> bool:
        """After the first statement moved behind the call, only moved statements and ``return`` may
        follow."""
        if not after:
            return True
        start = next(i for i, s in enumerate(body) if s is after[0])
        moved_ids = {id(s) for s in moved}
        return all(id(s) in moved_ids or _is_return(s) for s in body[start:])


def _statement_call(small: cst.BaseSmallStatement) -> Optional[cst.Call]:
    """The call a statement is made of: ``f(...)``, ``x = f(...)``, ``x = f(...).reduce_mean()``."""
    value: Optional[cst.BaseExpression] = None
    if isinstance(small, (cst.Expr, cst.Assign)) or (
        type(small) is cst.AnnAssign and small.value is not None
    ):
        value = small.value
    if (
        type(value) is cst.Call
        and type(value.func) is cst.Attribute
        and type(value.func.value) is cst.Call
    ):
        return value.func.value
    return value if type(value) is cst.Call else None


def _inside(node: cst.CSTNode, container: cst.CSTNode) -> bool:
    return any(inner is node for inner in iter_nodes(container))


def _is_return(statement: cst.CSTNode) -> bool:
    return type(statement) is cst.SimpleStatementLine and all(
        isinstance(s, (cst.Return, cst.Pass)) for s in statement.body
    )


class _SubstituteArguments(cst.CSTTransformer):
    """Spell a moved statement's parameter names as the caller's arguments."""

    def __init__(self, renames: Mapping[str, cst.BaseExpression]) -> None:
        super().__init__()
        self.renames = renames

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:  # type: ignore[override]
        value = self.renames.get(original.value)
        return value.deep_clone() if value is not None else updated


def _renamed(
    statement: cst.SimpleStatementLine, renames: Mapping[str, cst.BaseExpression]
) -> cst.SimpleStatementLine:
    kept = [line for line in statement.leading_lines if line.comment is not None]
    result = statement.with_changes(leading_lines=kept)
    if renames:
        result = result.visit(_SubstituteArguments(renames))  # type: ignore[assignment]
    return result


def _short(what: str, limit: int = 30) -> str:
    """What a finding is about, for its title: quoted code is cut to ``limit`` characters."""
    if len(what) > 2 and what.startswith("`") and what.endswith("`"):
        return snippet(what[1:-1], limit)
    return what


def _capital(text: str) -> str:
    """``text`` opening a sentence."""
    return text[:1].upper() + text[1:]
