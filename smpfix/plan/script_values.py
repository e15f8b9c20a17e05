"""What an expression in the launched script evaluates to, and how smpfix knows it.

A plan reads sizes and switches the script computes from its command line:
``GPT2Config(n_embd=args.hidden_width)``, ``flash_attention=args.flash_attention > 0``,
``dtype=torch.float16``. This folds literals, names bound once, ``args.<name>`` through
argparse (the launcher's hyperparameters overriding the defaults:
``smpfix.program.flow.command_line``), ``smp.tp_size()`` and ``smp.pp_size()`` from the job, SMP
v2's ``tsm.state.<setting>`` from the v2 settings a v2 plan gives (``with_v2_state``; the official
v2 example tests ``tsm.state.sm_activation_offloading``), ``torch`` dtypes, and arithmetic,
comparisons and boolean operations over those. Anything else is ``UNKNOWN``: nothing is executed
and nothing is guessed. Each value carries, in words, the argparse values it rests on, for the
plan's assumptions.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable

import libcst as cst

from smpfix.base.imports import dotted_name
from smpfix.base.literals import UNKNOWN
from smpfix.job.jobfacts import JobFacts
from smpfix.job.linking import LinkedScript
from smpfix.program.facts import FileFacts
from smpfix.program.flow.command_line import (
    argument_value,
    assigned_attributes,
    command_line_arguments,
)
from smpfix.program.project.parsed_file import ParsedFile

_MAX_DEPTH = 12
_DTYPES = {
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32",
    "float": "fp32",
}
_V2_STATE = "torch.sagemaker.state."
_SIZE_SETTINGS = {"tp_size": "tensor_parallel_degree", "pp_size": "pipeline_parallel_degree"}
_ARITHMETIC: Mapping[type, Callable[[Any, Any], Any]] = {
    cst.Add: operator.add,
    cst.Subtract: operator.sub,
    cst.Multiply: operator.mul,
    cst.FloorDivide: operator.floordiv,
    cst.Divide: operator.truediv,
}
_COMPARISONS: Mapping[type, Callable[[Any, Any], Any]] = {
    cst.Equal: operator.eq,
    cst.NotEqual: operator.ne,
    cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le,
    cst.GreaterThan: operator.gt,
    cst.GreaterThanEqual: operator.ge,
    cst.Is: operator.is_,
    cst.IsNot: operator.is_not,
}


@dataclass(frozen=True)
class Traced:
    """A value (``UNKNOWN`` when smpfix cannot know it) and the argparse values it rests on."""

    value: Any
    how: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        return self.value is not UNKNOWN

    def explained(self) -> str:
        return "; ".join(self.how)


_UNKNOWN = Traced(UNKNOWN)


class ScriptValues:
    """Evaluates expressions of the script a launcher starts (and the modules it imports)."""

    def __init__(
        self, files: Sequence[ParsedFile], launchers: Sequence[LinkedScript], job: JobFacts
    ) -> None:
        self.files = tuple(file.facts for file in files)
        self.launchers = tuple(launchers)
        self.job = job
        # ``torch.sagemaker.state.<key>``: the SMP v2 settings, for a v2 plan only.
        self._v2_state: Mapping[str, Traced] = {}
        self._arguments = command_line_arguments(files)
        self._known: dict[int, tuple[cst.BaseExpression, FileFacts, Traced]] = {}
        self._assigned = (
            set().union(*(assigned_attributes(facts) for facts in self.files))
            if self.files
            else set()
        )

    def with_job(self, job: JobFacts) -> ScriptValues:
        """The same script under another job: its argparse arguments and assigned attributes
        are read once (they do not depend on the job), its answers are worked out again."""
        values = copy.copy(self)
        values.job = job
        values._known = {}
        return values

    def with_v2_state(self, state: Mapping[str, tuple[Any, str]]) -> ScriptValues:
        """The same script where ``tsm.state.<key>`` is the SMP v2 setting ``key``: its value
        and, in words, where it comes from (the settings SMP v2 initialises its state from)."""
        values = copy.copy(self)
        values._v2_state = {
            key: Traced(value, (f"`tsm.state.{key}` = {value!r} ({source})",))
            for key, (value, source) in state.items()
        }
        values._known = {}
        return values

    def argument(self, dest: str) -> Traced:
        """``args.<dest>``: the launcher's hyperparameter, else the argparse default."""
        if dest in self._assigned:
            return _UNKNOWN
        found = argument_value(dest, self._arguments, self.launchers)
        if found is None:
            return _UNKNOWN
        origin = "argparse default" if found.default else "launcher hyperparameter"
        return Traced(found.value, (f"`{dest}` = {found.value!r} ({origin})",))

    def has_argument(self, dest: str) -> bool:
        return dest in self._arguments

    def of(self, expr: cst.BaseExpression, facts: FileFacts, depth: int = 0) -> Traced:
        """What ``expr`` evaluates to. A plan asks about the same expressions again and
        again (each ``if`` test around each call), so answers at the top are remembered."""
        if depth:
            return self._of(expr, facts, depth)
        known = self._known.get(id(expr))
        if known is not None and known[0] is expr and known[1] is facts:
            return known[2]
        found = self._of(expr, facts, 0)
        self._known[id(expr)] = (expr, facts, found)  # the node kept alive: its id stays its own
        return found

    def _of(self, expr: cst.BaseExpression, facts: FileFacts, depth: int) -> Traced:
        if depth > _MAX_DEPTH:
            return _UNKNOWN
        expr = facts.names.value(expr)
        literal = facts.literal(expr)
        if literal is not UNKNOWN:
            return Traced(literal)
        # Exact node types (LibCST's have no subclasses): isinstance goes through ABCMeta.
        if type(expr) is cst.Attribute:
            return self._attribute(expr, facts)
        if type(expr) is cst.Call:
            return self._call(expr, facts, depth)
        if type(expr) is cst.UnaryOperation:
            inner = self.of(expr.expression, facts, depth + 1)
            if not inner.known:
                return _UNKNOWN
            if type(expr.operator) is cst.Not:
                return Traced(not inner.value, inner.how)
            return self._apply(
                operator.neg if type(expr.operator) is cst.Minus else operator.pos, (inner,)
            )
        if type(expr) is cst.BinaryOperation:
            function = _ARITHMETIC.get(type(expr.operator))
            if function is None:
                return _UNKNOWN
            return self._apply(
                function,
                (self.of(expr.left, facts, depth + 1), self.of(expr.right, facts, depth + 1)),
            )
        if type(expr) is cst.Comparison:
            return self._comparison(expr, facts, depth)
        if type(expr) is cst.BooleanOperation:
            left = self.of(expr.left, facts, depth + 1)
            if not left.known:
                return _UNKNOWN
            if bool(left.value) == (type(expr.operator) is cst.And):
                right = self.of(expr.right, facts, depth + 1)
                return Traced(right.value, left.how + right.how) if right.known else _UNKNOWN
            return left
        if type(expr) is cst.IfExp:
            test = self.of(expr.test, facts, depth + 1)
            if not test.known:
                return _UNKNOWN
            chosen = self.of(expr.body if test.value else expr.orelse, facts, depth + 1)
            return Traced(chosen.value, test.how + chosen.how) if chosen.known else _UNKNOWN
        return _UNKNOWN

    def _attribute(self, expr: cst.Attribute, facts: FileFacts) -> Traced:
        qualified = facts.qualified_name(expr) or ""
        if qualified.startswith("torch.") and qualified[6:] in _DTYPES:
            return Traced(_DTYPES[qualified[6:]])
        if qualified.startswith(_V2_STATE):
            return self._v2_state.get(qualified[len(_V2_STATE) :], _UNKNOWN)
        if isinstance(expr.value, cst.Name) and facts.qualified_name(expr.value) is None:
            return self.argument(expr.attr.value)  # args.name: an argparse namespace
        return _UNKNOWN

    def _call(self, expr: cst.Call, facts: FileFacts, depth: int) -> Traced:
        member = facts.smp_member(expr.func)
        if member in _SIZE_SETTINGS and not expr.args:
            value = self.job.value(_SIZE_SETTINGS[member])
            setting = self.job.settings.get(_SIZE_SETTINGS[member])
            if isinstance(value, int) and not isinstance(value, bool) and setting is not None:
                return Traced(value, (f"`smp.{member}()` = {value} ({setting.source})",))
            return _UNKNOWN
        qualified = facts.qualified_name(expr.func) or dotted_name(expr.func) or ""
        if qualified == "torch.get_default_dtype" and not expr.args:
            return Traced("fp32")
        if (
            qualified in ("int", "bool", "float")
            and len(expr.args) == 1
            and not expr.args[0].keyword
        ):
            inner = self.of(expr.args[0].value, facts, depth + 1)
            return self._apply({"int": int, "bool": bool, "float": float}[qualified], (inner,))
        return _UNKNOWN

    def _comparison(self, expr: cst.Comparison, facts: FileFacts, depth: int) -> Traced:
        left = self.of(expr.left, facts, depth + 1)
        how = left.how
        result = True
        for target in expr.comparisons:
            right = self.of(target.comparator, facts, depth + 1)
            function = _COMPARISONS.get(type(target.operator))
            if function is None or not left.known or not right.known:
                return _UNKNOWN
            compared = self._apply(function, (left, right))
            if not compared.known:
                return _UNKNOWN
            result = result and bool(compared.value)
            how += right.how
            left = right
        return Traced(result, how)

    @staticmethod
    def _apply(function: Callable[..., Any], values: Sequence[Traced]) -> Traced:
        if not all(value.known for value in values):
            return _UNKNOWN
        try:
            result = function(*(value.value for value in values))
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            return _UNKNOWN
        return Traced(result, tuple(part for value in values for part in value.how))
