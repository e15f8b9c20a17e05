"""Which parts of the wrapped model's output the step functions read.

``smp.DistributedModel`` broadcasts every tensor its ``forward`` returns, so a rule that asks
"is this returned tensor needed?" must know how the step functions (the only place the
wrapped model runs) use the output of ``model(...)``. The answer is a small data-flow summary
over each step function's body:

- ``logits, hidden, attn = model(x)``: the positions whose target names are read later
  (``_`` and names never read are not), with ``*rest`` covering a range;
- ``model(x)[0]``, ``out[0]``, ``out[1:]``, ``out["logits"]``, ``out.logits``,
  ``out.get("logits")``: the position, range or key;
- anything else (the output returned, passed to a function, iterated, indexed by a variable,
  a method called on it) uses the output as a *whole*: every element counts as used.

Which names hold the model inside a step function is ``model_names``' answer (parameters
that receive the ``DistributedModel`` at the step's call sites or are spelled like it, else
the wrapped name itself), plus a parameter called ``model`` when the file wraps the model
without binding a name (a builder function returns ``smp.DistributedModel(net)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Optional, Union

import libcst as cst

from smpfix.base.walker import iter_nodes
from smpfix.program.facts import FileFacts
from smpfix.program.objects.model_names import DistributedModelNames
from smpfix.program.steps import positional_parameters, step_functions

Slice = tuple[Optional[int], Optional[int]]


@dataclass(frozen=True)
class ModelCall:
    """``model(...)`` inside step function ``step``."""

    call: cst.Call
    step: str


@dataclass(frozen=True)
class OutputUse:
    """What the step functions read of the model's output, summed over every model call."""

    calls: tuple[ModelCall, ...] = ()
    whole: bool = False
    indices: frozenset[int] = field(default=frozenset())
    ranges: frozenset[Slice] = field(default=frozenset())
    keys: frozenset[str] = field(default=frozenset())
    # Tuple-unpacking shapes: (number of plain targets, whether a `*rest` target is present).
    unpack_shapes: frozenset[tuple[int, bool]] = field(default=frozenset())

    @property
    def steps(self) -> tuple[str, ...]:
        """The step functions that call the model, in file order."""
        seen: list[str] = []
        for call in self.calls:
            if call.step not in seen:
                seen.append(call.step)
        return tuple(seen)

    @property
    def by_position(self) -> bool:
        return bool(self.indices or self.ranges or self.unpack_shapes)

    def fits(self, length: int) -> bool:
        """Could every unpacking in the steps receive a sequence of ``length`` elements?"""
        return all(
            length >= count if star else length == count for count, star in self.unpack_shapes
        )

    def positions(self, length: int) -> frozenset[int]:
        """The 0-based positions read, for an output of ``length`` elements."""
        found = {index % length for index in self.indices if -length <= index < length}
        for start, stop in self.ranges:
            found.update(range(*slice(start, stop).indices(length)))
        return frozenset(found)


def output_use(facts: FileFacts) -> OutputUse:
    """How every step function in the file uses the wrapped model's output."""
    use = _Accumulator()
    steps = step_functions(facts)
    holders = DistributedModelNames(facts, steps)
    for step in steps:
        if step.function is None:
            continue
        names = holders.names_in_scope([step.function])
        if not names and not holders.targets and "model" in positional_parameters(step.function):
            # Wrapped without binding a name in this file (a builder returns it): the usual name.
            names = frozenset({"model"})
        if not names:
            continue
        body = _StepBody(step.function, facts)
        for node in body.nodes:
            if type(node) is cst.Call and type(node.func) is cst.Name and node.func.value in names:
                use.calls.append(ModelCall(node, step.name))
                body.classify(node, use, depth=0)
    return use.freeze()


class _Accumulator:
    def __init__(self) -> None:
        self.calls: list[ModelCall] = []
        self.whole = False
        self.indices: set[int] = set()
        self.ranges: set[Slice] = set()
        self.keys: set[str] = set()
        self.unpack_shapes: set[tuple[int, bool]] = set()

    def freeze(self) -> OutputUse:
        return OutputUse(
            tuple(self.calls),
            self.whole,
            frozenset(self.indices),
            frozenset(self.ranges),
            frozenset(self.keys),
            frozenset(self.unpack_shapes),
        )


_Target = Union[cst.BaseAssignTargetExpression, cst.BaseExpression]


