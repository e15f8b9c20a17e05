"""What a step returned, followed to each place it is used.

v1's ``@smp.step`` turned each tensor its function returned into a ``StepOutput`` (one value
per microbatch), and a tuple, list or dict display of tensors into the same container of
``StepOutput``s (``as_step_output`` in the 1.12 source). With the decorator gone the step
returns the tensor itself, so each use of a ``StepOutput`` is rewritten for the one value the
whole batch now gives (``torch/step.py`` and ``backend/split.py`` of 1.12):

- ``.reduce_mean()`` (``sum(x) / len(x)``), ``.reduce_sum()`` (``sum(x)``), ``.concat()``
  (``torch.cat(x, dim=0)``) and ``[0]``/``[-1]`` (the microbatch) are the tensor itself;
- ``.stack()`` (``torch.stack(x)``) is the tensor with a dimension in front: ``.unsqueeze(0)``;
- ``.outputs`` is the list of the microbatches' values: ``[x]``.

With several microbatches the batch now runs whole, which only the mean of the microbatches'
means and their concatenation stay equal to (a batch of equal microbatches): only those two
are rewritten then; the sum, the stack, the list and one microbatch's value are reported.

The value is followed through assignments (``out = step(...)``, ``_, loss = step(...)``,
``first, *rest = step(...)``, ``loss = out[1]``) to every use that assignment reaches. A use of
any other kind (passed to a function, returned, ``.map(f)``, iterated) is left as it was and
reported at its line, with a ``TODO``: the code there still expects a ``StepOutput``, and
claiming the step moved mechanically would leave it to fail at run time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Union

import libcst as cst

from smpfix.base.literals import literal_value
from smpfix.migrate import links
from smpfix.migrate.items import Outcome
from smpfix.migrate.script.context import Context
from smpfix.migrate.script.plan import ExpressionRewrite, todo_comment
from smpfix.program.names import Reaching
from smpfix.program.steps import returns_container

_OUTPUT = "a StepOutput"
_CONTAINER = "a container of StepOutputs"

# The reductions whose value, for one microbatch, is the microbatch's tensor itself; and
# those whose value for several is what the whole batch gives.
_ITSELF = frozenset({"reduce_mean", "reduce_sum", "concat"})
_WHOLE_BATCH = frozenset({"reduce_mean", "concat"})
_Assignment = Union[cst.Assign, cst.AnnAssign]


def migrate_step_outputs(
    ctx: Context, steps: Mapping[str, cst.FunctionDef], one_microbatch: bool
) -> None:
    """Rewrite every use of what a call of one of ``steps`` (name -> ``def``) returned."""
    follow = _Follow(ctx, steps, one_microbatch)
    for call in ctx.program.file.nodes_of(cst.Call):
        assert isinstance(call, cst.Call)
        func = call.func
        if type(func) is cst.Name and func.value in steps:
            container = returns_container(steps[func.value])
            follow.value(call, _CONTAINER if container else _OUTPUT, func.value)


@dataclass
class _Follow:
    ctx: Context
    steps: Mapping[str, cst.FunctionDef]
    one_microbatch: bool
    # The expressions already followed (a use two step assignments reach is rewritten once).
    seen: set[int] = field(default_factory=set)
    # (statement, value) reported: a value used twice in a statement is reported once.
    reported: set[tuple[int, str]] = field(default_factory=set)

    def value(self, node: cst.BaseExpression, kind: str, step: str) -> None:
        """``node`` holds ``kind`` from ``step``: rewrite, follow or report where it is used."""
        if id(node) in self.seen:
            return
        self.seen.add(id(node))
        parent = self.ctx.parent(node)
        if type(parent) is cst.Attribute and parent.value is node and kind == _OUTPUT:
            self._method(node, parent, step)
        elif type(parent) is cst.Subscript and parent.value is node:
            self._item(node, parent, kind, step)
        elif type(parent) is cst.Expr:
            return  # the result is not used
        elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node:
            targets = (
                [each.target for each in parent.targets]
                if isinstance(parent, cst.Assign)
                else [parent.target]
            )
            for target in targets:
                self._bind(parent, target, kind, step)
        else:
            self._manual(node, step)

    # -- uses --------------------------------------------------------------------------------
    def _method(self, node: cst.BaseExpression, attribute: cst.Attribute, step: str) -> None:
        name, one = attribute.attr.value, self.one_microbatch
        call = self.ctx.parent(attribute)
        if isinstance(call, cst.Call) and call.func is attribute:
            if not call.args and name in (_ITSELF if one else _WHOLE_BATCH):
                self._rewrite(call, _receiver, f"`.{name}()` on a step's result removed")
            elif not call.args and one and name == "stack":
                what = "`.stack()` on a step's result -> `.unsqueeze(0)`"
                self._rewrite(call, _unsqueezed, what)
            else:
                self._manual(node, step)
        elif one and name == "outputs":
            self._rewrite(attribute, _listed, "`.outputs` of a step's result -> `[result]`")
        else:
            self._manual(node, step)

    def _item(
        self, node: cst.BaseExpression, subscript: cst.Subscript, kind: str, step: str
    ) -> None:
        key = _index(subscript)
        if kind == _CONTAINER and isinstance(key, (int, str)) and not isinstance(key, bool):
            self.value(subscript, _OUTPUT, step)
        elif (
            kind == _OUTPUT and self.one_microbatch and key in (0, -1) and not isinstance(key, bool)
        ):
            self._rewrite(
                subscript, _subscripted, "a step's result indexed by microbatch -> the result"
            )
        else:
            self._manual(node, step)

    def _rewrite(self, node: cst.BaseExpression, rewrite: ExpressionRewrite, what: str) -> None:
        self.ctx.plan.replace(node, rewrite)
        self.ctx.plan.add(
            self.ctx.line(node),
            Outcome.MOVED,
            "step",
            f"{what}: the step returns the tensor",
            links.UPGRADE_FROM_V1,
        )

    def _manual(self, node: cst.CSTNode, step: str) -> None:
        statement = self.ctx.statement(node)
        spelled = self.ctx.program.code_for(node)
        if len(spelled) > 40 or "\n" in spelled:
            spelled = "this value"
        key = (id(statement) if statement is not None else id(node), spelled)
        if key in self.reported:
            return
        self.reported.add(key)
        what = (
            f"`{spelled}` is what `{step}` returned, a v1 StepOutput (one value per microbatch)"
            " used here in a way smpfix cannot rewrite; the step now returns the tensor itself:"
            " change this use to take the tensor"
        )
        if statement is not None:
            self.ctx.plan.comment(statement, todo_comment("step", what, links.UPGRADE_FROM_V1))
        self.ctx.plan.add(self.ctx.line(node), Outcome.REPORT, "step", what, links.UPGRADE_FROM_V1)

    # -- names -------------------------------------------------------------------------------
    def _bind(
        self, statement: _Assignment, target: cst.BaseExpression, kind: str, step: str
    ) -> None:
        if type(target) is cst.Name:
            self._name(statement, target.value, kind, step)
        elif isinstance(target, (cst.Tuple, cst.List)) and kind == _CONTAINER:
            for element in target.elements:
                inner = element.value
                if type(inner) is not cst.Name:
                    self._manual(target, step)
                elif isinstance(element, cst.StarredElement):
                    self._name(statement, inner.value, _CONTAINER, step)  # a list of them
                else:
                    self._name(statement, inner.value, _OUTPUT, step)
        else:
            self._manual(target, step)

    def _name(self, statement: _Assignment, name: str, kind: str, step: str) -> None:
        """Follow ``name``, bound by ``statement``, to each read that binding reaches."""
        names = self.ctx.program.facts.names
        for use in self.ctx.program.file.nodes_of(cst.Name):
            assert isinstance(use, cst.Name)
            if use.value != name or not self._is_read(use):
                continue
            reaching = names.reaching(name, use)
            if not _binds(reaching, statement):
                continue
            if self._only_step_results(reaching, 0):
                self.value(use, kind, step)
            else:
                self._manual(use, step)

    def _is_read(self, name: cst.Name) -> bool:
        """Whether ``name`` reads the variable (not a target, an attribute, a keyword)."""
        parent = self.ctx.parent(name)
        if isinstance(parent, cst.Attribute) and parent.attr is name:
            return False
        if isinstance(parent, cst.Arg) and parent.keyword is name:
            return False
        if isinstance(
            parent, (cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias, cst.NameItem)
        ):
            return False
        child: cst.CSTNode = name
        while isinstance(parent, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
            child, parent = parent, self.ctx.parent(parent)
        if isinstance(parent, (cst.AssignTarget, cst.AsName, cst.Del)):
            return False
        if isinstance(parent, (cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr)):
            return parent.target is not child
        return True

    def _only_step_results(self, reaching: Reaching, depth: int) -> bool:
        """Every definition that reaches is a step's result (or ``None``, which v1 could not
        reduce either)."""
        if depth > 5 or not (reaching.assignments or reaching.others):
            return False
        values: list[cst.BaseExpression] = [each.value for each in reaching.assignments]
        for other in reaching.others:
            if not isinstance(other, (cst.Assign, cst.AnnAssign)) or other.value is None:
                return False
            values.append(other.value)
        return all(self._is_step_result(value, depth) for value in values)

    def _is_step_result(self, value: cst.BaseExpression, depth: int) -> bool:
        if type(value) is cst.Name:
            if value.value == "None":
                return True
            reaching = self.ctx.program.facts.names.reaching(value.value, value)
            return self._only_step_results(reaching, depth + 1)
        if type(value) is cst.Subscript:
            return self._is_step_result(value.value, depth)
        return (
            type(value) is cst.Call
            and type(value.func) is cst.Name
            and value.func.value in self.steps
        )


def _binds(reaching: Reaching, statement: _Assignment) -> bool:
    """Whether ``statement`` is one of the definitions that reach."""
    return any(each.value is statement.value for each in reaching.assignments) or any(
        other is statement for other in reaching.others
    )


def _index(subscript: cst.Subscript) -> object:
    """The literal key of ``x[key]`` (``UNKNOWN`` when it is not a literal), else None."""
    if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
        return None
    return literal_value(subscript.slice[0].slice.value)


def _receiver(updated: cst.BaseExpression) -> cst.BaseExpression:
    assert isinstance(updated, cst.Call) and isinstance(updated.func, cst.Attribute)
    return updated.func.value


def _unsqueezed(updated: cst.BaseExpression) -> cst.BaseExpression:
    receiver = _receiver(updated)
    return cst.Call(cst.Attribute(receiver, cst.Name("unsqueeze")), [cst.Arg(cst.Integer("0"))])


def _listed(updated: cst.BaseExpression) -> cst.BaseExpression:
    assert isinstance(updated, cst.Attribute)
    return cst.List([cst.Element(updated.value)])


def _subscripted(updated: cst.BaseExpression) -> cst.BaseExpression:
    assert isinstance(updated, cst.Subscript)
    return updated.value
