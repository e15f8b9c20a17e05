"""SMP405: what a step function returns (a ``StepOutput``) used as if it were a tensor."""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from smpfix.base.edits import ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.literals import literal_value
from smpfix.base.walker import Ancestry
from smpfix.program.model import Program
from smpfix.program.steps import StepFunction, returns_container
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet

OUTPUT = "output"  # a StepOutput: one value per microbatch
CONTAINER = "container"  # a tuple/list/dict whose tensors are StepOutputs

# What a StepOutput offers (sdk-doc, plus src-1.12 and the TensorFlow flavour).
_STEP_OUTPUT_API = frozenset(
    {
        "reduce_mean",
        "reduce_sum",
        "concat",
        "stack",
        "outputs",
        "map",
        "clear",
        "merge",
        "accumulate",
        "add_output",
    }
)
# Tensor methods whose use on a reduced value (a scalar loss or metric) is natural.
_SCALAR_METHODS = frozenset(
    {
        "item",
        "detach",
        "cpu",
        "cuda",
        "to",
        "float",
        "double",
        "half",
        "tolist",
        "numpy",
        "mean",
        "sum",
    }
)
_TENSOR_ATTRIBUTES = frozenset(
    {
        "backward",
        "long",
        "int",
        "bool",
        "max",
        "min",
        "argmax",
        "argmin",
        "size",
        "shape",
        "dim",
        "ndim",
        "view",
        "reshape",
        "squeeze",
        "unsqueeze",
        "clone",
        "data",
        "grad",
        "dtype",
        "device",
        "requires_grad",
        "numel",
        "norm",
        "sqrt",
        "exp",
        "log",
        "pow",
        "abs",
        "softmax",
        "log_softmax",
        "topk",
        "sort",
        "eq",
        "ne",
        "gt",
        "lt",
        "ge",
        "le",
        "add",
        "sub",
        "mul",
        "div",
        "t",
        "T",
        "transpose",
        "permute",
        "contiguous",
        "flatten",
        "all",
        "any",
        "isnan",
        "clamp",
        "round",
        "type",
        "std",
        "var",
        "prod",
        "cumsum",
        "split",
        "chunk",
        "expand",
        "repeat",
        "masked_fill",
        "gather",
        "nelement",
        "is_cuda",
    }
)
_SCALAR_BUILTINS = frozenset({"float", "int", "round", "abs"})
_PRINTING_BUILTINS = frozenset({"print", "str", "repr"})
_NO_TENSOR_OPERATORS = (cst.Is, cst.IsNot, cst.In, cst.NotIn)


@dataclass(frozen=True)
class _Use:
    node: cst.CSTNode
    what: Optional[str]  # set when the use is a tensor operation (a finding)
    scalar_like: bool  # whether it would be right on a reduced scalar loss


@dataclass
class _Binding:
    """A name holding a step's result, from its assignment until it is rebound."""

    kind: str
    step: str
    name: str
    fix_anchor: Optional[cst.BaseExpression]
    uses: list[_Use] = field(default_factory=list)


