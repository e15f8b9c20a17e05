"""What a model's own switch attribute holds: ``if self._checkpoint_activations:``.

Model code keeps features behind attributes set from the model's configuration or by a
setter the training script calls, off unless someone turns them on:

- ``self._checkpoint_activations = config.checkpoint_activations``, where the configuration
  class defaults it (``def __init__(self, ..., checkpoint_activations=False)``), or
  ``getattr(config, "checkpoint_activations", False)``: the default, which another
  configuration can change;
- ``self._checkpoint_activations = False`` in ``__init__`` and ``module._checkpoint_activations
  = val`` in a method ``checkpoint_activations(self, val)`` that the script calls with
  ``args.checkpoint_activations``: the values the calls pass (a flag's default, a launcher's
  hyperparameter), or the ``__init__`` value when nothing smpfix sees calls the setter.

``object_switch`` folds these into one value when every way of setting the attribute agrees on
its truth, and says it rests on a switch (``assumed``) unless only literals set it. Anything
else (an assignment of another expression, setters whose callers disagree) is unknown.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.literals import UNKNOWN
from smpfix.program.facts import FileFacts


@dataclass(frozen=True)
class SwitchValue:
    """A switch's value (never ``UNKNOWN``), whether a configuration can change it, and how."""

    value: Any
    assumed: bool
    how: tuple[str, ...]


# Evaluates an expression of the script (a setter's argument) to its truth.
Truth = Callable[[cst.BaseExpression], Optional[SwitchValue]]


@dataclass(frozen=True)
class _Setting:
    value: Optional[cst.BaseExpression]
    function: Optional[cst.FunctionDef]
    facts: FileFacts


def object_switch(
    attribute: str, owners: Sequence[FileFacts], classes: Sequence[FileFacts], truth: Truth
) -> Optional[SwitchValue]:
    """The value of ``self.<attribute>`` set in ``owners`` (the model's file and the scripts
    using it), with configuration classes looked up in ``classes``; None when unknown."""
    settings = list(_settings(attribute, owners))
    if not settings:
        return None
    found: list[SwitchValue] = []
    unseen: list[str] = []  # setters that nothing smpfix sees calls
    for setting in settings:
        value = _setting_value(setting, owners, classes, truth)
        if value is None:
            return None
        if isinstance(value, SwitchValue):
            found.append(value)
        elif isinstance(value, _Uncalled):
            unseen.append(value.setter)
    if not found or len({bool(value.value) for value in found}) != 1:
        return None
    switched = [value for value in found if value.assumed]
    how = tuple(part for value in switched for part in value.how)
    if unseen and not how:
        how = (f"it is {found[0].value!r} unless its setter `{unseen[0]}` is called to change it",)
    return SwitchValue(found[0].value, bool(unseen or switched), how)


@dataclass(frozen=True)
class _Uncalled:
    """A setter that no call smpfix sees calls."""

    setter: str


def _settings(attribute: str, owners: Sequence[FileFacts]) -> Iterable[_Setting]:
    for facts in owners:
        for statement, where in facts.statements.items():
            if type(statement) is not cst.SimpleStatementLine:
                continue
            function = where.scope if type(where.scope) is cst.FunctionDef else None
            for small in statement.body:
                if type(small) is cst.Assign:
                    for target in small.targets:
                        if _sets(target.target, attribute):
                            single = small.value if len(small.targets) == 1 else None
                            yield _Setting(single, function, facts)
                elif type(small) in (cst.AnnAssign, cst.AugAssign) and _sets(
                    small.target,  # type: ignore[attr-defined]
                    attribute,
                ):
                    value = small.value if type(small) is cst.AnnAssign else None
                    yield _Setting(value, function, facts)  # type: ignore[arg-type]


def _sets(target: cst.BaseExpression, attribute: str) -> bool:
    return (
        type(target) is cst.Attribute
        and target.attr.value == attribute
        and type(target.value) is cst.Name
    )


def _setting_value(
    setting: _Setting, owners: Sequence[FileFacts], classes: Sequence[FileFacts], truth: Truth
) -> Optional[object]:
    value, facts = setting.value, setting.facts
    if value is None:
        return None
    literal = facts.literal(value)
    if literal is not UNKNOWN:
        return SwitchValue(literal, False, ())
    read = _configuration_read(value, facts, classes)
    if read is not None:
        return read
    if type(value) is cst.Name and setting.function is not None:
        setter = _defining(value.value, setting.function, facts)
        if setter is not None:
            return _passed_to_setter(value.value, setter, owners, truth)
    return None


