"""Where a value built at one place can go, within one file.

Rules follow a few kinds of objects from where they are built to where they are used: a
``DataLoader`` to the loop that trains on its batches, a ``DistributedSampler`` to the
loader that should receive it. Training scripts move them around in a handful of ways, all
followed here:

- bound to names and aliases (``loader = DataLoader(...)``, ``train_iter = loader``),
  through conditional expressions (``tqdm(loader) if main else loader``) and ``x or y``;
- through calls that hand back what they were given (``enumerate``, ``zip``, ``iter``,
  ``tqdm`` for loaders; whatever the caller says carries the value);
- into local functions (``train(model, loader)`` reaches the parameter ``loader``) and out
  of them (``loader = make_loader(args)``), also as one element of a returned tuple
  (``train, val = make_loaders()``);
- through a thread or process pool: ``future = pool.submit(make_loader, ...)`` then
  ``future.result()`` is what ``make_loader`` returned.

Each way the value leaves what can be followed is an ``End``: a ``for`` loop iterating it, a
call it is passed to (``DataLoader(ds, sampler=s)``, ``next(it)``), a method called on it
(``sampler.set_epoch(e)``), or an escape (stored in an attribute or a container, yielded,
passed to a local function that cannot be bound). A value that escapes may be used anywhere:
rules that need to know every use treat an escape as "used somewhere smpfix cannot see".
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Callable, Optional

import libcst as cst

from smpfix.base.call_binding import argument_parameter
from smpfix.base.parents import CodeScope, ParentIndex
from smpfix.program.facts import FileFacts
from smpfix.program.project.parsed_file import ParsedFile

_MAX_DEPTH = 4


class EndKind(str, enum.Enum):
    LOOP = "loop"
    ARGUMENT = "argument"
    METHOD = "method"
    ESCAPE = "escape"


@dataclass(frozen=True)
class End:
    """One place the value goes: ``node`` is the ``For`` (LOOP), the ``Call`` (ARGUMENT, METHOD:
    ``arg`` is the argument it is for ARGUMENT) or where it escaped (ESCAPE)."""

    kind: EndKind
    node: cst.CSTNode
    arg: Optional[cst.Arg] = None


# Does ``call``'s result carry the value passed as ``arg`` (a method called on the value when
# ``arg`` is None)?
Carries = Callable[[cst.Call, Optional[cst.Arg]], bool]

# Expressions that only read a value: nothing flows out of them.
_READS = (
    cst.Comparison,
    cst.ComparisonTarget,
    cst.UnaryOperation,
    cst.BinaryOperation,
    cst.FormattedStringExpression,
    cst.Expr,
    cst.Del,
    cst.If,
    cst.While,
    cst.Assert,
    cst.Subscript,
    cst.Index,
)
_TARGET_PARENTS = (cst.AssignTarget, cst.Del, cst.NameItem, cst.ImportAlias, cst.AsName)
_VALUE_PARENTS = frozenset({cst.Attribute, cst.Arg, cst.NamedExpr})
_NOT_READ_PARENTS = frozenset({cst.FunctionDef, cst.ClassDef, *_TARGET_PARENTS})


def _never(call: cst.Call, arg: Optional[cst.Arg]) -> bool:
    return False


@dataclass(frozen=True)
class NameUses:
    """Where the names of one tree are read, its ``self.<name>`` reads, and the calls that may
    run its functions, in the order of ``ParentIndex.nodes``."""

    reads: dict[str, list[cst.Name]]
    # ``obj.name`` reads by attribute name, for the attributes of ``self`` (see ``_members``).
    attribute_reads: dict[str, list[cst.Attribute]]
    # The calls that may run a function of the file, by its name: ``name(...)`` and
    # ``pool.submit(name, ...)`` (``_callers`` looks at these instead of every call).
    calls_of: dict[str, list[cst.Call]]

    @classmethod
    def of_file(cls, file: ParsedFile) -> NameUses:
        """Read from the node index's lists of names, calls and attributes (each in source
        order), without visiting the other nodes."""
        index = file.parents
        uses = cls({}, {}, {})
        tree = file.index
        order, parents = tree.order, tree.parents
        for position in tree.by_type().get(cst.Name, ()):
            name: cst.Name = order[position]  # type: ignore[assignment]
            if _is_read(name, index, order[parents[position]]):
                uses.reads.setdefault(name.value, []).append(name)
        for node in file.nodes_of(cst.Call):
            called = _called_name(node)  # type: ignore[arg-type]
            if called is not None:
                uses.calls_of.setdefault(called, []).append(node)  # type: ignore[arg-type]
        for node in file.nodes_of(cst.Attribute):
            # Exact types: these LibCST classes have no subclasses, and ``isinstance`` on them
            # goes through ``ABCMeta``.
            if type(node.value) is cst.Name and type(index.parent_of(node)) is not cst.AssignTarget:  # type: ignore[attr-defined]
                uses.attribute_reads.setdefault(node.attr.value, []).append(node)  # type: ignore[attr-defined, arg-type]
        return uses


def _called_name(call: cst.Call) -> Optional[str]:
    """The name of the file's function ``call`` may run: ``name(...)``, ``x.submit(name, ...)``."""
    func = call.func
    if type(func) is cst.Name:
        return func.value
    if (
        type(func) is cst.Attribute
        and func.attr.value == "submit"
        and call.args
        and type(call.args[0].value) is cst.Name
    ):
        return call.args[0].value.value
    return None


