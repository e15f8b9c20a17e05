"""SMP401: the wrapped model returns tensors that no step function uses, and each one is
broadcast."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Optional, Union

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.findings import Severity
from smpfix.base.flavour import BOTH
from smpfix.base.literals import UNKNOWN, literal_value
from smpfix.base.parents import CodeScope
from smpfix.base.positions import Positions
from smpfix.job.jobfacts import Tri
from smpfix.program.facts import FileFacts
from smpfix.program.objects.creation_contexts import enclosing_contexts
from smpfix.program.objects.hf_models import replaced_whole
from smpfix.program.objects.wrapped_model import (
    Construction,
    ModelClass,
    find_method,
    latest_assignment,
    model_class,
    wrapped_constructions,
)
from smpfix.program.tensorflow.models import with_imported_models
from smpfix.rules.rule import Rule, TensorParallelism
from smpfix.rules.step_function._model_output_use import OutputUse, output_use

_WHY = (
    "`smp.DistributedModel` broadcasts every tensor `{method}` returns from the rank that computed"
    " it to all other ranks, so each one costs communication and memory on every step"
)
# Hugging Face switches that add outputs, and the output each one adds.
_HF_FLAGS = {
    "output_hidden_states": ("hidden_states", "the hidden states of every layer"),
    "output_attentions": ("attentions", "the attention maps of every layer"),
    "use_cache": ("past_key_values", "every layer's key/value cache (`past_key_values`)"),
}
# What each switch adds, short enough for a title.
_HF_SHORT = {
    "output_hidden_states": "hidden states",
    "output_attentions": "attention maps",
    "use_cache": "key/value cache",
}
_HF_PREFIX = "transformers."
_LONGEST_QUOTE = 40


@dataclass(frozen=True)
class _Element:
    """One element of a returned tuple or dict: its 0-based position or its key."""

    where: Union[int, str]
    value: cst.BaseExpression


@dataclass(frozen=True)
class _Returned:
    statement: cst.Return
    by_key: bool
    elements: tuple[_Element, ...]


class ForwardReturnsIntermediates(Rule):
    flavours = BOTH
    summary = (
        "The wrapped model's `forward` (TensorFlow: `call`) returns tensors no step function uses"
        " (or Hugging Face `output_hidden_states`/`output_attentions`/`use_cache` is on); each is"
        " broadcast to all ranks."
    )
    # Only the Hugging Face config switches: they cost nothing on one pipeline stage when
    # tensor parallelism replaces the model whole (``_switches_unread``).
    depends_on = ("PP",)
    # The model class in model.py is followed from the script, and reported on the wrap there.
    runs_on_helper_modules = False
    tensor_parallelism = TensorParallelism.MARKING

    def leave_Module(self, node: cst.Module) -> None:
        if not self.program.facts.distributed_models and not self.program.facts.step_functions:
            return
        # A TensorFlow model is an instance of a `smp.DistributedModel` subclass, maybe from
        # model.py.
        facts = with_imported_models(self.program.facts, self.program.modules)
        use = output_use(facts)
        reported: set[int] = set()
        for wrap in facts.distributed_models:
            for built in wrapped_constructions(facts, wrap):
                if use.calls:
                    self._check_forward(wrap.call, built, use, reported)
                self._check_hf_config(built, wrap.target, use, reported)
        self._check_hf_call_flags(use, reported)

    # -- forward returns ---------------------------------------------------------------------
    def _check_forward(
        self, wrap_call: cst.Call, built: Construction, use: OutputUse, reported: set[int]
    ) -> None:
        cls = model_class(self.program.file, built.call, self.program.modules)
        if cls is None:
            return
        found = find_method(cls, self._method, self.program.modules)
        if found is None:
            return
        owner, forward = found
        for returned in _training_returns(forward, _passed_on(use)):
            unused = _unused(returned, use)
            if not unused:
                continue
            anchor: cst.CSTNode = returned.statement if owner.linked is None else wrap_call
            if id(anchor) in reported:
                continue
            reported.add(id(anchor))
            title, explanation, evidence = self._forward_message(cls, owner, returned, unused, use)
            self.report(
                anchor,
                title,
                explanation=explanation,
                evidence=evidence,
                severity=Severity.WARNING,
            )

    def _forward_message(
        self,
        cls: ModelClass,
        owner: ModelClass,
        returned: _Returned,
        unused: Sequence[_Element],
        use: OutputUse,
    ) -> tuple[str, str, tuple[str, ...]]:
        """The title, explanation and evidence of a ``forward`` that returns tensors no step
        function uses."""
        used = [e for e in returned.elements if e not in unused and _is_tensor_like(e.value)]
        count = sum(1 for e in returned.elements if _is_tensor_like(e.value))
        names = _join([_describe(owner, e, returned.by_key) for e in unused], "and")
        verb = "is" if len(unused) == 1 else "are"
        steps = _join([f"`{step}`" for step in use.steps], "or")
        name = self._method
        method = f"`{owner.name}.{name}`"
        if owner.node is not cls.node:
            method += f" (inherited by `{cls.name}`, the wrapped model)"
        lead = f"{method} returns {count} tensors, but {names} {verb} never used by {steps}"
        if owner.linked is not None:
            place = f"{self._relative(owner.linked.path)}, line {_line(owner, returned.statement)}"
            lead = (
                f"`{cls.name}`, wrapped here, returns {count} tensors from `{owner.name}.{name}`"
                f" ({place}), but {names} {verb} never used by {steps}"
            )
        keep = _join([f"`{_quote(owner, e.value)}`" for e in used], "and")
        who = "the step functions use" if len(use.steps) > 1 else "the step function uses"
        tensors = "tensor" if len(unused) == 1 else "tensors"
        subject = f"`{owner.name}.{name}`" if owner.linked is None else f"wrapped `{cls.name}`"
        title = f"{subject} returns {len(unused)} {tensors} no step function uses"
        explanation = f"{_WHY.format(method=name)}. Return only what {who} ({keep}) from `{name}`."
        return title, explanation, (lead,)

    @property
    def _method(self) -> str:
        """The model's forward pass: ``call`` for a TensorFlow (Keras) model, ``forward`` for
        PyTorch."""
        return "call" if self.program.facts.is_tensorflow else "forward"

    def _relative(self, path: str) -> str:
        here = os.path.dirname(os.path.abspath(self.program.path))
        relative = os.path.relpath(os.path.abspath(path), here)
        return path if relative.startswith("..") else relative

    # -- Hugging Face switches ---------------------------------------------------------------
    def _check_hf_config(
        self, built: Construction, wrapped_name: Optional[str], use: OutputUse, reported: set[int]
    ) -> None:
        """``GPT2Config(output_hidden_states=True)``, ``from_pretrained(...,
        output_attentions=True)``, ``config.use_cache = True`` for the model that gets wrapped."""
        call = built.call
        model_is_hf = (self.program.facts.qualified_name(call.func) or "").startswith(_HF_PREFIX)
        flags: list[tuple[str, cst.CSTNode]] = list(self._true_flags(call)) if model_is_hf else []
        config_arg = argument(call, "config", None if _is_from_pretrained(call) else 0)
        config_name: Optional[str] = None
        config_scope: CodeScope = built.scope
        config_call: Optional[cst.BaseExpression] = None
        if config_arg is not None:
            config_call = config_arg.value
            if type(config_call) is cst.Name:
                config_name = config_call.value
                assignment = latest_assignment(self.program.facts, config_call)
                config_call = assignment.value if assignment is not None else None
                if assignment is not None and assignment.where is not None:
                    config_scope = assignment.where.scope
            if type(config_call) is cst.Call:
                config_is_hf = (
                    self.program.facts.qualified_name(config_call.func) or ""
                ).startswith(_HF_PREFIX)
                if model_is_hf or config_is_hf:
                    flags.extend(self._true_flags(config_call))
                    model_is_hf = True
        if not model_is_hf or self._switches_unread(call, config_call):
            return
        owners = {name for name in (wrapped_name, _assigned_name(self.program.facts, call)) if name}
        switched_off: set[str] = set()
        for flag, statement, value in self._flag_assignments(
            config_name, owners, {built.scope, config_scope}
        ):
            if literal_value(value) is True:
                flags.append((flag, statement))
            else:
                switched_off.add(flag)
        for flag, node in flags:
            if flag not in switched_off:
                self._flag_switch(flag, node, use, reported, in_step=False)

    def _switches_unread(self, call: cst.Call, config: Optional[cst.BaseExpression]) -> bool:
        """Whether the config's switches cost nothing in this job: tensor parallelism replaces
        the model whole (``replaced_whole``; the model is built inside an enabled
        ``smp.tensor_parallelism()`` or ``smp.model_creation(tensor_parallelism=...)``), so its
        Hugging Face ``forward``, the only reader of the switches, never runs, and the pipeline
        degree is 1, so nothing would cross stages even where the library left the model as it
        is (1.12.1 replaces it only under the ``transformers`` releases it supports)."""
        if replaced_whole(self.program.facts, call, config) is None:
            return False
        if self.feature("PP", at=call).state is not Tri.OFF:
            return False
        stack = [*reversed(list(self.program.parents.ancestors(call))), call]
        return any(
            self._marks(context.call, context.member)
            for context in enclosing_contexts(self.program.facts, stack)
        )

    def _marks(self, context: cst.Call, member: str) -> bool:
        """Whether a ``with`` item marks the modules built inside it for tensor parallelism."""
        if member == "tensor_parallelism":
            enabled = argument(context, "enabled", 0)
        elif member == "model_creation":
            enabled = argument(context, "tensor_parallelism", 0)
            if enabled is None:
                return False
        else:
            return False
        if enabled is None:
            return True
        truth = self.program.conditions.truth(enabled.value)
        return truth.known and bool(truth.value)

    def _true_flags(self, call: cst.Call) -> Iterator[tuple[str, cst.CSTNode]]:
        for arg in call.args:
            if (
                arg.keyword is not None
                and arg.keyword.value in _HF_FLAGS
                and self.program.facts.literal(arg.value) is True
            ):
                yield arg.keyword.value, arg

    def _flag_assignments(
        self, config_name: Optional[str], models: set[str], scopes: set[CodeScope]
    ) -> Iterator[tuple[str, cst.Assign, cst.BaseExpression]]:
        """``config.output_hidden_states = ...`` and ``model.config.use_cache = ...`` in these
        scopes."""
        for statement, ref in self.program.facts.statements.items():
            if ref.scope not in scopes or type(statement) is not cst.SimpleStatementLine:
                continue
            for small in statement.body:
                if type(small) is not cst.Assign or len(small.targets) != 1:
                    continue
                target = small.targets[0].target
                if type(target) is not cst.Attribute or target.attr.value not in _HF_FLAGS:
                    continue
                holder = target.value
                if type(holder) is cst.Name and holder.value == config_name:
                    yield target.attr.value, small, small.value
                elif (
                    type(holder) is cst.Attribute
                    and holder.attr.value == "config"
                    and type(holder.value) is cst.Name
                    and holder.value.value in models
                ):
                    yield target.attr.value, small, small.value

    def _check_hf_call_flags(self, use: OutputUse, reported: set[int]) -> None:
        """``model(input_ids, output_hidden_states=True)`` inside a step function."""
        for model_call in use.calls:
            for flag, node in self._true_flags(model_call.call):
                self._flag_switch(flag, node, use, reported, in_step=True)

    def _flag_switch(
        self, flag: str, node: cst.CSTNode, use: OutputUse, reported: set[int], in_step: bool
    ) -> None:
        output, what = _HF_FLAGS[flag]
        if output in use.keys or id(node) in reported:
            return  # the step reads it (a distillation loss on hidden states, say): it is needed
        reported.add(id(node))
        where = "this call" if in_step else "the wrapped model"
        title = f"`{flag}=True` makes {where} return every layer's {_HF_SHORT[flag]}"
        readers = _join([f"`{step}`" for step in use.steps], "or")
        unread = f", which {readers} never reads" if readers and not use.whole else ""
        remedy = (
            "set `use_cache=False`"
            if flag == "use_cache"
            else f"leave `{flag}` off (it defaults to False)"
        )
        explanation = (
            f"It returns {what} from every forward pass{unread}:"
            f" {_WHY.format(method='forward')}. For training, {remedy}."
        )
        self.report(node, title, explanation=explanation, severity=Severity.WARNING)


def _training_returns(
    function: cst.FunctionDef, passed_on: frozenset[str] = frozenset()
) -> Iterator[_Returned]:
    """Tuple and dict returns of ``forward`` (``call``) on its training path.

    Returns in branches that only run in evaluation (``if not self.training:``, the ``else``
    of ``if self.training:``) or only when an off-by-default switch parameter is passed
    (``if return_hidden:`` with ``return_hidden=False``) are not what training pays for. A
    switch the step functions turn on (``passed_on``: Keras' ``model(x, training=True)``) is on.
    """
    switches = {
        param.name.value
        for param in (*function.params.params, *function.params.kwonly_params)
        if param.default is not None
        and literal_value(param.default) in (False, None)
        and param.name.value not in passed_on
    }
    for statement in _reachable_returns(function.body, switches):
        returned = _returned(statement)
        if returned is not None:
            yield returned


def _reachable_returns(block: cst.BaseSuite, switches: set[str]) -> Iterator[cst.Return]:
    statements: Sequence[cst.CSTNode] = block.body
    for statement in statements:
        if type(statement) is cst.Return:
            yield statement
        elif type(statement) is cst.SimpleStatementLine:
            yield from (small for small in statement.body if type(small) is cst.Return)
        elif type(statement) is cst.If:
            yield from _if_returns(statement, switches)
        elif isinstance(statement, (cst.For, cst.While, cst.With, cst.Try, cst.TryStar)):
            for suite in _suites(statement):
                yield from _reachable_returns(suite, switches)


def _if_returns(node: cst.If, switches: set[str]) -> Iterator[cst.Return]:
    skipped = _off_branch(node.test, switches)
    if skipped != "body":
        yield from _reachable_returns(node.body, switches)
    if node.orelse is not None and skipped != "orelse":
        if type(node.orelse) is cst.If:
            yield from _if_returns(node.orelse, switches)
        else:
            yield from _reachable_returns(node.orelse.body, switches)


def _off_branch(test: cst.BaseExpression, switches: set[str]) -> Optional[str]:
    """Which branch of ``if test:`` training does not take: "body", "orelse" or None."""
    negated = type(test) is cst.UnaryOperation and type(test.operator) is cst.Not
    inner = test.expression if type(test) is cst.UnaryOperation and negated else test
    if (
        type(inner) is cst.Attribute
        and inner.attr.value == "training"
        and type(inner.value) is cst.Name
        and inner.value.value == "self"
    ):
        return "body" if negated else "orelse"
    if type(inner) is cst.Name and inner.value in switches:
        return "orelse" if negated else "body"
    return None


def _suites(statement: cst.CSTNode) -> Iterator[cst.BaseSuite]:
    for name in ("body", "orelse", "finalbody"):
        part = getattr(statement, name, None)
        if isinstance(part, cst.BaseSuite):
            yield part
        elif part is not None and isinstance(getattr(part, "body", None), cst.BaseSuite):
            yield part.body
    for handler in getattr(statement, "handlers", ()):
        yield handler.body


def _returned(statement: cst.Return) -> Optional[_Returned]:
    value = statement.value
    elements: list[_Element] = []
    by_key = False
    if isinstance(value, (cst.Tuple, cst.List)):
        for index, item in enumerate(value.elements):
            if type(item) is cst.StarredElement:
                return None
            elements.append(_Element(index, item.value))
    elif type(value) is cst.Dict:
        by_key = True
        for entry in value.elements:
            key = literal_value(entry.key) if type(entry) is cst.DictElement else UNKNOWN
            if not isinstance(key, str):
                return None
            elements.append(_Element(key, entry.value))
    elif type(value) is cst.Call and type(value.func) is cst.Name and value.func.value == "dict":
        by_key = True
        for arg in value.args:
            if arg.keyword is None:
                return None
            elements.append(_Element(arg.keyword.value, arg.value))
    else:
        return None
    if sum(1 for e in elements if _is_tensor_like(e.value)) < 2:
        return None
    return _Returned(statement, by_key, tuple(elements))


def _passed_on(use: OutputUse) -> frozenset[str]:
    """Keywords the step functions pass as a literal True to the model (``training=True``)."""
    return frozenset(
        arg.keyword.value
        for call in use.calls
        for arg in call.call.args
        if arg.keyword is not None and literal_value(arg.value) is True
    )


def _is_tensor_like(value: cst.BaseExpression) -> bool:
    """Anything but a literal constant (``None``, a number, a string) may be a tensor."""
    return literal_value(value) is UNKNOWN


def _unused(returned: _Returned, use: OutputUse) -> list[_Element]:
    """The tensor elements no step reads; empty when the steps' use is unknown or mismatched."""
    if use.whole:
        return []
    if returned.by_key:
        keys = {e.where for e in returned.elements}
        if use.by_position or not (use.keys & keys):
            return []
        read: set[Union[int, str]] = set(use.keys)
    else:
        length = len(returned.elements)
        if use.keys or not use.fits(length):
            return []
        read = set(use.positions(length))
        if not read:
            return []
    return [e for e in returned.elements if e.where not in read and _is_tensor_like(e.value)]


def _describe(owner: ModelClass, element: _Element, by_key: bool) -> str:
    place = f'key "{element.where}"' if by_key else f"element {int(element.where) + 1}"
    return f"`{_quote(owner, element.value)}` ({place})"


def _quote(owner: ModelClass, node: cst.CSTNode) -> str:
    text = re.sub(r"\s+", " ", owner.code_for(node)).strip()
    return text if len(text) <= _LONGEST_QUOTE else text[: _LONGEST_QUOTE - 3] + "..."


def _line(owner: ModelClass, node: cst.CSTNode) -> int:
    assert owner.linked is not None
    positions = Positions(owner.module, owner.linked.text)
    return positions.position(positions.span(node)[0]).line


def _join(items: Sequence[str], word: str) -> str:
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {word} {items[-1]}"


def _is_from_pretrained(call: cst.Call) -> bool:
    return type(call.func) is cst.Attribute and call.func.attr.value == "from_pretrained"


def _assigned_name(facts: FileFacts, call: cst.Call) -> Optional[str]:
    """The plain name the model construction is assigned to (``model = GPT2LMHeadModel(...)``)."""
    for name, assignments in facts.assignments.items():
        if any(a.value is call for a in assignments):
            return name
    return None