class StepOutputUsedAsTensor(Rule):
    summary = (
        "A step function returns a `StepOutput` (one value per microbatch), not a tensor; reduce it"
        " with `.reduce_mean()` or `.concat()` first."
    )
    fix_availability = FixAvailability.UNSAFE
    satisfied_by_hf_trainer = True
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.steps: dict[str, StepFunction] = {step.name: step for step in self.program.steps}
        self.scopes: list[dict[str, _Binding]] = []
        self._returns_container: dict[str, bool] = {}

    # -- scopes and bindings ---------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        self.scopes.append({})

    def leave_Module(self, node: cst.Module) -> None:
        self._leave_scope()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._unbind(node.name.value)
        self.scopes.append({})

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._leave_scope()

    def _leave_scope(self) -> None:
        for binding in self.scopes.pop().values():
            self._finish(binding)

    def _unbind(self, name: str) -> None:
        if self.scopes:
            binding = self.scopes[-1].pop(name, None)
            if binding is not None:
                self._finish(binding)

    def leave_Assign(self, node: cst.Assign) -> None:
        kind = self._kind(node.value)
        single = len(node.targets) == 1
        for target in node.targets:
            self._bind(target.target, kind, node.value if single else None)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._bind(node.target, self._kind(node.value), node.value)

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        if type(node.target) is cst.Name:
            self._unbind(node.target.value)

    def _bind(
        self, target: cst.BaseExpression, kind: Optional[str], value: Optional[cst.BaseExpression]
    ) -> None:
        if type(target) is cst.Name:
            self._unbind(target.value)
            if kind is not None and self.scopes:
                anchor = value if kind == OUTPUT and value is not None else None
                self.scopes[-1][target.value] = _Binding(
                    kind, self._step_of(value), target.value, anchor
                )
        elif type(target) is cst.Tuple or type(target) is cst.List:
            for element in target.elements:
                inner = element.value
                if type(inner) is cst.Name:
                    self._unbind(inner.value)
                    if kind is not None and self.scopes:
                        # `loss, logits = train_step(...)`: each element is a StepOutput.
                        self.scopes[-1][inner.value] = _Binding(
                            OUTPUT, self._step_of(value), inner.value, None
                        )
                elif type(inner) is cst.StarredElement and type(inner.value) is cst.Name:
                    self._unbind(inner.value.value)

    def _step_of(self, value: Optional[cst.BaseExpression]) -> str:
        """The step function a tracked value came from, for the message."""
        while value is not None:
            if (
                type(value) is cst.Call
                and type(value.func) is cst.Name
                and value.func.value in self.steps
            ):
                return value.func.value
            if type(value) is cst.Name:
                binding = self._lookup(value.value)
                return binding.step if binding is not None else "the step function"
            value = value.value if type(value) is cst.Subscript else None
        return "the step function"

    def _lookup(self, name: str) -> Optional[_Binding]:
        return self.scopes[-1].get(name) if self.scopes else None

    # -- what an expression holds ------------------------------------------------------------
    def _kind(self, expr: cst.BaseExpression) -> Optional[str]:
        if type(expr) is cst.Name:
            binding = self._lookup(expr.value)
            return binding.kind if binding is not None else None
        if type(expr) is cst.Call and type(expr.func) is cst.Name and expr.func.value in self.steps:
            return CONTAINER if self._step_returns_container(expr.func.value) else OUTPUT
        if type(expr) is cst.Subscript:
            base = self._kind(expr.value)
            if base is None or len(expr.slice) != 1 or type(expr.slice[0].slice) is not cst.Index:
                return None
            key = literal_value(expr.slice[0].slice.value)
            if isinstance(key, str):
                return OUTPUT  # out["loss"]: a dict of StepOutputs
            return OUTPUT if base == CONTAINER else None  # StepOutput[i] is microbatch i's tensor
        return None

    def _step_returns_container(self, name: str) -> bool:
        if name not in self._returns_container:
            function = self.steps[name].function
            self._returns_container[name] = function is not None and returns_container(function)
        return self._returns_container[name]

    # -- uses ------------------------------------------------------------------------------
    def visit_Name(self, node: cst.Name) -> None:
        binding = self._lookup(node.value)
        if binding is None:
            return
        position = self._name_position(node)
        if position == "target":
            return
        if position == "rebinds":
            self._unbind(node.value)
            return
        if binding.kind == OUTPUT:
            binding.uses.append(self._use(node))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if (
            self._kind(node) == OUTPUT
            and self._name_position(node) is None
            and not self._is_assigned_value(node)
        ):
            self._direct_use(node)

    def visit_Call(self, node: cst.Call) -> None:
        if self._kind(node) == OUTPUT and not self._is_assigned_value(node):
            self._direct_use(node)

    def _direct_use(self, node: cst.BaseExpression) -> None:
        """A step result used without a name in between: ``train_step(...).item()``."""
        use = self._use(node)
        if use.what is None:
            return
        fix = None
        if use.scalar_like:
            fix = PendingFix(
                Applicability.UNSAFE,
                "Reduce it with `.reduce_mean()` first",
                (ReplaceNode(node, f"{self.program.code_for(node)}.reduce_mean()"),),
            )
        spelled = self.program.code_for(node)
        spelled = spelled if len(spelled) <= 50 and "\n" not in spelled else "this value"
        self._report(use, spelled, self._step_of(node), fix)

    def _is_assigned_value(self, node: cst.CSTNode) -> bool:
        parent = self.ancestry.parent()
        return isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node

    def _name_position(self, node: cst.CSTNode) -> Optional[str]:
        """ "target" for an assignment target, "rebinds" for other bindings, None for a read."""
        stack = self.ancestry.stack
        parent = stack[-2] if len(stack) > 1 else None
        if type(parent) is cst.Attribute and parent.attr is node:
            return "target"  # `x.loss` names an attribute, not the variable
        if type(parent) is cst.Arg and parent.keyword is node:
            return "target"
        if isinstance(parent, (cst.Param, cst.ImportAlias, cst.ClassDef, cst.Global, cst.Nonlocal)):
            return "rebinds"
        index, child = len(stack) - 2, node
        while index >= 0 and isinstance(
            stack[index], (cst.Tuple, cst.List, cst.Element, cst.StarredElement)
        ):
            child, index = stack[index], index - 1
        holder = stack[index] if index >= 0 else None
        if type(holder) is cst.AssignTarget or (
            type(holder) is cst.AnnAssign and holder.target is child
        ):
            return "target"
        if isinstance(holder, (cst.For, cst.CompFor, cst.NamedExpr)) and holder.target is child:
            return "rebinds"
        if isinstance(holder, (cst.AsName, cst.Del)):
            return "rebinds"
        return None

    def _use(self, node: cst.CSTNode) -> _Use:
        stack = self.ancestry.stack
        parent = stack[-2] if len(stack) > 1 else None
        grand = stack[-3] if len(stack) > 2 else None
        if type(parent) is cst.Attribute and parent.value is node:
            attr = parent.attr.value
            spelled = (
                f"`.{attr}()`" if type(grand) is cst.Call and grand.func is parent else f"`.{attr}`"
            )
            if attr in _STEP_OUTPUT_API:
                return _Use(node, None, False)
            if attr in _SCALAR_METHODS:
                return _Use(node, spelled, True)
            if attr in _TENSOR_ATTRIBUTES:
                return _Use(node, spelled, False)
            return _Use(node, None, False)
        if type(parent) is cst.BinaryOperation:
            return _Use(node, "arithmetic", type(parent.operator) is not cst.MatrixMultiply)
        if type(parent) is cst.UnaryOperation and type(parent.operator) is not cst.Not:
            return _Use(node, "arithmetic", True)
        if type(parent) is cst.AugAssign:
            return _Use(node, "arithmetic", True)
        operator = None
        if type(parent) is cst.Comparison and parent.left is node:
            operator = parent.comparisons[0].operator
        elif type(parent) is cst.ComparisonTarget and parent.comparator is node:
            operator = parent.operator
        if operator is not None:
            return (
                _Use(node, "a comparison", True)
                if not isinstance(operator, _NO_TENSOR_OPERATORS)
                else _Use(node, None, False)
            )
        if type(parent) is cst.FormattedStringExpression and parent.expression is node:
            return (
                _Use(node, "a format spec", True) if parent.format_spec else _Use(node, None, True)
            )
        if type(parent) is cst.Arg and parent.value is node and type(grand) is cst.Call:
            return self._argument_use(node, grand)
        return _Use(node, None, False)

    def _argument_use(self, node: cst.CSTNode, call: cst.Call) -> _Use:
        func = call.func
        if type(func) is cst.Name and self.program.facts.qualified_name(func) is None:
            if func.value in _SCALAR_BUILTINS:
                return _Use(node, f"`{func.value}()`", True)
            if func.value in _PRINTING_BUILTINS:
                return _Use(node, None, True)
        if (self.program.facts.qualified_name(func) or "").startswith("math."):
            return _Use(node, f"`{self.program.code_for(func)}()`", True)
        if (
            type(func) is cst.Attribute
            and func.attr.value == "format"
            and _has_format_spec(func.value)
        ):
            return _Use(node, "a format spec", True)
        return _Use(node, None, False)

    # -- findings ----------------------------------------------------------------------------
    def _finish(self, binding: _Binding) -> None:
        flagged = [use for use in binding.uses if use.what is not None]
        if not flagged:
            return
        fix = None
        if binding.fix_anchor is not None and all(use.scalar_like for use in binding.uses):
            fix = PendingFix(
                Applicability.UNSAFE,
                f"Reduce `{binding.name}` with `.reduce_mean()` where it is assigned",
                (
                    ReplaceNode(
                        binding.fix_anchor,
                        f"{self.program.code_for(binding.fix_anchor)}.reduce_mean()",
                    ),
                ),
            )
        for use in flagged:
            self._report(use, binding.name, binding.step, fix)

    def _report(self, use: _Use, spelled: str, step: str, fix: Optional[PendingFix]) -> None:
        source = f"step function `{step}`" if step != "the step function" else step
        advice = (
            "Combine the microbatches first: `.reduce_mean()` for a loss or a metric"
            if use.scalar_like
            else (
                "Combine the microbatches first: `.concat()` for batch-shaped outputs such as"
                " logits, `.reduce_mean()` for a loss"
            )
        )
        what = use.what or "this use"
        if len(what) > 2 and what.startswith("`") and what.endswith("`"):
            what = snippet(what[1:-1], 24)
        title = f"{what} on `StepOutput` {snippet(spelled, 30)}, which is not a tensor"
        explanation = (
            f"`{spelled}` is a `StepOutput` (what {source} returns: one value per microbatch), not"
            f" a tensor, so {use.what} does not work on it. {advice}."
        )
        assert isinstance(use.node, cst.CSTNode)
        self.report(use.node, title, explanation=explanation, severity=Severity.ERROR, fix=fix)


def _has_format_spec(node: cst.BaseExpression) -> bool:
    """``"{:.3f}".format(x)``: a string literal with a replacement field that has a spec."""
    value = literal_value(node)
    if not isinstance(value, str):
        return False
    try:
        return any(
            spec
            for _, field_name, spec, _ in string.Formatter().parse(value)
            if field_name is not None
        )
    except ValueError:
        return False
