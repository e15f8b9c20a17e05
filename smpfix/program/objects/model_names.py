"""Which names hold the ``smp.DistributedModel`` inside a given function.

The wrapped model reaches code under three kinds of names: the target of the
``smp.DistributedModel(...)`` assignment (a global or a local of the function that wraps),
a parameter that callers pass it to (``def train_step(model, x)`` called as
``train_step(model, x)``; for ``train_step = smp.step(f)`` the calls of ``train_step``
count), and a parameter spelled like the wrapped name. A local rebinding hides a global.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import libcst as cst

from smpfix.base.call_binding import bind_arguments
from smpfix.base.calls import bound_names
from smpfix.program.facts import FileFacts
from smpfix.program.project.parsed_file import ParsedFile
from smpfix.program.steps import StepFunction, StepFunctions


def parameter_names(function: cst.FunctionDef) -> frozenset[str]:
    params = function.params
    names = [
        param.name.value
        for param in (*params.posonly_params, *params.params, *params.kwonly_params)
    ]
    for star in (params.star_arg, params.star_kwarg):
        if type(star) is cst.Param:
            names.append(star.name.value)
    return frozenset(names)


class DistributedModelNames:
    """Answers "is this name the wrapped model here?" for one file, worked out once per tree
    (``ParsedFile.answer``) for every rule that asks."""

    @classmethod
    def of_file(cls, file: ParsedFile) -> DistributedModelNames:
        return cls(file.facts, file.answer(StepFunctions))

    def __init__(
        self,
        facts: FileFacts,
        steps: Sequence[StepFunction],
        calls: Optional[Mapping[str, tuple[cst.Call, ...]]] = None,
    ) -> None:
        self.facts = facts
        self.targets = facts.distributed_model_names()
        self.calls = calls if calls is not None else facts.calls_by_name
        self.module_targets: set[str] = set()
        self.local_targets: dict[cst.FunctionDef, set[str]] = {}
        for wrap in facts.distributed_models:
            if wrap.target is None:
                continue
            scope = wrap.where.scope if wrap.where is not None else None
            if type(scope) is cst.FunctionDef:
                self.local_targets.setdefault(scope, set()).add(wrap.target)
            else:
                self.module_targets.add(wrap.target)
        self.step_names: dict[cst.FunctionDef, set[str]] = {}
        for step in steps:
            if step.function is not None:
                self.step_names.setdefault(step.function, set()).add(step.name)
        self._wrapped_names = self.module_targets.union(*self.local_targets.values())
        self._parameters: dict[cst.FunctionDef, frozenset[str]] = {}
        self._parameter_names: dict[cst.FunctionDef, frozenset[str]] = {}
        self._bound: dict[cst.FunctionDef, frozenset[str]] = {}

    def caller_names(self, function: cst.FunctionDef) -> set[str]:
        return {function.name.value, *self.step_names.get(function, ())}

    def calls_of(self, function: cst.FunctionDef) -> list[cst.Call]:
        return [
            call
            for name in sorted(self.caller_names(function))
            for call in self.calls.get(name, ())
        ]

    def parameters_receiving_model(self, function: cst.FunctionDef) -> frozenset[str]:
        """Parameters the wrapped model is passed to (at some call site), or spelled like it."""
        cached = self._parameters.get(function)
        if cached is not None:
            return cached
        found = {name for name in parameter_names(function) if name in self.targets}
        for call in self.calls_of(function):
            bound = bind_arguments(function, call)
            for param, value in (bound or {}).items():
                if type(value) is cst.Name and value.value in self.targets:
                    found.add(param)
        result = frozenset(found)
        self._parameters[function] = result
        return result

    def _bound_in(self, function: cst.FunctionDef) -> frozenset[str]:
        cached = self._bound.get(function)
        if cached is None:
            cached = frozenset(bound_names(function.body)) | self._parameters_of(function)
            self._bound[function] = cached
        return cached

    def _parameters_of(self, function: cst.FunctionDef) -> frozenset[str]:
        known = self._parameter_names.get(function)
        if known is None:
            known = self._parameter_names[function] = parameter_names(function)
        return known

    def holds_model(self, name: str, functions: Sequence[cst.FunctionDef]) -> bool:
        """Is ``name`` the wrapped model inside ``functions`` (outermost first, innermost last)?"""
        if name not in self._wrapped_names and not any(
            name in self._parameters_of(function) for function in functions
        ):
            return False  # most names called (``print``, ``len``) are neither
        for function in reversed(functions):
            if name in self._parameters_of(function):
                return name in self.parameters_receiving_model(function)
            if name in self.local_targets.get(function, ()):
                return True
            if name in self._bound_in(function):
                return False
        return name in self.module_targets

    def names_in_scope(self, functions: Sequence[cst.FunctionDef]) -> frozenset[str]:
        """The model names visible here, nearest first: parameters, then locals, then globals.

        Only the nearest kind that has any is returned: a step that receives the model as a
        parameter names it that way even if a global also holds it.
        """
        for function in reversed(functions):
            params = self.parameters_receiving_model(function)
            if params:
                return params
            local = self.local_targets.get(function)
            if local:
                return frozenset(local)
        shadowed = (
            set().union(*(self._bound_in(function) for function in functions))
            if functions
            else set()
        )
        return frozenset(name for name in self.module_targets if name not in shadowed)
