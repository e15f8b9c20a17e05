"""The arguments a call really receives, also through a local literal ``**kwargs`` dict.

Training scripts gather a DataLoader's settings in a dict and unpack it, often into several
loaders (the official MNIST example does exactly this):

    kwargs = {"batch_size": 64}
    kwargs.update({"num_workers": 1, "pin_memory": True, "shuffle": False})
    train_loader = DataLoader(train_set, **kwargs)

A rule asking "is ``drop_last`` passed?" must read those keys rather than give up at
``**kwargs``. The dict is followed through the function that builds it, in statement order,
up to the call: a literal (``{...}``, ``dict(k=v)``, ``{**base, ...}`` over literal dicts),
then ``.update({...})`` / ``.update(k=v)``, ``d["k"] = v``, ``.pop("k")``, ``del d["k"]`` and
``.clear()``. A change made in a branch or a loop body that the call is not in may or may not
have happened, so the key may then hold either value or be absent. Anything else done with the
dict before the call (passed to a function, aliased, rebound to a value that is not a literal)
makes its keys unknown, and so does a dict that is a parameter: the call then counts as one
whose arguments cannot be read, as any ``**kwargs`` did before.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Optional, Union

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.literals import literal_value
from smpfix.base.parents import CodeScope
from smpfix.base.walker import children
from smpfix.program.facts import FileFacts

# Methods that only read the dict.
_READS = frozenset({"get", "keys", "items", "values", "copy", "__contains__", "__getitem__"})
# Children of these nodes (by field) run only on some paths: a change there may not happen.
_CONDITIONAL_FIELDS: Mapping[type, tuple[str, ...]] = {
    cst.If: ("body", "orelse"),
    cst.For: ("body", "orelse"),
    cst.While: ("body", "orelse"),
    cst.Try: ("handlers", "orelse"),
    cst.IfExp: ("body", "orelse"),
    cst.BooleanOperation: ("right",),
}
_LOOPS = frozenset({cst.For, cst.While})
_NESTED_SCOPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})


@dataclass(frozen=True)
class Passed:
    """What a call passes for one parameter.

    ``values`` are the expressions it may receive (the call's own argument, or the dict
    entries that may reach it); ``maybe_absent`` says that on some path it receives none (its
    default); ``written`` is the call's own argument when the call spells it.
    """

    values: tuple[cst.BaseExpression, ...] = ()
    maybe_absent: bool = True
    written: Optional[cst.Arg] = None

    @property
    def absent(self) -> bool:
        """Certainly not passed: the parameter keeps its default."""
        return not self.values

    @property
    def certain(self) -> Optional[cst.BaseExpression]:
        """The one expression it certainly receives; None when absent or path-dependent."""
        return self.values[0] if len(self.values) == 1 and not self.maybe_absent else None

    @property
    def from_dict(self) -> bool:
        """Passed through a ``**`` dict rather than spelled in the call."""
        return self.written is None and bool(self.values)


ABSENT = Passed()


@dataclass(frozen=True)
class CallArguments:
    """A call's arguments, with the keys its ``**`` dicts pass."""

    call: cst.Call
    unpacked: Mapping[str, Passed]

    def passed(self, name: str, position: Optional[int] = None) -> Passed:
        """What the call passes for parameter ``name`` (keyword, or positional at ``position``)."""
        written = argument(self.call, name, position)
        if written is not None:
            return Passed((written.value,), False, written)
        return self.unpacked.get(name, ABSENT)


def call_arguments(call: cst.Call, facts: FileFacts) -> Optional[CallArguments]:
    """The call's arguments; None when a ``*args``, or a ``**`` dict smpfix cannot read, may
    pass anything."""
    unpacked: dict[str, Passed] = {}
    for arg in call.args:
        if arg.star == "*":
            return None
        if arg.star == "**":
            entries = _dict_keys(arg.value, call, facts, 0)
            if entries is None:
                return None
            unpacked.update(entries)
    return CallArguments(call, unpacked)


@dataclass(frozen=True)
class UnpackedLiteral:
    """The dict display a call's only ``**name`` comes from (``kwargs = {...}``, the one
    assignment to ``name`` in the call's scope), and whether this call is the only place that
    unpacks it (a key added to the display then reaches no other call)."""

    display: cst.Dict
    only_here: bool


