"""SMP601: gradients clipped by hand while sharded data parallelism clips them itself."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable, Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.edits import DeleteStatementLines, NodeEdit, ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.literals import UNKNOWN
from smpfix.job.jobfacts import Tri
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet

# The torch clipping utilities and the parameter that holds their threshold (position 1).
_TORCH_CLIPPING = {
    "torch.nn.utils.clip_grad_norm_": "max_norm",
    "torch.nn.utils.clip_grad_norm": "max_norm",
    "torch.nn.utils.clip_grad.clip_grad_norm_": "max_norm",
    "torch.nn.utils.clip_grad.clip_grad_norm": "max_norm",
    "torch.nn.utils.clip_grad_value_": "clip_value",
    "torch.nn.utils.clip_grad.clip_grad_value_": "clip_value",
}
_CALLED_NAMES = frozenset(
    {"clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_master_grads"}
)
_SDP_DEGREE = "state.cfg.sharded_data_parallel_degree"
_SDP_ON_DEGREES = (2, 4, 8, 16, 32, 64, 128, 256, 512)
_COMPARISONS: dict[type, Callable[[Any, Any], bool]] = {
    cst.GreaterThan: operator.gt,
    cst.GreaterThanEqual: operator.ge,
    cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le,
    cst.Equal: operator.eq,
    cst.NotEqual: operator.ne,
}


@dataclass(frozen=True)
class _Clipping:
    """One manual clipping call: how a message names it, and the threshold it was given."""

    spelled: str
    threshold: Optional[cst.BaseExpression]
    by_value: bool
    master_grads: bool


class ManualGradClippingUnderSdp(Rule):
    summary = (
        "Gradients clipped by hand (`clip_grad_norm_`, `clip_master_grads`) under sharded data"
        " parallelism, which clips them itself by `sdp_gradient_clipping`."
    )
    fix_availability = FixAvailability.UNSAFE
    depends_on = ("SDP",)
    tensor_parallelism = TensorParallelism.NONE

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        called = (
            func.attr.value
            if type(func) is cst.Attribute
            else func.value
            if type(func) is cst.Name
            else None
        )
        imported = (
            type(func) is cst.Name and func.value in self.program.facts.imports.bindings
        )  # `as clip`
        if called not in _CALLED_NAMES and not imported:
            return
        clipping = self._clipping(node)
        if clipping is None:
            return
        severity = self._severity()
        if severity is None or self._sdp_off_on_this_path():
            return
        self._flag(node, clipping, severity)

    def _clipping(self, call: cst.Call) -> Optional[_Clipping]:
        func = call.func
        qualified = self.program.facts.qualified_name(func)
        if qualified in _TORCH_CLIPPING:
            parameter = _TORCH_CLIPPING[qualified]
            threshold = argument(call, parameter, 1)
            code = self.program.code_for(func)
            spelled = f"`{code}(...)`"
            if (
                type(func) is cst.Name
                and qualified is not None
                and not qualified.endswith(f".{code}")
            ):
                spelled += f" (`{qualified}`)"  # imported under another name
            return _Clipping(
                spelled, threshold.value if threshold else None, parameter == "clip_value", False
            )
        if (
            type(func) is cst.Attribute
            and func.attr.value == "clip_master_grads"
            and type(func.value) is cst.Name
            and func.value.value in self.program.facts.optimizer_names()
        ):
            threshold = argument(call, "max_norm", 0)
            spelled = f"`{self.program.code_for(func)}(...)`"
            return _Clipping(spelled, threshold.value if threshold else None, False, True)
        return None

    def _severity(self) -> Optional[Severity]:
        """Error when a configuration says SDP is on; a warning when only the script suggests it."""
        sdp = self.feature("SDP")
        if sdp.state is Tri.OFF:
            return None
        if sdp.state is Tri.ON and sdp.feature.setting in self.program.job.settings:
            return Severity.ERROR
        if any(item.feature == "SDP" for item in self.program.job.evidence):
            return Severity.WARNING
        return None

    # -- path sensitivity: `if smp.state.cfg.sharded_data_parallel_degree > 1: ... else: clip` --
    def _sdp_off_on_this_path(self) -> bool:
        stack = self.ancestry.stack
        for position, node in enumerate(stack[:-1]):
            if type(node) is not cst.If:
                continue
            means_on = self._sdp_test(node.test)
            branch = stack[position + 1]
            if (means_on is False and branch is node.body) or (
                means_on is True and branch is node.orelse
            ):
                return True
        return False

    def _sdp_test(self, test: cst.BaseExpression) -> Optional[bool]:
        """The value ``test`` has whenever SDP is on (any degree above 1), or None if that varies.

        False means the ``if`` body never runs under SDP (``if degree <= 1:``, or the
        ``if degree < 1:`` of a script that clips only without SDP); True means its ``else``
        never does.
        """
        if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            inner = self._sdp_test(test.expression)
            return None if inner is None else not inner
        if type(test) is not cst.Comparison or len(test.comparisons) != 1:
            return None
        target = test.comparisons[0]
        compare = _COMPARISONS.get(type(target.operator))
        if compare is None:
            return None
        # Evaluate the test at the degrees an SDP job can have.
        if self._is_sdp_degree(test.left):
            bound = self.program.facts.literal(target.comparator)
            pairs = [(degree, bound) for degree in _SDP_ON_DEGREES]
        elif self._is_sdp_degree(target.comparator):
            bound = self.program.facts.literal(test.left)
            pairs = [(bound, degree) for degree in _SDP_ON_DEGREES]
        else:
            return None
        if not isinstance(bound, int) or isinstance(bound, bool):
            return None
        values = {compare(left, right) for left, right in pairs}
        return values.pop() if len(values) == 1 else None

    def _is_sdp_degree(self, expr: cst.BaseExpression) -> bool:
        """``smp.state.cfg.sharded_data_parallel_degree`` (or a name bound to it once), or the
        script's own setting of that name (``args.sharded_data_parallel_degree``), which the
        official examples pass both to ``smp.init`` and, as a hyperparameter, from the launcher."""
        if type(expr) is cst.Name:
            assignment = self.program.facts.names.assignment(expr.value, expr)
            expr = assignment.value if assignment is not None else expr
        if self.program.facts.smp_member(expr) == _SDP_DEGREE:
            return True
        return (
            type(expr) is cst.Attribute
            and expr.attr.value == "sharded_data_parallel_degree"
            and self.program.facts.smp_member(expr) is None
        )

    # -- reporting ----------------------------------------------------------------------------
    def _fix(self, call: cst.Call, description: str) -> Optional[PendingFix]:
        """Remove the call when it is a statement of its own (its value unused)."""
        expression, statement, block = (self.ancestry.parent(level) for level in (1, 2, 3))
        if type(expression) is not cst.Expr or expression.value is not call:
            return None
        edit: NodeEdit
        if type(statement) is cst.SimpleStatementSuite and len(statement.body) == 1:
            edit = ReplaceNode(expression, "pass")
        elif type(statement) is cst.SimpleStatementLine and len(statement.body) == 1:
            alone = type(block) is cst.IndentedBlock and len(block.body) == 1
            edit = ReplaceNode(expression, "pass") if alone else DeleteStatementLines(statement)
        else:
            return None
        return PendingFix(Applicability.UNSAFE, description, (edit,))

    def _setting(self, clipping: _Clipping) -> tuple[str, Any]:
        value = (
            self.program.facts.literal(clipping.threshold)
            if clipping.threshold is not None
            else UNKNOWN
        )
        if clipping.by_value:
            return "`sdp_gradient_clipping` to the gradient-norm threshold you want", UNKNOWN
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return f'`"sdp_gradient_clipping": {value}`', value
        if clipping.threshold is not None:
            return (
                (
                    "`sdp_gradient_clipping` to the max_norm value"
                    f" (`{self.program.code_for(clipping.threshold)}`)"
                ),
                UNKNOWN,
            )
        return "`sdp_gradient_clipping` to the max_norm value", UNKNOWN

    def _flag(self, call: cst.Call, clipping: _Clipping, severity: Severity) -> None:
        sdp = self.feature("SDP")
        function = snippet(self.program.code_for(call.func), 28)
        evidence = [f"{clipping.spelled} clips gradients by hand"]
        if severity is not Severity.ERROR:
            title = f"{function} clips by hand; the library does if sharded data parallelism is on"
            item = next(e for e in self.program.job.evidence if e.feature == "SDP")
            evidence.append(
                f"the script suggests sharded data parallelism: {item.description} at line"
                f" {item.line}"
            )
        elif clipping.master_grads:
            title = f"{function} does nothing under sharded data parallelism"
        else:
            title = f"{function} clips sharded gradients by hand; the library clips itself"
        if clipping.master_grads:
            what = "Under sharded data parallelism it does nothing, and"
        else:
            what = (
                "Under sharded data parallelism the parameters are sharded across ranks, so it"
                " does not clip by the global gradient norm, and"
            )
        why = (
            " the library already clips gradients itself at `optimizer.step()`, by the job's"
            " `sdp_gradient_clipping` threshold (default 1.0)."
        )
        if clipping.by_value:
            why += " The library clips by the gradient norm, not by value."
        setting, value = self._setting(clipping)
        current = self.program.job.settings.get("sdp_gradient_clipping")
        if current is not None and value is not UNKNOWN and current.value == value:
            advice = (
                f" Remove the call; `sdp_gradient_clipping` is already {current.value}"
                f" ({current.source})."
            )
            description = "Remove the manual clipping"
        else:
            advice = f" Remove the call and set {setting} in the job's modelparallel parameters."
            description = f"Remove the manual clipping; set {setting} in the job"
        fix = self._fix(call, description)
        if fix is None:
            used = type(self.ancestry.parent()) is not cst.Expr
            reason = "its result is used" if used else "it shares its line with other statements"
            advice += f" Not removed automatically: {reason}."
        self.report(
            call,
            title,
            explanation=(what + why + advice),
            evidence=evidence,
            severity=severity,
            fix=fix,
            job_facts=(sdp,),
        )
