"""SMP403: the wrapped model called, or ``model.backward`` called, outside a step function."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from smpfix.base.findings import Severity
from smpfix.base.parents import CodeScope
from smpfix.base.walker import Ancestry, iter_nodes
from smpfix.job.jobfacts import Tri
from smpfix.job.versions import leading
from smpfix.program.model import Program
from smpfix.program.objects.model_names import DistributedModelNames
from smpfix.program.steps import enclosing_step, step_bodies
from smpfix.rules.rule import FixAvailability, Rule, TensorParallelism

_IN_STEP, _ALTERNATIVE, _OUTSIDE = "in step", "alternative to a step", "outside"


@dataclass(frozen=True)
class _ForwardOrBackward:
    call: cst.Call
    model: str
    backward: bool
    functions: tuple[cst.FunctionDef, ...]


class ForwardBackwardOutsideStep(Rule):
    summary = (
        "The wrapped model's forward (under pipeline parallelism) and `model.backward` run only"
        " inside an `@smp.step` function."
    )
    fix_availability = FixAvailability.NONE
    depends_on = ("PP",)
    satisfied_by_hf_trainer = True
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        steps = self.program.steps
        self.bodies = step_bodies(steps)
        self.step_names = frozenset(step.name for step in steps)
        self.models = self.program.file.answer(DistributedModelNames)
        self.candidates: list[_ForwardOrBackward] = []
        # For each plain function name: where each of its calls is (_IN_STEP, _ALTERNATIVE,
        # _OUTSIDE).
        self.callers_in_step: dict[str, list[str]] = {}

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        in_step = enclosing_step(self.ancestry, self.bodies, self.program.facts) is not None
        if type(func) is cst.Name and func.value in self.program.facts.functions:
            # Only local functions can be step helpers; the branch search is for them alone.
            where = (
                _IN_STEP if in_step else _ALTERNATIVE if self._alternative_to_step() else _OUTSIDE
            )
            self.callers_in_step.setdefault(func.value, []).append(where)
        if in_step or not self.models.targets:
            return
        if type(func) is cst.Name:
            model, backward = func.value, False
        elif (
            type(func) is cst.Attribute
            and func.attr.value == "backward"
            and type(func.value) is cst.Name
        ):
            model, backward = func.value.value, True
        else:
            return
        functions: tuple[cst.FunctionDef, ...] = tuple(self.ancestry.all_of(cst.FunctionDef))  # type: ignore[arg-type]
        if not self.models.holds_model(model, functions) or self._before_wrap(
            node, model, functions
        ):
            return
        self.candidates.append(_ForwardOrBackward(node, model, backward, functions))

    def _before_wrap(
        self, call: cst.Call, model: str, functions: tuple[cst.FunctionDef, ...]
    ) -> bool:
        """``model(x)`` before ``model = smp.DistributedModel(model)`` in the same function calls
        the raw model."""
        scope: CodeScope = functions[-1] if functions else self.program.module
        wraps = [
            w
            for w in self.program.facts.distributed_models
            if w.target == model and w.where is not None and w.where.scope is scope
        ]
        return bool(wraps) and all(self.program.order.runs_before(call, w.call) for w in wraps)

    def _alternative_to_step(self) -> bool:
        """The call being visited sits in one branch of an ``if`` whose other branch calls a
        step function: a script that runs with or without the library (``if args.smp:
        loss = smp_step(...) else: loss = train_step(...)``) takes one path or the other."""
        if not self.step_names:
            return False
        stack = self.ancestry.stack
        for position, node in enumerate(stack[:-1]):
            if type(node) is not cst.If or node.orelse is None:
                continue
            branch = stack[position + 1]
            other = (
                node.orelse if branch is node.body else node.body if branch is node.orelse else None
            )
            if other is not None and any(
                type(child) is cst.Call
                and type(child.func) is cst.Name
                and child.func.value in self.step_names
                for child in iter_nodes(other)
            ):
                return True
        return False

    def _only_called_from_steps(self, function: cst.FunctionDef) -> bool:
        """Every call of ``function`` runs inside a step, or on the other side of a branch
        from a step call; and at least one is inside a step."""
        calls = self.callers_in_step.get(function.name.value, [])
        return _IN_STEP in calls and _OUTSIDE not in calls

    def leave_Module(self, node: cst.Module) -> None:
        for candidate in self.candidates:
            if any(self._only_called_from_steps(function) for function in candidate.functions):
                continue
            if candidate.backward:
                self._flag_backward(candidate)
            else:
                self._flag_forward(candidate)

    def _flag_backward(self, candidate: _ForwardOrBackward) -> None:
        model = candidate.model
        title = f"`{model}.backward(...)` outside an `@smp.step` function: the library raises"
        explanation = (
            "The library always raises `BwdExecutionNotInStepFnError` there, because the backward"
            f" pass is scheduled per microbatch by the step. Move the forward pass and"
            f" `{model}.backward(loss)` into an `@smp.step` function, return the loss, and call"
            " that function from the training loop."
        )
        self.report(candidate.call, title, explanation=explanation, severity=Severity.ERROR)

    def _flag_forward(self, candidate: _ForwardOrBackward) -> None:
        pp = self.feature("PP", at=candidate.call)
        severity = self.severity_when(pp)
        if severity is None:
            return
        model = candidate.model
        on = pp.state is Tri.ON
        when = "under pipeline parallelism" if on else "if pipeline parallelism is on"
        title = f"wrapped `{model}` called outside `@smp.step`: raises {when}"
        why = (
            "the library raises `FwdExecutionNotInStepFnError`, because pipeline stages can only"
            " run the forward pass inside a step, which splits the batch into microbatches and"
            " pipelines them"
        )
        explanation = (
            f"{leading(pp.condition())} {why}. Put the forward pass (and"
            f" `{model}.backward(loss)`) in an `@smp.step` function and call it from the loop;"
            " evaluation needs its own step function too."
        )
        self.report(
            candidate.call, title, explanation=explanation, severity=severity, job_facts=(pp,)
        )
