"""SMP603: a module's ``forward`` uses another module's parameter without
``smp.register_parameter``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Optional

import libcst as cst

from smpfix.base.edits import InsertStatementAfter, NodeEdit
from smpfix.base.findings import Applicability
from smpfix.base.imports import dotted_name
from smpfix.base.walker import Ancestry, iter_nodes
from smpfix.fixes.references import smp_reference
from smpfix.job.versions import leading
from smpfix.program.model import Program
from smpfix.program.steps import body_statements
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet

_PARAMETER_ATTRIBUTES = frozenset({"weight", "bias"})
_PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
# Views of a parameter that still pass the parameter's storage: `self.wte.weight.t()`.
_VIEWS = frozenset(
    {
        "t",
        "T",
        "transpose",
        "to",
        "half",
        "float",
        "bfloat16",
        "view",
        "reshape",
        "contiguous",
        "type_as",
    }
)
_MAX_DEPTH = 6


def _methods(cls: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    body = cls.body.body if type(cls.body) is cst.IndentedBlock else ()
    return {
        statement.name.value: statement for statement in body if type(statement) is cst.FunctionDef
    }


def _first_parameter(function: cst.FunctionDef) -> Optional[str]:
    params = (*function.params.posonly_params, *function.params.params)
    return params[0].name.value if params else None


def _self_assignments(
    function: cst.FunctionDef, self_name: str
) -> Iterator[tuple[str, cst.BaseExpression]]:
    """``self.<attr> = value`` statements in ``function``'s body (any depth)."""
    for node in iter_nodes(function.body):
        if type(node) is cst.Assign:
            for target in node.targets:
                attribute = target.target
                if (
                    type(attribute) is cst.Attribute
                    and type(attribute.value) is cst.Name
                    and attribute.value.value == self_name
                ):
                    yield attribute.attr.value, node.value