def _defining(
    parameter: str, function: cst.FunctionDef, facts: FileFacts
) -> Optional[cst.FunctionDef]:
    """The function, ``function`` or one around it, whose parameter ``parameter`` is: BERT's
    setter hands ``val`` to a nested ``_apply_flag(module)`` that ``self.apply`` runs."""
    current: Optional[cst.FunctionDef] = function
    while current is not None:
        if any(param.name.value == parameter for param in current.params.params):
            return current
        where = facts.statements.get(current)
        current = (
            where.scope if where is not None and type(where.scope) is cst.FunctionDef else None
        )
    return None


def _configuration_read(
    value: cst.BaseExpression, facts: FileFacts, classes: Sequence[FileFacts]
) -> Optional[SwitchValue]:
    """``getattr(config, "x", False)``, or ``config.x`` with a default in a local class."""
    if (
        type(value) is cst.Call
        and type(value.func) is cst.Name
        and value.func.value == "getattr"
        and len(value.args) == 3
    ):
        name, default = facts.literal(value.args[1].value), facts.literal(value.args[2].value)
        if isinstance(name, str) and default is not UNKNOWN:
            return SwitchValue(default, True, (f"`{name}` defaults to {default!r}",))
        return None
    if type(value) is cst.Attribute and type(value.value) is cst.Name:
        default = _class_default(value.attr.value, classes)
        if default is not UNKNOWN:
            shown = f"`{value.value.value}.{value.attr.value}`"
            return SwitchValue(default, True, (f"{shown} defaults to {default!r}",))
    return None


def _class_default(name: str, classes: Sequence[FileFacts]) -> Any:
    """The one literal default that local classes give ``name``: an ``__init__`` parameter
    stored under its own name, or a class attribute; UNKNOWN when none or several."""
    found: list[Any] = []
    for facts in classes:
        for node in facts.classes.values():
            for statement in node.body.body:
                if type(statement) is cst.FunctionDef and statement.name.value == "__init__":
                    for param in (*statement.params.params, *statement.params.kwonly_params):
                        if param.name.value == name and param.default is not None:
                            found.append(facts.literal(param.default))
                elif type(statement) is cst.SimpleStatementLine:
                    for small in statement.body:
                        target = getattr(small, "target", None) or (
                            small.targets[0].target
                            if type(small) is cst.Assign and len(small.targets) == 1
                            else None
                        )
                        value = getattr(small, "value", None)
                        if type(target) is cst.Name and target.value == name and value is not None:
                            found.append(facts.literal(value))
    values = {repr(value) for value in found}
    return found[0] if len(values) == 1 else UNKNOWN


def _passed_to_setter(
    parameter: str, function: cst.FunctionDef, owners: Sequence[FileFacts], truth: Truth
) -> Optional[object]:
    """What the calls of the setter ``function`` pass for ``parameter``: one value when every
    call agrees, ``_Uncalled`` when nothing smpfix sees calls it, None when unknown."""
    params = [param.name.value for param in function.params.params]
    if parameter not in params:
        return None
    position = params.index(parameter) - (1 if params and params[0] == "self" else 0)
    found: list[SwitchValue] = []
    for facts in owners:
        for call in _calls_named(facts, function.name.value):
            passed = argument(call, parameter, position)
            if passed is None:
                return None
            value = truth(passed.value)
            if value is None:
                return None
            found.append(value)
    if not found:
        return _Uncalled(function.name.value)
    if len({bool(value.value) for value in found}) != 1:
        return None
    return SwitchValue(
        found[0].value,
        any(value.assumed for value in found),
        tuple(part for value in found for part in value.how),
    )


def _calls_named(facts: FileFacts, name: str) -> Iterable[cst.Call]:
    """Calls of ``name`` as a method or a plain function (``model.checkpoint_activations(x)``)."""
    for call in facts.call_order:
        func = call.func
        if (type(func) is cst.Attribute and func.attr.value == name) or (
            type(func) is cst.Name and func.value == name
        ):
            yield call
