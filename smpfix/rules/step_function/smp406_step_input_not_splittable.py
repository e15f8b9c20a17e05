"""SMP406: step arguments the library cannot split into microbatches as written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import libcst as cst

from smpfix.base.call_binding import bind_arguments
from smpfix.base.calls import argument
from smpfix.base.edits import AppendElement, InsertAfter, ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.flavour import BOTH
from smpfix.base.literals import UNKNOWN, literal_value
from smpfix.base.walker import Ancestry
from smpfix.job.jobfacts import Tri
from smpfix.program.facts import is_step_decorator
from smpfix.program.model import Program
from smpfix.program.objects.training_objects import DATALOADER, DATASET, SAMPLER, object_kind
from smpfix.program.steps import StepFunction, positional_parameters
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet

# What the developer guide forbids passing: the inputs of `smp.step` must be the tensors a
# DataLoader yields, because the step splits them into microbatches; a loader (or what builds
# batches: a dataset, a sampler) passed in to generate the inputs inside "does not work".
# Optimizers, schedulers and the model are passed on purpose (fp16 scripts call
# `optimizer.backward(loss)` inside the step); the library only logs a one-time notice.
_NOT_STEP_INPUTS = {
    DATALOADER: "iterate the loader outside the step and pass the batch tensors it yields",
    DATASET: "build batches outside the step and pass their tensors",
    SAMPLER: "use the sampler in the DataLoader, outside the step, and pass the batch tensors",
}
_SAME_TENSOR_METHODS = frozenset(
    {"to", "cuda", "cpu", "float", "double", "half", "long", "int", "bool", "bfloat16"}
)
_FILLED = frozenset(
    {"torch.ones", "torch.zeros", "torch.empty", "torch.rand", "torch.randn", "torch.full"}
)
_PARAMETERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


class StepInputNotSplittable(Rule):
    flavours = BOTH
    summary = (
        "`non_split_inputs` must be a list of the step function's parameter names; tensors without"
        " a batch dimension belong in it."
    )
    fix_availability = FixAvailability.SOMETIMES_SAFE
    depends_on = ("MB",)
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.steps = self.program.steps

    def leave_Module(self, node: cst.Module) -> None:
        calls = self.program.facts.calls_by_name
        for step in self.steps:
            listed = self._check_options(step)
            for call in calls.get(step.name, ()):
                self._check_call(step, call, listed)

    # -- the decorator's arguments ---------------------------------------------------------
    def _check_options(self, step: StepFunction) -> Optional[frozenset[str]]:
        """Check ``non_split_inputs``/``input_split_axes``; return the listed names if known."""
        if step.options is None:
            return frozenset()
        params = positional_parameters(step.function) if step.function is not None else None
        listed = self._check_non_split_inputs(step, params)
        axes = argument(step.options, "input_split_axes")
        if axes is not None:
            self._check_split_axes(step, axes.value, params)
        return listed

    def _check_non_split_inputs(
        self, step: StepFunction, params: Optional[Sequence[str]]
    ) -> Optional[frozenset[str]]:
        assert step.options is not None
        found = argument(step.options, "non_split_inputs")
        if found is None:
            return frozenset()
        value = found.value
        if type(value) is cst.List:
            elements = [element.value for element in value.elements]
            self._check_names(step, "non_split_inputs", elements, params)
            return self._names(elements)
        if isinstance(value, (cst.Tuple, cst.Set, cst.SimpleString, cst.ConcatenatedString)):
            elements = (
                [e.value for e in value.elements]
                if isinstance(value, (cst.Tuple, cst.Set))
                else [value]
            )
            shape = {cst.Tuple: "a tuple", cst.Set: "a set"}.get(type(value), "a string")
            self._flag_not_a_list(step, value, shape, self._list_fix(value, elements))
            self._check_names(step, "non_split_inputs", elements, params)
            return None
        literal = self.program.facts.literal(value)
        if literal is None or literal is UNKNOWN:
            return frozenset() if literal is None else None
        if isinstance(literal, list):
            missing = [name for name in literal if params is not None and name not in params]
            for name in missing:
                self._flag_missing(step, value, "non_split_inputs", name)
            return frozenset(name for name in literal if isinstance(name, str))
        self._flag_not_a_list(step, value, f"a {type(literal).__name__}", None)
        return None

    def _names(self, elements: Sequence[cst.BaseExpression]) -> Optional[frozenset[str]]:
        values = [literal_value(element) for element in elements]
        if not all(isinstance(value, str) for value in values):
            return None
        return frozenset(values)

    def _list_fix(
        self, value: cst.BaseExpression, elements: Sequence[cst.BaseExpression]
    ) -> Optional[PendingFix]:
        """The same names as a list literal: safe, the tuple or string form can only raise."""
        if not elements or not all(isinstance(literal_value(element), str) for element in elements):
            return None
        code = self.program.module.code_for_node
        text = f"[{', '.join(code(element) for element in elements)}]"
        # A tuple's parentheses belong to it but lie outside the span that ReplaceNode replaces.
        parens = [
            ReplaceNode(paren, "")
            for paren in (*getattr(value, "lpar", ()), *getattr(value, "rpar", ()))
        ]
        edits = (*parens, ReplaceNode(value, text))
        return PendingFix(
            Applicability.SAFE, "Write `non_split_inputs` as a list of the same names", edits
        )

    def _flag_not_a_list(
        self, step: StepFunction, value: cst.BaseExpression, shape: str, fix: Optional[PendingFix]
    ) -> None:
        title = (
            f"`non_split_inputs` of step `{step.name}` is {shape}, not a list: `smp.step` raises"
        )
        explanation = (
            "The library requires a list: `smp.step` raises `TypeError: Non-split inputs must be a"
            " list.` when the function is defined. Write the same names as a list."
        )
        self.report(value, title, explanation=explanation, severity=Severity.ERROR, fix=fix)

    def _check_names(
        self,
        step: StepFunction,
        option: str,
        elements: Sequence[cst.BaseExpression],
        params: Optional[Sequence[str]],
    ) -> None:
        for element in elements:
            name = literal_value(element)
            if name is UNKNOWN:
                continue
            if not isinstance(name, str):
                code = self.program.code_for(element)
                self._report_name(
                    step,
                    element,
                    option,
                    f"{snippet(code, 20)}, not a parameter name",
                    f"`{code}` is not a parameter name (a string)",
                )
            elif params is not None and name not in params:
                self._flag_missing(step, element, option, name)

    def _flag_missing(self, step: StepFunction, node: cst.CSTNode, option: str, name: str) -> None:
        self._report_name(
            step,
            node,
            option,
            f"{snippet(name, 25)}, not a parameter of `{step.name}`",
            f"`{name}` is not a positional-or-keyword parameter of `{step.name}`",
        )

    def _report_name(
        self, step: StepFunction, node: cst.CSTNode, option: str, named: str, problem: str
    ) -> None:
        """``named`` completes the title ("`x`, not a parameter name"); ``problem`` says the
        same in full for the explanation."""
        title = f"`{option}` names {named}"
        message = (
            f"`{option}` of step function `{step.name}` names something the library cannot match:"
            f" {problem}. It compares the names with `inspect.getfullargspec(f).args` on every call"
            " and raises `ValueError` (keyword-only parameters and `**kwargs` do not count). Name"
            " the function's own parameters."
        )
        self.report(node, title, explanation=message, severity=Severity.ERROR)

    def _check_split_axes(
        self, step: StepFunction, value: cst.BaseExpression, params: Optional[Sequence[str]]
    ) -> None:
        if type(value) is cst.Dict:
            keys = [element.key for element in value.elements if type(element) is cst.DictElement]
            self._check_names(step, "input_split_axes", keys, params)
            return
        literal: Any = self.program.facts.literal(value)
        if literal is UNKNOWN or literal is None:
            return
        if isinstance(literal, dict):
            for name in literal:
                if params is not None and name not in params:
                    self._flag_missing(step, value, "input_split_axes", str(name))
            return
        kind = type(literal).__name__
        title = (
            f"`input_split_axes` of step `{step.name}` is a {kind}, not a dict: `smp.step` raises"
        )
        explanation = (
            'The library requires a dict from parameter name to split axis (`{"x": 1}`):'
            " `smp.step` raises `TypeError` when the function is defined."
        )
        self.report(value, title, explanation=explanation, severity=Severity.ERROR)

    # -- what the calls pass ---------------------------------------------------------------
    def _check_call(
        self, step: StepFunction, call: cst.Call, listed: Optional[frozenset[str]]
    ) -> None:
        bound = bind_arguments(step.function, call) if step.function is not None else None
        for arg in call.args:
            if arg.star:
                continue
            kind = object_kind(self.program.facts, arg.value)
            if kind in _NOT_STEP_INPUTS:
                self._flag_object(step, arg.value, kind)
        if step.function is None or listed is None:
            return
        mb = self.feature("MB")
        if mb.state is Tri.OFF:
            return
        for param, value in (bound or {}).items():
            description = self._without_batch_dimension(value)
            if description is not None and param not in listed:
                self._hint(step, value, param, description)

    def _flag_object(self, step: StepFunction, value: cst.BaseExpression, kind: str) -> None:
        spelled = self.program.code_for(value)
        spelled = spelled if len(spelled) <= 40 and "\n" not in spelled else "this argument"
        title = (
            f"{kind} {snippet(self.program.code_for(value), 20)} passed to step `{step.name}`:"
            " its batches are not split"
        )
        message = (
            f"`{spelled}` ({_article(kind)} {kind}) is passed to step function `{step.name}`: the"
            " library splits only the tensors a step receives into microbatches, so batches"
            " generated inside the step are not split or pipelined (the developer guide: passing"
            ' the DataLoader to generate the inputs inside "does not work"). Instead,'
            f" {_NOT_STEP_INPUTS[kind]}."
        )
        self.report(value, title, explanation=message, severity=Severity.WARNING)

    def _without_batch_dimension(self, value: cst.BaseExpression, depth: int = 0) -> Optional[str]:
        """How ``value`` was built, when that is a tensor with no batch dimension."""
        while (
            type(value) is cst.Call
            and type(value.func) is cst.Attribute
            and value.func.attr.value in _SAME_TENSOR_METHODS
            and self.program.facts.qualified_name(value.func) is None
        ):
            value = value.func.value
        if type(value) is cst.Name and depth < 3:
            assignment = self.program.names.reaching(value.value, value).single
            return (
                self._without_batch_dimension(assignment.value, depth + 1)
                if assignment is not None
                else None
            )
        if type(value) is not cst.Call:
            return None
        qualified = self.program.facts.qualified_name(value.func) or ""
        first = argument(
            value, "data" if qualified in ("torch.tensor", "torch.as_tensor") else "size", 0
        )
        if qualified in ("torch.tensor", "torch.as_tensor") and first is not None:
            literal = self.program.facts.literal(first.value)
            if isinstance(literal, (int, float)):
                return "a scalar tensor"
        if qualified == "torch.scalar_tensor":
            return "a scalar tensor"
        if (
            qualified in _FILLED
            and first is not None
            and self.program.facts.literal(first.value) in ((), [])
        ):
            return "a zero-dimensional tensor"
        if qualified in _PARAMETERS:
            return "an `nn.Parameter`"
        if qualified == "torch.arange":
            return "a `torch.arange` range, shaped by a length rather than the batch"
        return None

    def _hint(
        self, step: StepFunction, value: cst.BaseExpression, param: str, description: str
    ) -> None:
        mb = self.feature("MB")
        spelled = self.program.code_for(value)
        spelled = spelled if len(spelled) <= 40 and "\n" not in spelled else "this argument"
        condition = f"{mb.condition()}, so" if mb.state is Tri.ON else "with microbatches > 1,"
        message = (
            f"`{spelled}` ({description}) is passed to step function `{step.name}` as `{param}`,"
            " which is not in "
            f"`non_split_inputs`; {condition} the library splits every tensor argument along axis 0"
            " into microbatches, "
            f'and this one has no batch dimension. Add "{param}" to `non_split_inputs`.'
        )
        self.report(
            value,
            f"`{param}` has no batch dimension but is not in `non_split_inputs`",
            explanation=message,
            severity=Severity.HINT,
            fix=self._add_name_fix(step, param),
            job_facts=(mb,),
        )

    def _add_name_fix(self, step: StepFunction, param: str) -> Optional[PendingFix]:
        """Add ``param`` to ``non_split_inputs``: unsafe, since only a person knows the tensor's
        shape."""
        quoted = f'"{param}"'
        code = self.program.module.code_for_node
        edit: Optional[Any] = None
        if step.options is None:
            decorator = self._bare_decorator(step)
            if decorator is not None:
                edit = ReplaceNode(decorator, f"{code(decorator)}(non_split_inputs=[{quoted}])")
        else:
            found = argument(step.options, "non_split_inputs")
            if found is None:
                if step.options.args:
                    edit = AppendElement(step.options, (f"non_split_inputs=[{quoted}]",))
                else:
                    edit = ReplaceNode(
                        step.options, f"{code(step.options.func)}(non_split_inputs=[{quoted}])"
                    )
            elif type(found.value) is cst.List:
                elements = found.value.elements
                edit = (
                    InsertAfter(elements[-1].value, f", {quoted}")
                    if elements
                    else ReplaceNode(found.value, f"[{quoted}]")
                )
            elif literal_value(found.value) is None:
                edit = ReplaceNode(found.value, f"[{quoted}]")
        if edit is None:
            return None
        return PendingFix(Applicability.UNSAFE, f'Add "{param}" to `non_split_inputs`', (edit,))

    def _bare_decorator(self, step: StepFunction) -> Optional[cst.BaseExpression]:
        if step.function is None or step.function.name.value != step.name:
            return None
        for decorator in step.function.decorators:
            if type(decorator.decorator) is not cst.Call and is_step_decorator(
                self.program.facts.imports, decorator.decorator
            ):
                return decorator.decorator
        return None


def _article(noun: str) -> str:
    return "an" if noun[:1].lower() in "aeiou" else "a"