def unpacked_dict_literal(call: cst.Call, facts: FileFacts) -> Optional[UnpackedLiteral]:
    """Where to add a keyword a call passes through ``**name``, so it is not passed twice
    (``f(**kwargs, k=v)`` raises once ``kwargs`` gains ``k``). None when the call unpacks
    something else, or more than one dict, or the name is bound more than once."""
    stars = [arg for arg in call.args if arg.star]
    if len(stars) != 1 or stars[0].star != "**" or type(stars[0].value) is not cst.Name:
        return None
    name = stars[0].value.value
    scope = facts.scope_of_call(call)
    if scope is None:
        return None
    body: Union[cst.BaseSuite, list[cst.BaseStatement]] = (
        scope.body if isinstance(scope, cst.FunctionDef) else list(scope.body)
    )
    displays: list[cst.Dict] = []
    bindings = unpacks = 0
    for node, parent, _nested in _walk(body, into_nested=True):
        if type(node) is not cst.Name or node.value != name:
            continue
        if type(parent) is cst.AssignTarget and parent.target is node:
            bindings += 1
        elif type(parent) in (cst.AugAssign, cst.AnnAssign, cst.For, cst.WithItem, cst.Param):
            bindings += 1
        elif type(parent) is cst.Arg and parent.star == "**":
            unpacks += 1
    for node, _parent, _nested in _walk(body, into_nested=False):
        if (
            type(node) is cst.Assign
            and len(node.targets) == 1
            and type(node.targets[0].target) is cst.Name
            and node.targets[0].target.value == name
            and type(node.value) is cst.Dict
        ):
            displays.append(node.value)
    if bindings != 1 or len(displays) != 1:
        return None
    return UnpackedLiteral(displays[0], unpacks == 1)


# -- the keys of a dict expression ----------------------------------------------------------------
Entries = dict[str, Passed]


def _dict_keys(
    expr: cst.BaseExpression, call: Optional[cst.Call], facts: FileFacts, depth: int
) -> Optional[Entries]:
    """The keys ``expr`` holds where ``call`` runs: a literal, or a name followed to the call."""
    if depth > 4:
        return None
    if type(expr) is cst.Name:
        return _name_keys(expr.value, call, facts, depth)
    return _literal_keys(expr, call, facts, depth)


def _literal_keys(
    expr: cst.BaseExpression, call: Optional[cst.Call], facts: FileFacts, depth: int
) -> Optional[Entries]:
    """``{"k": v, **base}``, ``dict(base, k=v)``, and ``a if cond else b`` over those (each
    key then as either branch has it); None for anything else."""
    entries: Entries = {}
    if type(expr) is cst.IfExp:
        body = _dict_keys(expr.body, call, facts, depth + 1)
        orelse = _dict_keys(expr.orelse, call, facts, depth + 1)
        return _merge(body, orelse) if body is not None and orelse is not None else None
    if type(expr) is cst.Dict:
        for element in expr.elements:
            if type(element) is cst.StarredDictElement:
                merged = _dict_keys(element.value, call, facts, depth + 1)
                if merged is None:
                    return None
                entries.update(merged)
                continue
            assert type(element) is cst.DictElement
            key = literal_value(element.key)
            if not isinstance(key, str):
                return None
            entries[key] = Passed((element.value,), False)
        return entries
    if (
        type(expr) is cst.Call
        and type(expr.func) is cst.Name
        and expr.func.value == "dict"
        and "dict" not in facts.imports.bindings
    ):
        for arg in expr.args:
            if arg.keyword is not None:
                entries[arg.keyword.value] = Passed((arg.value,), False)
                continue
            if arg.star == "*":
                return None
            merged = _dict_keys(arg.value, call, facts, depth + 1)
            if merged is None:
                return None
            entries.update(merged)
        return entries
    return None


def _name_keys(
    name: str, call: Optional[cst.Call], facts: FileFacts, depth: int
) -> Optional[Entries]:
    """The keys the dict bound to ``name`` holds when ``call`` runs (None: the end of the
    module)."""
    scope = facts.scope_of_call(call) if call is not None else None
    if scope is None:
        return None
    if type(scope) is cst.FunctionDef:
        params = scope.params
        every = (
            *params.posonly_params,
            *params.params,
            *params.kwonly_params,
            params.star_arg,
            params.star_kwarg,
        )
        if any(type(p) is cst.Param and p.name.value == name for p in every):
            return None
        bound_here = bool(facts.names.in_scope(name, scope))
        if not bound_here:
            # A module-level dict read in a function: any function may have changed it.
            module = _module_of(facts)
            if module is None or not _only_unpacked_in_functions(module, name):
                return None
            return _History(name, None, facts, depth).replay(module)
    return _History(name, call, facts, depth).replay(scope)