class ValueFlow:
    """``ends(node)``: where the value ``node`` computes goes. Build it once per file and rule."""

    def __init__(self, file: ParsedFile, carries: Carries = _never) -> None:
        self.facts = file.facts
        self.index = file.parents
        self.carries = carries
        # Several rules follow values in one file, each with its own ``carries``: the uses of
        # names they all start from are found once per tree (read-only from here on).
        uses = file.answer(NameUses)
        self.reads = uses.reads
        self.attribute_reads = uses.attribute_reads
        self.calls_of = uses.calls_of

    def ends(self, node: cst.CSTNode) -> Iterator[End]:
        """Every place the value of ``node`` goes (lazily: stop when the answer is known)."""
        return self._from(node, None, 0, set())

    # -- one expression ---------------------------------------------------------------------
    def _from(
        self, node: cst.CSTNode, element: Optional[int], depth: int, seen: set[tuple[object, ...]]
    ) -> Iterator[End]:
        """``element``: the value is that element of the tuple ``node`` computes."""
        if depth > _MAX_DEPTH:
            yield End(EndKind.ESCAPE, node)
            return
        top, element = self._climb(node, element)
        parent = self.index.parent_of(top)
        if type(parent) is cst.For and parent.iter is top:
            yield End(EndKind.LOOP, parent) if element is None else End(EndKind.ESCAPE, parent)
        elif isinstance(parent, (cst.Assign, cst.AnnAssign, cst.NamedExpr)) and parent.value is top:
            targets = (
                [t.target for t in parent.targets]
                if isinstance(parent, cst.Assign)
                else [parent.target]
            )
            for target in targets:
                yield from self._into_target(target, parent, element, depth, seen)
        elif type(parent) is cst.Return:
            function = self.index.scope_of(parent)
            if type(function) is cst.FunctionDef:
                yield from self._callers(function, element, depth, seen)
            else:
                yield End(EndKind.ESCAPE, parent)
        elif type(parent) is cst.Arg:
            call = self.index.parent_of(parent)
            if type(call) is cst.Call and element is None:
                yield from self._passed(call, parent, depth, seen)
            else:
                yield End(EndKind.ESCAPE, parent)
        elif type(parent) is cst.Attribute and parent.value is top:
            call = self.index.parent_of(parent)
            if type(call) is cst.Call and call.func is parent:
                yield End(EndKind.METHOD, call)
        elif type(parent) is cst.Subscript and parent.value is top and element is not None:
            if _literal_index(parent) == element:
                yield from self._from(parent, None, depth, seen)
        elif parent is not None and not isinstance(parent, _READS):
            yield End(EndKind.ESCAPE, parent)

    def _climb(
        self, node: cst.CSTNode, element: Optional[int]
    ) -> tuple[cst.CSTNode, Optional[int]]:
        """Up through expressions whose value may be this one: ``a if c else b``, ``a or b``,
        calls that carry it, and a tuple it is an element of."""
        top = node
        while True:
            parent = self.index.parent_of(top)
            if type(parent) is cst.IfExp and top is not parent.test:
                top = parent
            elif type(parent) is cst.BooleanOperation:
                top = parent
            elif type(parent) is cst.Arg and element is None and not parent.star:
                call = self.index.parent_of(parent)
                if not (type(call) is cst.Call and self.carries(call, parent)):
                    return top, element
                top = call
            elif type(parent) is cst.Attribute and parent.value is top and element is None:
                call = self.index.parent_of(parent)
                if not (
                    type(call) is cst.Call and call.func is parent and self.carries(call, None)
                ):
                    return top, element
                top = call
            elif type(parent) is cst.Element and element is None:
                holder = self.index.parent_of(parent)
                if not isinstance(holder, (cst.Tuple, cst.List)):
                    return top, element
                element = holder.elements.index(parent)
                top = holder
            else:
                return top, element

    # -- names --------------------------------------------------------------------------------
    def _into_target(
        self,
        target: cst.BaseExpression,
        statement: cst.CSTNode,
        element: Optional[int],
        depth: int,
        seen: set[tuple[object, ...]],
    ) -> Iterator[End]:
        scope = self.index.scope_of(statement)
        if type(target) is cst.Name:
            yield from self._holder(target.value, scope, element, depth, seen)
        elif (
            type(target) is cst.Attribute
            and (owner := self._method_of(statement, target)) is not None
        ):
            yield from self._members(owner, target.attr.value, element, depth, seen)
        elif (
            isinstance(target, (cst.Tuple, cst.List))
            and element is not None
            and element < len(target.elements)
        ):
            inner = target.elements[element].value
            if type(inner) is cst.Name:
                yield from self._holder(inner.value, scope, None, depth, seen)
            else:
                yield End(EndKind.ESCAPE, target)
        else:
            yield End(EndKind.ESCAPE, target)

    def _method_of(self, statement: cst.CSTNode, target: cst.Attribute) -> Optional[cst.ClassDef]:
        """The class whose method assigns ``self.<name> = ...`` (``self``: its first parameter)."""
        function = self.index.scope_of(statement)
        if type(function) is not cst.FunctionDef or type(target.value) is not cst.Name:
            return None
        if _first_parameter(function) != target.value.value:
            return None
        block = self.index.parent_of(function)
        owner = self.index.parent_of(block) if block is not None else None
        return owner if type(owner) is cst.ClassDef else None

    def _members(
        self,
        owner: cst.ClassDef,
        name: str,
        element: Optional[int],
        depth: int,
        seen: set[tuple[object, ...]],
    ) -> Iterator[End]:
        """Every ``self.<name>`` read in the methods of ``owner``, the class that stores the value
        there."""
        key = ("<member>", id(owner), name, element)
        if key in seen:
            return
        seen.add(key)
        for read in self.attribute_reads.get(name, ()):
            function = self.index.scope_of(read)
            block = self.index.parent_of(function) if type(function) is cst.FunctionDef else None
            if (
                block is not None
                and self.index.parent_of(block) is owner
                and type(read.value) is cst.Name
                and _first_parameter(function) == read.value.value  # type: ignore[arg-type]
            ):
                yield from self._from(read, element, depth + 1, seen)
            else:
                # ``trainer.<name>`` elsewhere may be this value, used where smpfix does not look.
                yield End(EndKind.ESCAPE, read)

    def _holder(
        self,
        name: str,
        scope: CodeScope,
        element: Optional[int],
        depth: int,
        seen: set[tuple[object, ...]],
    ) -> Iterator[End]:
        """Every read of ``name`` that sees its binding in ``scope``."""
        key = (name, id(scope), element)
        if key in seen:
            return
        seen.add(key)
        for read in self.reads.get(name, ()):
            if self._sees(read, scope, name):
                yield from self._from(read, element, depth, seen)

    def _sees(self, node: cst.CSTNode, scope: CodeScope, name: str) -> bool:
        """Does ``name`` at ``node`` mean the binding made in ``scope``? Also from a nested
        function (a closure), unless a function in between binds the name itself."""
        here = self.index.scope_of(node)
        while here is not scope:
            if type(here) is cst.Module or self._binds_locally(here, name):
                return False
            here = self.index.scope_of(here)
        return True

    def _binds_locally(self, scope: CodeScope, name: str) -> bool:
        if type(scope) is not cst.FunctionDef:
            return False
        params = scope.params
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        if any(p.name.value == name for p in every):
            return True
        return bool(self.facts.names.in_scope(name, scope))

    # -- functions ----------------------------------------------------------------------------
    def _passed(
        self, call: cst.Call, arg: cst.Arg, depth: int, seen: set[tuple[object, ...]]
    ) -> Iterator[End]:
        func = call.func
        function = self.facts.functions.get(func.value) if type(func) is cst.Name else None
        if function is None:
            yield End(EndKind.ARGUMENT, call, arg)
            return
        parameter = argument_parameter(function, call, arg.value)
        if parameter is None:
            yield End(EndKind.ESCAPE, call, arg)
            return
        yield from self._holder(parameter, function, None, depth + 1, seen)

    def _callers(
        self,
        function: cst.FunctionDef,
        element: Optional[int],
        depth: int,
        seen: set[tuple[object, ...]],
    ) -> Iterator[End]:
        """What each call of ``function`` does with its result, also through a pool's futures."""
        key = ("<callers>", id(function), element)
        if key in seen:
            return
        seen.add(key)
        for call in self.calls_of.get(function.name.value, ()):
            func = call.func
            if type(func) is cst.Name and self.facts.functions.get(func.value) is function:
                yield from self._from(call, element, depth + 1, seen)
            elif _submits(call, function, self.facts):
                for result in self._results(call):
                    yield from self._from(result, element, depth + 1, seen)

    def _results(self, submit: cst.Call) -> Iterator[cst.Call]:
        """The ``.result()`` calls of the future ``submit`` returns."""
        parent = self.index.parent_of(submit)
        futures: list[cst.CSTNode] = [submit]
        if type(parent) is cst.Assign and parent.value is submit:
            scope = self.index.scope_of(parent)
            for target in parent.targets:
                if type(target.target) is cst.Name:
                    name = target.target.value
                    futures.extend(
                        read for read in self.reads.get(name, ()) if self._sees(read, scope, name)
                    )
        for future in futures:
            attribute = self.index.parent_of(future)
            if (
                type(attribute) is cst.Attribute
                and attribute.value is future
                and attribute.attr.value == "result"
            ):
                call = self.index.parent_of(attribute)
                if type(call) is cst.Call and call.func is attribute:
                    yield call


