"""SMP706: XLA asked for through ``smp.step``/``tf.function`` arguments instead of ``set_jit``.

``smp.step`` passes its other keyword arguments to ``tf.function``; the documentation warns
that ``experimental_compile`` "may not work as expected with ``smp.step``, since it
interferes with pipelining and model partitioning", and to enable XLA with
``tf.config.optimizer.set_jit(True)``, which the library's XLA integration keeps from fusing
across microbatches. The same keyword on a ``tf.function`` that calls the step compiles the
whole step. ``"xla": True`` in a TensorFlow 2 configuration is not needed ("If XLA is used in
TensorFlow 1.x, must be set to True. This is not required in TF2.x").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.edits import InsertStatementBefore, NodeEdit, ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.flavour import ONLY_TENSORFLOW
from smpfix.base.literals import dict_entries
from smpfix.program.facts import FileFacts
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism

_XLA_KEYWORDS = ("jit_compile", "experimental_compile")
_TF_FUNCTION = frozenset({"tensorflow.function", "tensorflow.compat.v2.function"})
_SET_JIT = frozenset({"tensorflow.config.optimizer.set_jit"})


class TfXlaFlagOnStep(Rule):
    summary = (
        "Enable XLA with `tf.config.optimizer.set_jit(True)`, not"
        " `jit_compile`/`experimental_compile` on `smp.step` or the `tf.function` around it."
    )
    flavours = ONLY_TENSORFLOW
    fix_availability = FixAvailability.UNSAFE
    default_severity = Severity.WARNING
    tensor_parallelism = TensorParallelism.NONE

    def leave_Module(self, node: cst.Module) -> None:
        for options in self._step_options():
            keyword = _xla_keyword(options, self.program.facts)
            if keyword is not None:
                self._flag(options, keyword, "the step function", step=True)
        training = (
            self.program.calls.reaching(self.program.facts.step_functions)
            - self.program.facts.step_functions
        )
        for name in sorted(training):
            function = self.program.facts.functions.get(name)
            for decorator in function.decorators if function is not None else ():
                call = decorator.decorator
                if (
                    type(call) is cst.Call
                    and self.program.facts.qualified_name(call.func) in _TF_FUNCTION
                ):
                    keyword = _xla_keyword(call, self.program.facts)
                    if keyword is not None:
                        self._flag(
                            call, keyword, f"`{name}`, which calls a step function,", step=False
                        )
        self._check_config()

    def _step_options(self) -> Iterator[cst.Call]:
        for step in self.program.steps:
            if step.options is not None:
                yield step.options

    # -- reports -----------------------------------------------------------------------------------
    def _flag(self, call: cst.Call, keyword: cst.Arg, what: str, *, step: bool) -> None:
        assert keyword.keyword is not None
        name = keyword.keyword.value
        if step:
            why = (
                f"`smp.step` passes `{name}` on to `tf.function`, and the documentation warns that"
                ' it "may not work as expected with `smp.step`, since it interferes with'
                ' pipelining and model partitioning"'
            )
        else:
            why = (
                f"`{name}` compiles {what.rstrip(',')} whole, the step inside it included, across"
                " the microbatches the library pipelines; the documentation warns that XLA"
                " compilation this way interferes with pipelining and model partitioning"
            )
        message = (
            f"`{name}=True` asks XLA to compile {what} this way: {why}. Enable XLA with"
            " `tf.config.optimizer.set_jit(True)` before `smp.init()` instead, which the library"
            " keeps from fusing across microbatches."
        )
        title = (
            f"`{name}=True` on {'a step function' if step else 'a caller of a step function'}: XLA"
            f" interferes with pipelining"
        )
        self.report(
            keyword,
            title,
            explanation=message,
            severity=Severity.WARNING,
            fix=self._fix(call, keyword),
        )

    def _check_config(self) -> None:
        """``"xla": True`` written in the script's ``smp.init({...})`` dict."""
        call = self.program.facts.init_config_call
        if call is None or self.program.facts.init_config.get("xla") is not True:
            return
        config = argument(call, "config", 0)
        entry = (
            dict_entries(self.program.facts.names.value(config.value)).get("xla")
            if config is not None
            else None
        )
        message = (
            '`"xla": True` is needed only for XLA in TensorFlow 1.x; the library\'s documentation'
            ' says "This is not required in TF2.x". Under TensorFlow 2, enable XLA with'
            " `tf.config.optimizer.set_jit(True)` and leave `xla` out."
        )
        title = (
            '`"xla": True` is only needed on TensorFlow 1.x; TF2 uses `tf.config.optimizer.set_jit`'
        )
        self.report(
            entry if entry is not None else call, title, explanation=message, severity=Severity.HINT
        )

    # -- the fix -----------------------------------------------------------------------------------
    def _fix(self, call: cst.Call, keyword: cst.Arg) -> Optional[PendingFix]:
        """Drop the keyword, and turn XLA on with ``set_jit`` before ``smp.init()`` (as the
        container tests do) if the file does not yet."""
        remaining = _without(call, keyword)
        # ``@smp.step(xla=True)`` becomes ``@smp.step``, not ``@smp.step()``.
        bare = not remaining.args and type(self.program.parents.parent_of(call)) is cst.Decorator
        code = self.program.code_for(remaining.func if bare else remaining)
        edits: list[NodeEdit] = [ReplaceNode(call, code)]
        if not any(
            self.program.facts.qualified_name(c.func) in _SET_JIT
            for c in self.program.facts.call_order
        ):
            insertion = self._set_jit_before_init()
            if insertion is None:
                return None
            edits.append(insertion)
        return PendingFix(
            Applicability.UNSAFE,
            "Enable XLA with `tf.config.optimizer.set_jit(True)` instead",
            tuple(edits),
        )

    def _set_jit_before_init(self) -> Optional[InsertStatementBefore]:
        tf = self.program.facts.imports.local_names_for("tensorflow")
        init = next(iter(self.program.facts.smp_init_calls), None)
        ref = (
            self.program.facts.statement_of(_statement_of(init, self.program.facts))
            if init is not None
            else None
        )
        if (
            not tf
            or ref is None
            or type(ref.scope) is not cst.Module
            or type(ref.statement) is not cst.SimpleStatementLine
        ):
            return None
        module = self.program.module
        statement = cst.parse_statement(
            f"{tf[0]}.config.optimizer.set_jit(True)\n", config=module.config_for_parsing
        )
        assert type(statement) is cst.SimpleStatementLine
        return InsertStatementBefore(ref.statement, statement, module)


def _xla_keyword(call: cst.Call, facts: FileFacts) -> Optional[cst.Arg]:
    for name in _XLA_KEYWORDS:
        found = argument(call, name)
        if found is not None and facts.literal(found.value) is True:
            return found
    return None


def _without(call: cst.Call, keyword: cst.Arg) -> cst.Call:
    """``call`` without the argument ``keyword``, keeping the trailing-comma style."""
    args = [arg for arg in call.args if arg is not keyword]
    if args and call.args[-1] is keyword:
        args[-1] = args[-1].with_changes(comma=keyword.comma)
    return call.with_changes(args=args)


def _statement_of(call: cst.Call, facts: FileFacts) -> cst.CSTNode:
    """The statement holding ``call`` among the facts' statements (``smp.init()`` is one by
    itself)."""
    for statement in facts.statements:
        if type(statement) is cst.SimpleStatementLine and any(
            type(small) is cst.Expr and small.value is call for small in statement.body
        ):
            return statement
    return call
