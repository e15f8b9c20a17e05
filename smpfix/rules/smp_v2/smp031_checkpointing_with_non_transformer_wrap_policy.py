"""SMP031: activation checkpointing in an SMP 2.0.0 job whose FSDP wrap is not auto-wrapped by
transformer layers."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Optional

import libcst as cst

from smpfix.job.versions import Version
from smpfix.program.facts import FileFacts
from smpfix.program.project.parsed_file import ParsedFile
from smpfix.program.steps import own_nodes
from smpfix.rules.rule import FixAvailability, Rule, TensorParallelism
from smpfix.rules.scope import FileScope, Library
from smpfix.rules.smp_v2._script import V2Calls, has_star_kwargs, keyword
from smpfix.rules.titles import snippet

# The release whose known issues list this (the SMP release notes, v2.0.0).
FIRST_RELEASE: Version = (2, 0, 0)
_WRAP = "torch.distributed.fsdp.wrap."
_TRANSFORMER_POLICY = _WRAP + "transformer_auto_wrap_policy"
_CHECKPOINT_WRAPPER = "torch.distributed.algorithms._checkpoint.checkpoint_wrapper."
# FSDP's activation checkpointing, as the SMP v2 activation checkpointing page applies it.
_APPLY = _CHECKPOINT_WRAPPER + "apply_activation_checkpointing"
_CHECKPOINTING = frozenset({_APPLY, _CHECKPOINT_WRAPPER + "checkpoint_wrapper"})
# How many levels of project imports below the script are searched for the checkpointing, and
# how many calls deep a policy built by the project's own functions is followed.
_DEPTH = 3


@dataclass(frozen=True)
class _Policy:
    """What an FSDP wrap's ``auto_wrap_policy`` is: ``transformer`` when it is
    ``functools.partial(transformer_auto_wrap_policy, ...)``, else ``wrapped`` says how the model
    is wrapped instead ("by `size_based_auto_wrap_policy`"); None when smpfix cannot tell."""

    transformer: Optional[bool]
    wrapped: str = ""


_UNKNOWN = _Policy(None)
# Finds the module and name a qualified name of the project refers to (``LocalModules``).
_Load = Callable[[FileFacts, str], Optional[tuple[ParsedFile, str]]]


class CheckpointingWithNonTransformerWrapPolicy(Rule):
    summary = (
        "Activation checkpointing in an SMP 2.0.0 job whose FSDP wrap does not use"
        " `functools.partial(transformer_auto_wrap_policy, ...)`, the only wrapping policy"
        " that release's activation checkpointing works with."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.NONE
    library = Library.V2
    scope = FileScope.SMP_V2
    since: ClassVar[Optional[Version]] = FIRST_RELEASE
    until: ClassVar[Optional[Version]] = FIRST_RELEASE

    def leave_Module(self, node: cst.Module) -> None:
        wraps = self.program.file.answer(V2Calls).fsdp
        if not wraps:
            return
        checkpointing = self._checkpointing()
        if checkpointing is None:
            return
        where, anchor = checkpointing
        policies = {id(wrap): self._policy_of(wrap) for wrap in wraps}
        offending = [wrap for wrap in wraps if policies[id(wrap)].transformer is False]
        if anchor is not None:
            # Reported once, at the checkpointing: about the wrap it checkpoints when the
            # script says which, else only when no wrap of the file is a working one.
            target = self._checkpointed_wrap(anchor, wraps)
            if target is not None:
                offending = [target] if target in offending else []
            elif len(offending) < len(wraps):
                return
            offending = offending[:1]
        for wrap in offending:
            policy = policies[id(wrap)]
            spelled = snippet(self.program.code_for(wrap.func) + "(...)")
            self.report(
                anchor if anchor is not None else wrap,
                f"activation checkpointing with FSDP wrapped {policy.wrapped}: broken on SMP 2.0.0",
                explanation=(
                    "The SMP release notes list as a known issue of SMP v2.0.0 that activation"
                    " checkpointing only works with FSDP wrapped by"
                    " `auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, ...)`."
                    f" This script checkpoints activations ({where}) and wraps the model with"
                    f" {spelled} {policy.wrapped}, so on that release the job does not get"
                    " the checkpointing it was sized for. Wrap by the model's transformer layer"
                    " class, `auto_wrap_policy=functools.partial(transformer_auto_wrap_policy,"
                    " transformer_layer_cls={TransformerLayer})`, or run a container with a later"
                    f" SMP v2 release ({self.version_condition()})."
                ),
                evidence=(
                    f"activation checkpointing: {where}",
                    f"the FSDP wrap {spelled} is wrapped {policy.wrapped}",
                ),
            )

    def _checkpointed_wrap(self, call: cst.Call, wraps: Sequence[cst.Call]) -> Optional[cst.Call]:
        """The FSDP wrap whose model ``call`` checkpoints, when its first argument names it."""
        if not call.args or call.args[0].keyword is not None:
            return None
        value = self.program.names.value(call.args[0].value)
        return next((wrap for wrap in wraps if wrap is value), None)

    # -- activation checkpointing -----------------------------------------------------------------
    def _checkpointing(self) -> Optional[tuple[str, Optional[cst.Call]]]:
        """Where the script (or a project module it imports) applies FSDP's activation
        checkpointing, and the call to report at when it is in this file."""
        own = _checkpointing_calls(self.program.facts)
        if own:
            name = self.program.code_for(own[0].func)
            return f"`{name}(...)` in this file", own[0]
        modules = self.program.modules
        if modules is None:
            return None
        for linked in modules.imported_closure(self.program.file, _DEPTH):
            found = _checkpointing_calls(linked.facts)
            if found:
                module = os.path.basename(linked.path)
                return f"`{linked.code_for(found[0].func)}(...)` in the imported {module}", None
        return None

    # -- the wrap's policy ------------------------------------------------------------------------
    def _policy_of(self, wrap: cst.Call) -> _Policy:
        passed = keyword(wrap, "auto_wrap_policy")
        if passed is None:
            if has_star_kwargs(wrap) or len(wrap.args) > 2:
                return _UNKNOWN  # passed by position or through **kwargs
            return _Policy(False, "without an auto-wrap policy")
        return _policy(self.program.file, passed.value, self._load, 0)

    def _load(self, facts: FileFacts, qualified: str) -> Optional[tuple[ParsedFile, str]]:
        modules = self.program.modules
        if modules is None or facts is not self.program.facts:
            return None
        return modules.definition(qualified)


def _checkpointing_calls(facts: FileFacts) -> Sequence[cst.Call]:
    """The file's FSDP activation checkpointing calls, ``apply_activation_checkpointing`` (what
    the script calls to checkpoint) before ``checkpoint_wrapper`` (what it may hand to it)."""
    found = [call for call in facts.call_order if facts.qualified_name(call.func) in _CHECKPOINTING]
    return sorted(found, key=lambda call: facts.qualified_name(call.func) != _APPLY)


def _policy(file: ParsedFile, expr: cst.BaseExpression, load: _Load, depth: int) -> _Policy:
    """What ``expr`` (in ``file``) makes an ``auto_wrap_policy``: followed through names
    assigned once and through the project's own functions that return one expression."""
    facts = file.facts
    expr = facts.names.value(expr)
    if type(expr) is cst.Name and expr.value == "None":
        return _Policy(False, "without an auto-wrap policy")
    if type(expr) is cst.Lambda:
        return _Policy(False, "by a lambda")
    if type(expr) is cst.Call:
        called = facts.qualified_name(expr.func)
        if called == "functools.partial" and expr.args:
            inner = facts.qualified_name(expr.args[0].value)
            if inner == _TRANSFORMER_POLICY:
                return _Policy(True)
            if inner is not None and inner.startswith(_WRAP):
                return _Policy(False, f"by `{inner.rsplit('.', 1)[-1]}`")
            return _local_policy_function(facts, expr.args[0].value)
        if called is not None and called.startswith(_WRAP):
            return _Policy(False, f"by `{called.rsplit('.', 1)[-1]}`")
        if depth < _DEPTH:
            returned = _returned(file, expr, load)
            if returned is not None:
                return _policy(returned[0], returned[1], load, depth + 1)
        return _UNKNOWN
    qualified = facts.qualified_name(expr)
    if qualified == _TRANSFORMER_POLICY:
        return _UNKNOWN  # the bare function needs its layer classes: not a working wrap either way
    if qualified is not None and qualified.startswith(_WRAP):
        return _Policy(False, f"by `{qualified.rsplit('.', 1)[-1]}`")
    return _local_policy_function(facts, expr)


def _local_policy_function(facts: FileFacts, expr: cst.BaseExpression) -> _Policy:
    """A policy function the file defines itself (``def my_policy(module, recurse, ...)``)."""
    if type(expr) is cst.Name and expr.value in facts.functions:
        return _Policy(False, f"by the script's own `{expr.value}`")
    return _UNKNOWN


def _returned(
    file: ParsedFile, call: cst.Call, load: _Load
) -> Optional[tuple[ParsedFile, cst.BaseExpression]]:
    """The one expression a call of the project's own function returns, with its file."""
    func = call.func
    target: Optional[tuple[ParsedFile, str]] = None
    if type(func) is cst.Name and func.value in file.facts.functions:
        target = (file, func.value)
    else:
        qualified = file.facts.qualified_name(func)
        if qualified is not None:
            target = load(file.facts, qualified)
    if target is None:
        return None
    owner, name = target
    function = owner.facts.functions.get(name)
    if function is None:
        return None
    returns = [
        node.value
        for node in own_nodes(function)
        if type(node) is cst.Return and node.value is not None
    ]
    return (owner, returns[0]) if len(returns) == 1 else None