def _is_read(node: cst.Name, index: ParentIndex, parent: Optional[cst.CSTNode] = None) -> bool:
    """A use of a name's value (not a target, a keyword, an attribute or a definition);
    ``parent`` is the node's parent when the caller knows it."""
    if parent is None:
        parent = index.parent_of(node)
    kind = type(
        parent
    )  # exact types (none of these has subclasses): isinstance against a LibCST class is slow
    if kind in _VALUE_PARENTS:
        return parent.value is node  # type: ignore[union-attr]
    if kind is cst.AugAssign or kind is cst.AnnAssign:
        return parent.target is not node  # type: ignore[union-attr]
    if kind is cst.Param:
        return parent.default is node  # type: ignore[union-attr]
    if kind is cst.For or kind is cst.CompFor:
        return parent.iter is node  # type: ignore[union-attr]
    if kind in _NOT_READ_PARENTS:
        return False
    while type(parent) in _UNPACKED:
        child, parent = parent, index.parent_of(parent)  # type: ignore[arg-type]
        kind = type(parent)
        if (kind is cst.For or kind is cst.CompFor) and parent.target is child:  # type: ignore[union-attr]
            return False
        if kind in _UNPACKING_TARGETS:
            return False
    return True


# A name inside these is read unless they sit in a target (``a, b = ...``, ``for a, b in``).
_UNPACKED = frozenset({cst.Element, cst.StarredElement, cst.Tuple, cst.List})
_UNPACKING_TARGETS = frozenset({cst.AssignTarget, cst.AsName, cst.Del})


def _first_parameter(function: cst.FunctionDef) -> Optional[str]:
    params = [*function.params.posonly_params, *function.params.params]
    return params[0].name.value if params else None


def _submits(call: cst.Call, function: cst.FunctionDef, facts: FileFacts) -> bool:
    """``executor.submit(function, ...)``: the future's result is what ``function`` returns."""
    func = call.func
    if not (type(func) is cst.Attribute and func.attr.value == "submit" and call.args):
        return False
    first = call.args[0]
    return (
        first.keyword is None
        and not first.star
        and type(first.value) is cst.Name
        and facts.functions.get(first.value.value) is function
    )


def _literal_index(subscript: cst.Subscript) -> Optional[int]:
    if len(subscript.slice) != 1 or type(subscript.slice[0].slice) is not cst.Index:
        return None
    value = subscript.slice[0].slice.value
    return int(value.value) if type(value) is cst.Integer else None