def _module_of(facts: FileFacts) -> Optional[cst.Module]:
    return next(
        (ref.scope for ref in facts.statements.values() if type(ref.scope) is cst.Module), None
    )


def _only_unpacked_in_functions(module: cst.Module, name: str) -> bool:
    """Inside functions, is ``name`` only ever unpacked (``f(**name)``)?"""
    for node, parent, nested in _walk(list(module.body), into_nested=True):
        if nested and type(node) is cst.Name and node.value == name:
            if not (type(parent) is cst.Arg and parent.star == "**" and parent.value is node):
                return False
    return True


# -- replaying what a function does to the dict ----------------------------------------------------
@dataclass(frozen=True)
class _Event:
    """One change to the dict: ``reset`` replaces every key; otherwise ``entries`` are set and
    ``removed`` keys deleted. ``unknown``: something smpfix cannot follow happened."""

    reset: bool = False
    entries: Optional[Entries] = None
    removed: tuple[str, ...] = ()
    unknown: bool = False


_UNKNOWN = _Event(unknown=True)


class _History:
    """Replays the statements of one scope that change the dict ``name``, up to ``call``."""

    def __init__(self, name: str, call: Optional[cst.Call], facts: FileFacts, depth: int) -> None:
        self.name = name
        self.call = call
        self.facts = facts
        self.depth = depth
        self.handled: set[int] = set()

    def replay(self, scope: CodeScope) -> Optional[Entries]:
        body: Union[cst.BaseSuite, list[cst.BaseStatement]] = (
            scope.body if isinstance(scope, cst.FunctionDef) else list(scope.body)
        )
        reached = False
        call_conditions: frozenset[int] = frozenset()
        call_loops: frozenset[int] = frozenset()
        # Each change with the blocks that hold it, and whether it comes after the call in a
        # loop holding both (it reaches the call on a later iteration, if there is one).
        changes: list[tuple[_Event, frozenset[int], bool]] = []
        for node, parent, conditions, loops in _walk_conditions(body):
            if node is self.call:
                reached = True
                call_conditions, call_loops = conditions, loops
                continue
            event = self._event(node, parent)
            if event is None:
                continue
            if not reached:
                changes.append((event, conditions, False))
            elif loops & call_loops:
                changes.append((event, conditions, True))
        if not reached and self.call is not None:
            return None
        state: Optional[Entries] = None
        for event, conditions, later in changes:
            state = _apply(state, event, certain=not later and conditions <= call_conditions)
            if state is None:
                return None
        return state

    def _event(self, node: cst.CSTNode, parent: Optional[cst.CSTNode]) -> Optional[_Event]:
        name = self.name
        if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = (
                [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            )
            found: Optional[_Event] = None
            for target in targets:
                if type(target) is cst.Name and target.value == name:
                    self.handled.add(id(target))
                    value = node.value
                    entries = (
                        None
                        if value is None or type(node) is cst.AugAssign
                        else _literal_keys(value, self.call, self.facts, self.depth + 1)
                    )
                    found = _Event(reset=True, entries=entries) if entries is not None else _UNKNOWN
                elif type(target) is cst.Subscript and _is_name(target.value, name):
                    self.handled.add(id(target.value))
                    key = _subscript_key(target)
                    value = node.value
                    found = (
                        _Event(entries={key: Passed((value,), False)})
                        if key is not None and value is not None
                        else _UNKNOWN
                    )
            return found
        if type(node) is cst.Del:
            deleted = node.target
            if type(deleted) is cst.Subscript and _is_name(deleted.value, name):
                self.handled.add(id(deleted.value))
                key = _subscript_key(deleted)
                return _Event(removed=(key,)) if key is not None else _UNKNOWN
            return None
        if (
            type(node) is cst.Call
            and type(node.func) is cst.Attribute
            and _is_name(node.func.value, name)
        ):
            self.handled.add(id(node.func.value))
            return self._method(node, node.func.attr.value)
        if type(node) is cst.Name and node.value == name and id(node) not in self.handled:
            return None if _is_read(node, parent) else _UNKNOWN
        return None

    def _method(self, call: cst.Call, method: str) -> Optional[_Event]:
        if method in _READS:
            return None
        if method == "clear" and not call.args:
            return _Event(reset=True, entries={})
        if method == "pop" and call.args and not call.args[0].keyword:
            key = literal_value(call.args[0].value)
            return _Event(removed=(key,)) if isinstance(key, str) else _UNKNOWN
        if method == "update":
            entries: Entries = {}
            for arg in call.args:
                if arg.keyword is not None:
                    entries[arg.keyword.value] = Passed((arg.value,), False)
                    continue
                merged = _dict_keys(arg.value, self.call, self.facts, self.depth + 1)
                if merged is None:
                    return _UNKNOWN
                entries.update(merged)
            return _Event(entries=entries)
        return _UNKNOWN


def _apply(state: Optional[Entries], event: _Event, certain: bool) -> Optional[Entries]:
    """The dict's keys after ``event`` (which happened for sure when ``certain``)."""
    if event.unknown:
        return None
    if event.reset:
        assert event.entries is not None
        if state is None or certain:
            return dict(event.entries)
        return _merge(state, event.entries)
    if state is None:
        return None  # changed before smpfix saw it bound
    result = dict(state)
    for key, passed in (event.entries or {}).items():
        result[key] = passed if certain else _either(result.get(key, ABSENT), passed)
    for key in event.removed:
        if certain:
            result.pop(key, None)
        elif key in result:
            result[key] = Passed(result[key].values, True)
    return result


def _either(first: Passed, second: Passed) -> Passed:
    values = first.values + tuple(v for v in second.values if all(v is not w for w in first.values))
    return Passed(values, first.maybe_absent or second.maybe_absent)


def _merge(first: Entries, second: Entries) -> Entries:
    return {
        key: _either(first.get(key, ABSENT), second.get(key, ABSENT)) for key in {**first, **second}
    }


def _is_name(expr: cst.BaseExpression, name: str) -> bool:
    return type(expr) is cst.Name and expr.value == name


def _subscript_key(target: cst.Subscript) -> Optional[str]:
    if len(target.slice) != 1 or type(target.slice[0].slice) is not cst.Index:
        return None
    key = literal_value(target.slice[0].slice.value)
    return key if isinstance(key, str) else None


def _is_read(node: cst.Name, parent: Optional[cst.CSTNode]) -> bool:
    """Uses of the dict that cannot change it: ``f(**d)``, ``d["k"]``, ``"k" in d``, ``len(d)``."""
    if type(parent) is cst.Arg:
        return parent.star == "**"
    if type(parent) is cst.Subscript:
        return parent.value is node
    return isinstance(parent, (cst.ComparisonTarget, cst.FormattedStringExpression))


# -- walking one scope in execution order ----------------------------------------------------------
def _walk(
    body: Union[cst.BaseSuite, list[cst.BaseStatement]], into_nested: bool
) -> Iterator[tuple[cst.CSTNode, Optional[cst.CSTNode], bool]]:
    """Every node in source order, with its parent and whether it is inside a nested scope."""
    roots = list(body) if isinstance(body, list) else [body]
    stack: list[tuple[cst.CSTNode, Optional[cst.CSTNode], bool]] = [
        (root, None, False) for root in reversed(roots)
    ]
    while stack:
        node, parent, nested = stack.pop()
        yield node, parent, nested
        inner = nested or type(node) in _NESTED_SCOPES
        if inner and not into_nested:
            continue
        stack.extend((child, node, inner) for child in reversed(children(node)))


def _walk_conditions(
    body: Union[cst.BaseSuite, list[cst.BaseStatement]],
) -> Iterator[tuple[cst.CSTNode, Optional[cst.CSTNode], frozenset[int], frozenset[int]]]:
    """Every node of one scope in source order (nested functions and classes left out), with
    its parent, the conditional blocks holding it and the loop bodies holding it (by id)."""
    roots = list(body) if isinstance(body, list) else [body]
    empty: frozenset[int] = frozenset()
    stack: list[tuple[cst.CSTNode, Optional[cst.CSTNode], frozenset[int], frozenset[int]]] = [
        (root, None, empty, empty) for root in reversed(roots)
    ]
    while stack:
        node, parent, conditions, loops = stack.pop()
        yield node, parent, conditions, loops
        if type(node) in _NESTED_SCOPES:
            continue
        fields = _CONDITIONAL_FIELDS.get(type(node), ())
        conditional = [getattr(node, f) for f in fields]
        items: list[tuple[cst.CSTNode, Optional[cst.CSTNode], frozenset[int], frozenset[int]]] = []
        for child in children(node):
            inside = [
                held
                for held in conditional
                if held is child or (isinstance(held, (tuple, list)) and child in held)
            ]
            child_conditions = conditions | {id(child)} if inside else conditions
            child_loops = (
                loops | {id(child)}
                if inside and type(node) in _LOOPS and child is node.body  # type: ignore[attr-defined]
                else loops
            )
            items.append((child, node, child_conditions, child_loops))
        stack.extend(reversed(items))