class ExternalParameterNotRegistered(Rule):
    summary = (
        "Under sharded data parallelism, a parameter used outside the module that owns it must be"
        " registered with `smp.register_parameter`."
    )
    # `smp.register_parameter` arrived in 1.13 (SMP 1.13.0 release notes).
    since = (1, 13)
    fix_availability = FixAvailability.UNSAFE
    depends_on = ("SDP",)
    runs_on_helper_modules = True
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self._registered: Optional[list[str]] = None

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if not self._is_module_class(node, 0):
            return
        methods = _methods(node)
        forward = methods.get("forward")
        if forward is None:
            return
        self_name = _first_parameter(forward)
        if self_name is None:
            return
        init = methods.get("__init__")
        parameter_attributes = self._child_parameters(init) if init is not None else {}
        seen: set[str] = set()
        for expr, receiver in self._external_uses(forward, self_name, parameter_attributes):
            parts = dotted_name(expr)
            assert parts is not None
            if parts in seen or self._is_registered(parts, node):
                continue
            seen.add(parts)
            self._flag(node, init, expr, parts, receiver)

    # -- which classes are modules -------------------------------------------------------
    def _is_module_class(self, cls: cst.ClassDef, depth: int) -> bool:
        if depth > _MAX_DEPTH:
            return False
        for base in cls.bases:
            qualified = self.program.facts.qualified_name(base.value) or ""
            if qualified.startswith("torch.nn.") or (
                qualified.startswith("transformers.") and qualified.endswith("PreTrainedModel")
            ):
                return True
            if type(base.value) is cst.Name:
                local = self.program.facts.classes.get(base.value.value)
                if (
                    local is not None
                    and local is not cls
                    and self._is_module_class(local, depth + 1)
                ):
                    return True
        return False

    def _child_parameters(self, init: cst.FunctionDef) -> dict[str, frozenset[str]]:
        """For each child ``self.<c> = LocalClass(...)``: the attributes that class makes
        ``nn.Parameter``s."""
        self_name = _first_parameter(init)
        found: dict[str, frozenset[str]] = {}
        if self_name is None:
            return found
        for child, value in _self_assignments(init, self_name):
            if not (type(value) is cst.Call and type(value.func) is cst.Name):
                continue
            cls = self.program.facts.classes.get(value.func.value)
            child_init = _methods(cls).get("__init__") if cls is not None else None
            child_self = _first_parameter(child_init) if child_init is not None else None
            if child_init is None or child_self is None:
                continue
            found[child] = frozenset(
                attr
                for attr, assigned in _self_assignments(child_init, child_self)
                if type(assigned) is cst.Call
                and self.program.facts.qualified_name(assigned.func) in _PARAMETER_CLASSES
            )
        return found

    # -- where forward hands a child's parameter to someone else ------------------------------
    def _external_uses(
        self,
        forward: cst.FunctionDef,
        self_name: str,
        parameter_attributes: dict[str, frozenset[str]],
    ) -> Iterator[tuple[cst.BaseExpression, str]]:
        for node in iter_nodes(forward.body):
            if type(node) is cst.Call:
                receiver = self._receiver(node, self_name)
                if receiver is None:
                    continue
                spelled, child = receiver
                for arg in node.args:
                    expr = self._owned_parameter(arg.value, self_name, parameter_attributes)
                    if expr is not None and (dotted_name(expr) or "").split(".")[1] != child:
                        yield expr, spelled
            elif type(node) is cst.BinaryOperation:
                # `h @ self.wte.weight.T` is a torch op written as an operator.
                for side in (node.left, node.right):
                    expr = self._owned_parameter(side, self_name, parameter_attributes)
                    if expr is not None:
                        yield expr, f"`{self.program.code_for(node.operator).strip()}`"

    def _receiver(self, call: cst.Call, self_name: str) -> Optional[tuple[str, Optional[str]]]:
        """(how the callee is spelled, the child it belongs to) for ``self.proj(...)`` and torch/F
        ops."""
        qualified = self.program.facts.qualified_name(call.func)
        if qualified is not None:
            return (
                (self.program.code_for(call.func), None) if qualified.startswith("torch.") else None
            )
        dotted = dotted_name(call.func)
        if dotted is None or not dotted.startswith(f"{self_name}.") or dotted.count(".") < 1:
            return None
        return dotted, dotted.split(".")[1]

    def _owned_parameter(
        self,
        value: cst.BaseExpression,
        self_name: str,
        parameter_attributes: dict[str, frozenset[str]],
    ) -> Optional[cst.BaseExpression]:
        """``self.<child>(.<...>).<param>`` inside ``value`` (through views like ``.t()``)."""
        while True:
            if (
                type(value) is cst.Call
                and type(value.func) is cst.Attribute
                and value.func.attr.value in _VIEWS
            ):
                value = value.func.value
            elif type(value) is cst.Attribute and value.attr.value == "T":
                value = value.value
            else:
                break
        dotted = dotted_name(value)
        if dotted is None:
            return None
        parts = dotted.split(".")
        if len(parts) < 3 or parts[0] != self_name:
            return None
        if parts[-1] in _PARAMETER_ATTRIBUTES or (
            len(parts) == 3 and parts[2] in parameter_attributes.get(parts[1], ())
        ):
            return value
        return None

    def _is_registered(self, parts: str, cls: cst.ClassDef) -> bool:
        """``smp.register_parameter(self, self.emb.weight)`` anywhere (or for the same path
        elsewhere)."""
        if self._registered is None:
            self._registered = []
            for call in self.program.facts.library_calls("register_parameter"):
                if len(call.args) >= 2:
                    self._registered.append(
                        "".join(self.program.code_for(call.args[1].value).split())
                    )
        suffix = parts.split(".", 1)[1]
        return any(text == parts or text.endswith(f".{suffix}") for text in self._registered)

    # -- finding and fix -------------------------------------------------------------------
    def _flag(
        self,
        cls: cst.ClassDef,
        init: Optional[cst.FunctionDef],
        expr: cst.BaseExpression,
        parts: str,
        receiver: str,
    ) -> None:
        sdp = self.feature("SDP")
        severity = self.severity_when(sdp)
        if severity is None:
            return
        owner = parts.rsplit(".", 1)[0]
        where = f"the operator {receiver}" if receiver.startswith("`") else f"`{receiver}(...)`"
        condition = (
            "under sharded data parallelism"
            if sdp.state.value == "on"
            else "if sharded data parallelism is on"
        )
        title = f"{snippet(parts, 25)} is used outside its module: a shard {condition}"
        reference = smp_reference(self.program.file, "register_parameter")
        spelled = reference.text if reference is not None else "smp.register_parameter"
        explanation = (
            "The library gathers a sharded parameter only around the module that owns it, so"
            " anywhere else it is this rank's shard, not the full tensor."
            f" {leading(self.version_condition())} register it at the end of `__init__`:"
            f" `{spelled}(self, {parts})` (the API arrived in 1.13; 1.11 and 1.12 have no way to"
            " register it)."
        )
        evidence = (
            f"`{cls.name.value}.forward` passes `{parts}`, a parameter owned by `{owner}`, to"
            f" {where}",
        )
        self.report(
            expr,
            title,
            explanation=explanation,
            evidence=evidence,
            severity=severity,
            fix=self._fix(init, parts),
            job_facts=(sdp,),
        )

    def _fix(self, init: Optional[cst.FunctionDef], parts: str) -> Optional[PendingFix]:
        """Append the registration to ``__init__``; unsafe: the API exists only in SMP 1.13+ with
        SDP."""
        if init is None:
            return None
        statements: Sequence[cst.BaseStatement] = body_statements(init)
        reference = smp_reference(self.program.file, "register_parameter")
        if not statements or reference is None:
            return None
        self_name = _first_parameter(init) or "self"
        if parts.split(".", 1)[0] != self_name:
            return None
        statement = cst.parse_statement(f"{reference.text}({self_name}, {parts})\n")
        assert type(statement) is cst.SimpleStatementLine
        edits: tuple[NodeEdit, ...] = (
            *reference.edits,
            InsertStatementAfter(statements[-1], statement, self.program.module),
        )
        return PendingFix(
            Applicability.UNSAFE,
            f"Register `{parts}` with `register_parameter` in `__init__`",
            edits,
        )