class _StepBody:
    """One step function's nodes, where each value expression is used, and which names are read.

    ``holders`` maps an expression to the node that uses it as its value (the subscript,
    attribute, assignment or call it is the base of); any other use is not recorded, and
    ``classify`` takes that as a use of the whole output. Node types are compared with
    ``type(...) is`` because ``isinstance`` on LibCST's abstract node classes is slow, and
    this runs over every step function of every script.
    """

    _MAX_DEPTH = 4

    def __init__(self, function: cst.FunctionDef, facts: FileFacts) -> None:
        self.facts = facts
        self.nodes = iter_nodes(function.body)
        holders: dict[int, cst.CSTNode] = {}
        not_reads: set[int] = set()
        names: list[cst.Name] = []
        for node in self.nodes:
            kind = type(node)
            if type(node) is cst.Name:
                names.append(node)
            elif type(node) is cst.Attribute:
                holders[id(node.value)] = node
                not_reads.add(id(node.attr))
            elif type(node) is cst.Subscript:
                holders[id(node.value)] = node
            elif type(node) is cst.Call:
                holders[id(node.func)] = node
            elif type(node) is cst.Arg:
                if node.keyword is not None:
                    not_reads.add(id(node.keyword))
            elif kind in _BINDING_TYPES:
                if type(node) is cst.Assign or (
                    type(node) is cst.AnnAssign and node.value is not None
                ):
                    holders[id(node.value)] = node
                not_reads.update(_bound_name_ids(node))
        self.holders = holders
        self.reads: dict[str, list[cst.Name]] = {}
        for name in names:
            if id(name) not in not_reads:
                self.reads.setdefault(name.value, []).append(name)

    def is_read(self, name: str) -> bool:
        return bool(self.reads.get(name))

    def classify(self, value: cst.BaseExpression, use: _Accumulator, depth: int) -> None:
        """Record how the expression ``value`` (the model call, or a name holding it) is used."""
        parent = self.holders.get(id(value))
        if type(parent) is cst.Subscript:
            self._subscript(parent, use)
        elif type(parent) is cst.Attribute:
            self._attribute(parent, use)
        elif type(parent) is cst.Assign and len(parent.targets) == 1:
            self._assigned(parent.targets[0].target, use, depth)
        elif type(parent) is cst.AnnAssign:
            self._assigned(parent.target, use, depth)
        else:
            use.whole = True

    def _subscript(self, node: cst.Subscript, use: _Accumulator) -> None:
        if len(node.slice) != 1:
            use.whole = True
            return
        item = node.slice[0].slice
        if type(item) is cst.Index:
            key = self.facts.literal(item.value)
            if isinstance(key, bool):
                use.whole = True
            elif isinstance(key, int):
                use.indices.add(key)
            elif isinstance(key, str):
                use.keys.add(key)
            else:
                use.whole = True
            return
        if type(item) is not cst.Slice or item.step is not None:
            use.whole = True
            return
        lower, upper = self._bound(item.lower), self._bound(item.upper)
        if lower is False or upper is False:
            use.whole = True
            return
        use.ranges.add((lower, upper))

    def _bound(self, part: Optional[cst.BaseExpression]) -> Union[int, None, Literal[False]]:
        """A slice bound: its int, None when absent, False when it cannot be known."""
        if part is None:
            return None
        value = self.facts.literal(part)
        return value if isinstance(value, int) and not isinstance(value, bool) else False

    def _attribute(self, node: cst.Attribute, use: _Accumulator) -> None:
        parent = self.holders.get(id(node))
        if type(parent) is cst.Call:
            key = (
                self.facts.literal(parent.args[0].value)
                if node.attr.value == "get" and parent.args
                else None
            )
            if isinstance(key, str):
                use.keys.add(key)
            else:
                use.whole = True  # `out.items()`, `out.float()`: the output as a whole
            return
        use.keys.add(node.attr.value)

    def _assigned(self, target: _Target, use: _Accumulator, depth: int) -> None:
        if type(target) is cst.Name:
            if depth >= self._MAX_DEPTH:
                use.whole = True
                return
            for read in self.reads.get(target.value, ()):
                self.classify(read, use, depth + 1)
        elif isinstance(target, (cst.Tuple, cst.List)):
            self._unpacked(target.elements, use)
        else:
            use.whole = True  # `self.out = model(x)`: stored somewhere this cannot follow

    def _unpacked(self, elements: Sequence[cst.BaseElement], use: _Accumulator) -> None:
        star = next((i for i, e in enumerate(elements) if type(e) is cst.StarredElement), None)
        use.unpack_shapes.add((len(elements) - (1 if star is not None else 0), star is not None))
        after = len(elements) - star - 1 if star is not None else 0
        for index, element in enumerate(elements):
            position = index if star is None or index < star else index - len(elements)
            if type(element) is cst.StarredElement:
                if type(element.value) is not cst.Name or self.is_read(element.value.value):
                    use.ranges.add((index, -after or None))
            elif type(element.value) is not cst.Name or self.is_read(element.value.value):
                use.indices.add(position)


_BINDING_TYPES = frozenset(
    {
        cst.Assign,
        cst.AnnAssign,
        cst.AugAssign,
        cst.For,
        cst.CompFor,
        cst.WithItem,
        cst.NamedExpr,
        cst.Del,
        cst.ExceptHandler,
        cst.Param,
        cst.FunctionDef,
        cst.ClassDef,
        cst.Global,
        cst.Nonlocal,
        cst.Import,
        cst.ImportFrom,
    }
)


def _bound_name_ids(node: cst.CSTNode) -> list[int]:
    """Ids of the names ``node`` binds rather than reads (``x`` in ``x = ...``, ``for x in``)."""
    found: list[int] = []

    def mark(target: Optional[cst.CSTNode]) -> None:
        if type(target) is cst.Name:
            found.append(id(target))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                mark(element.value)
        elif type(target) is cst.StarredElement:
            mark(target.value)

    if type(node) is cst.Assign:
        for target in node.targets:
            mark(target.target)
    elif isinstance(node, (cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.Del)):
        mark(node.target)
    elif type(node) is cst.WithItem:
        mark(node.asname.name if node.asname is not None else None)
    elif type(node) is cst.ExceptHandler:
        mark(node.name.name if node.name is not None else None)
    elif isinstance(node, (cst.Param, cst.FunctionDef, cst.ClassDef)):
        found.append(id(node.name))
    elif isinstance(node, (cst.Global, cst.Nonlocal)):
        found.extend(id(item.name) for item in node.names)
    elif isinstance(node, (cst.Import, cst.ImportFrom)):
        found.extend(id(inner) for inner in iter_nodes(node))
    return found
