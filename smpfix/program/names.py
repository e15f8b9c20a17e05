"""Names: every plain assignment of a module, the definitions that reach a use, and from them
the value a name holds there. The one answer to "what does this name hold here?".

A list of every ``name = value`` of the file, in any function and any branch, mixes up values
that never meet:

    if args.save_full_model:
        model_dict = model.state_dict()
        smp.save(model_dict, path, partial=False)      # a full state dict
    else:
        model_dict = model.local_state_dict()           # never reaches the save above
        smp.save(model_dict, path, partial=True)

``Names.reaching(name, use)`` follows the statements of the use's own function in order: an
assignment replaces what came before, both sides of an ``if`` (or the arms of a ``try``,
``match``, ``with``) merge, a loop body may run again with its own assignments,
``return``/``raise`` end a path. Bindings that are not a plain ``name = value`` (a tuple or
``for`` target, ``with ... as``, ``+=``, an import, a parameter) make the answer *opaque*: a
value smpfix cannot read. A name the function never binds takes the module's assignments
(the function may run after any of them). ``Names.assignment(name, at)`` is the one plain
assignment that reaches ``at`` when nothing else can: what literal folding, rank terms,
aliases and every rule resolve a name through.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Optional, Union

import libcst as cst

from smpfix.base.calls import target_names
from smpfix.base.parents import CodeScope, ParentIndex
from smpfix.base.walker import children, subtree

Block = Union[cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite]


@dataclass(frozen=True)
class StatementRef:
    """A statement with the block that holds it, its index there, and its function."""

    statement: cst.BaseStatement
    block: Block
    index: int
    scope: CodeScope


@dataclass(frozen=True)
class Assignment:
    """``target = value`` for a single plain name, where it happens."""

    target: str
    value: cst.BaseExpression
    where: Optional[StatementRef]


_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_SCOPE_TYPES = frozenset(_SCOPES)


@dataclass(frozen=True)
class Reaching:
    """The plain assignments that may give the value, and whether anything else may."""

    assignments: tuple[Assignment, ...]
    opaque: bool = False
    # The other bindings that may give the value (a tuple target's statement, a ``for``, a
    # parameter, ...), for a question that can read some of them (``a, b = f()``).
    others: tuple[cst.CSTNode, ...] = ()

    @property
    def single(self) -> Optional[Assignment]:
        """The one assignment that gives the value, when nothing else can."""
        return self.assignments[0] if len(self.assignments) == 1 and not self.opaque else None


@dataclass(frozen=True)
class _Opaque:
    """A binding whose value is not a plain expression (a ``for`` target, a parameter, ...)."""

    node: cst.CSTNode


_Definition = Union[Assignment, _Opaque]
_State = frozenset  # of _Definition


class _Found(Exception):
    """Raised by the walk when it reaches the use, carrying the definitions live there."""

    def __init__(self, state: frozenset[_Definition]) -> None:
        super().__init__()
        self.state = state


class Names:
    """The names of one module: every plain assignment, the definitions that reach a use, and
    from them the value a name holds there. Answered on demand and remembered."""

    def __init__(
        self,
        module: cst.Module,
        assignments: Mapping[str, tuple[Assignment, ...]],
        index: ParentIndex,
    ) -> None:
        self.module = module
        self.assignments = assignments
        self.index = index
        self._answers: dict[tuple[str, int], Reaching] = {}
        self._locals: dict[int, set[str]] = {}
        # What a loop's or a ``try``'s body assigns to a name on a pass from a state (a walk
        # that meets no use): by (name, the loop or ``try``, the state).
        self._passes: dict[
            tuple[str, int, frozenset[_Definition]], Optional[frozenset[_Definition]]
        ] = {}
        self._effects: dict[int, tuple[cst.CSTNode, AbstractSet[str], bool]] = {}

    def assignment(self, name: str, at: cst.CSTNode) -> Optional[Assignment]:
        """The one plain assignment whose value ``name`` holds at ``at`` (a node of this
        module), when no other definition can reach there: the answer every question about a
        name's value asks."""
        if name not in self.assignments:
            return None  # most names: nothing to follow
        return self.reaching(name, at).single

    def resolve(self, name: str, at: cst.CSTNode) -> Optional[cst.BaseExpression]:
        """The expression ``name`` holds at ``at``, when one assignment gives it (for folding
        literals, ``smpfix.base.literals``)."""
        found = self.assignment(name, at)
        return found.value if found is not None else None

    def value(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """``expr``, or the value of the name it is, followed through names assigned from
        names (``loader = train_loader``) as long as each holds one assignment's value."""
        seen = 0
        while type(expr) is cst.Name and seen < 5:
            assignment = self.assignment(expr.value, expr)
            if assignment is None or assignment.value is expr:
                break
            expr = assignment.value
            seen += 1
        return expr

    def in_scope(self, name: str, scope: CodeScope) -> tuple[Assignment, ...]:
        """The plain assignments of ``name`` whose statement sits in ``scope`` itself."""
        return tuple(
            a
            for a in self.assignments.get(name, ())
            if a.where is not None and a.where.scope is scope
        )

    def reaching(self, name: str, use: cst.CSTNode) -> Reaching:
        """The definitions of ``name`` that may reach ``use`` (a node inside this module)."""
        key = (name, id(use))
        found = self._answers.get(key)
        if found is None:
            found = self._answers[key] = self._reaching(name, use)
        return found

    def scope_of(self, use: cst.CSTNode) -> CodeScope:
        """The function whose body runs ``use`` (the module at top level): a function's
        decorators, defaults and annotations run where the ``def`` stands, not inside it."""
        child = use
        for ancestor in self.index.ancestors(use):
            if type(ancestor) is cst.FunctionDef and child is ancestor.body:  # type: ignore[attr-defined]
                return ancestor  # type: ignore[return-value]
            child = ancestor
        return self.module

    def _reaching(self, name: str, use: cst.CSTNode) -> Reaching:
        scope = self.scope_of(use)
        body: Sequence[cst.CSTNode] = (
            scope.body if isinstance(scope, cst.Module) else _statements(scope.body)
        )
        start: frozenset[_Definition] = frozenset()
        if type(scope) is cst.FunctionDef:
            start = self._entry(name, scope)
        walk = _Walk(self, name, use)
        try:
            walk.block(body, start)
        except _Found as found:
            return self._answer(name, found.state)
        # The use was not met in order (a decorator, a default value): any binding of the scope.
        every = list(self.in_scope(name, scope))
        return Reaching(tuple(every), opaque=not every)

    def _entry(self, name: str, function: cst.FunctionDef) -> frozenset[_Definition]:
        """What ``name`` holds when ``function`` starts: a parameter, or the module's value."""
        params = function.params
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        every += [star for star in (params.star_arg, params.star_kwarg) if type(star) is cst.Param]
        for param in every:
            if param.name.value == name:
                return frozenset({_Opaque(param)})
        local = self._locals.get(id(function))
        if local is None:
            local = self._locals[id(function)] = _bound_in(function)
        if name in local:
            return frozenset()
        module_level = [
            a
            for a in self.assignments.get(name, ())
            if a.where is not None and type(a.where.scope) is cst.Module
        ]
        return frozenset(module_level)

    def _answer(self, name: str, state: Iterable[_Definition]) -> Reaching:
        live = set(state)
        plain = [a for a in self.assignments.get(name, ()) if a in live]
        others = [d.node for d in live if isinstance(d, _Opaque)]
        return Reaching(tuple(plain), bool(others), tuple(others))

    def effects(self, statement: cst.CSTNode) -> tuple[AbstractSet[str], bool]:
        """The names ``statement`` may bind in its scope (in any of the ways the walk reads,
        and a few it does not), and whether it holds a ``return`` or ``raise``: a statement
        that binds none of a walk's name and ends no path leaves the walk's state as it was."""
        known = self._effects.get(id(statement))
        if known is None or known[0] is not statement:
            known = self._effects[id(statement)] = (statement, *_effects_of(self, statement))
        return known[1], known[2]

    def body_pass(
        self,
        name: str,
        owner: cst.CSTNode,
        body: Sequence[cst.CSTNode],
        state: frozenset[_Definition],
    ) -> Optional[frozenset[_Definition]]:
        """The definitions of ``name`` live after one pass over ``body``, the body of the loop
        or ``try`` ``owner``, from ``state``, by a walk that meets no use: the same for every
        use of the name below it, so worked out once (a use in a training loop would walk the
        loop's body again for each question about it)."""
        key = (name, id(owner), state)
        if key in self._passes:
            return self._passes[key]
        found = self._passes[key] = _Walk(self, name, _NOWHERE).block(body, state)
        return found

    def assignment_for(self, name: str, value: cst.BaseExpression) -> Optional[Assignment]:
        for assignment in self.assignments.get(name, ()):
            if assignment.value is value:
                return assignment
        return None


class _Walk:
    """One walk of a function body toward one use of one name."""

    def __init__(self, flow: Names, name: str, use: cst.CSTNode) -> None:
        self.flow = flow
        self.name = name
        self.use = use
        self.holders = {id(node) for node in flow.index.ancestors(use)} | {id(use)}

    def holds(self, node: cst.CSTNode) -> bool:
        return id(node) in self.holders

    def block(
        self, statements: Sequence[cst.CSTNode], state: frozenset[_Definition]
    ) -> Optional[frozenset[_Definition]]:
        """The definitions live after ``statements`` (None: no path falls through)."""
        current: Optional[frozenset[_Definition]] = state
        for statement in statements:
            if current is None:
                return None
            current = self.statement(statement, current)
        return current

    def statement(
        self, node: cst.CSTNode, state: frozenset[_Definition]
    ) -> Optional[frozenset[_Definition]]:
        if id(node) not in self.holders and not (
            # The line ``_statements`` makes of a one-line suite is no ancestor of the use.
            type(node) is cst.SimpleStatementLine and any(map(self.holds, node.body))
        ):
            # Most statements neither bind the name nor end a path: they pass the state on.
            bound, exits = self.flow.effects(node)
            if not exits and self.name not in bound:
                return state
        if type(node) is cst.SimpleStatementLine:
            return self.simple(node, node.body, state)
        if type(node) is cst.If:
            return self.branch_if(node, state)
        if isinstance(node, (cst.For, cst.While)):
            return self.loop(node, state)
        if type(node) is cst.Try:
            return self.try_(node, state)
        if type(node) is cst.With:
            self.header(node, node.items, state)
            inner = state
            if any(
                item.asname is not None and self.name in target_names(item.asname.name)
                for item in node.items
            ):
                inner = frozenset({_Opaque(node)})
            return self.block(_statements(node.body), inner)
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            if self.holds(node):
                raise _Found(state)  # a decorator or a default value
            return frozenset({_Opaque(node)}) if node.name.value == self.name else state
        if type(node) is cst.Match:
            self.header(node, [node.subject], state)
            outs = [self.block(_statements(case.body), state) for case in node.cases]
            return _merge([*outs, state])
        if self.holds(node):
            raise _Found(state)
        return state

    def header(
        self, node: cst.CSTNode, parts: Iterable[cst.CSTNode], state: frozenset[_Definition]
    ) -> None:
        if self.holds(node) and any(self.holds(part) for part in parts):
            raise _Found(state)

    def simple(
        self,
        line: cst.CSTNode,
        smalls: Sequence[cst.BaseSmallStatement],
        state: frozenset[_Definition],
    ) -> Optional[frozenset[_Definition]]:
        for small in smalls:
            if self.holds(small):
                raise _Found(state)
            if isinstance(small, (cst.Return, cst.Raise)):
                return None
            state = self.binding(small, state)
        return state

    def binding(
        self, small: cst.BaseSmallStatement, state: frozenset[_Definition]
    ) -> frozenset[_Definition]:
        name = self.name
        if type(small) is cst.Assign:
            for target in small.targets:
                if type(target.target) is cst.Name and target.target.value == name:
                    found = self.flow.assignment_for(name, small.value)
                    return frozenset({found if found is not None else _Opaque(small)})
                if name in target_names(target.target):
                    return frozenset({_Opaque(small)})
        elif (
            type(small) is cst.AnnAssign
            and small.value is not None
            and name in target_names(small.target)
        ):
            found = (
                self.flow.assignment_for(name, small.value)
                if type(small.target) is cst.Name
                else None
            )
            return frozenset({found if found is not None else _Opaque(small)})
        elif type(small) is cst.AugAssign and name in target_names(small.target):
            return frozenset({_Opaque(small)})
        elif isinstance(small, (cst.Import, cst.ImportFrom)) and name in _imported_names(small):
            return frozenset({_Opaque(small)})
        elif type(small) is cst.Del and name in target_names(small.target):
            return frozenset()
        elif isinstance(small, (cst.Global, cst.Nonlocal)) and any(
            item.name.value == name for item in small.names
        ):
            return state | {_Opaque(small)}
        return state

    def branch_if(
        self, node: cst.If, state: frozenset[_Definition]
    ) -> Optional[frozenset[_Definition]]:
        self.header(node, [node.test], state)
        body = self.block(_statements(node.body), state)
        if node.orelse is None:
            other: Optional[frozenset[_Definition]] = state
        elif type(node.orelse) is cst.If:
            other = self.branch_if(node.orelse, state)
        else:
            other = self.block(_statements(node.orelse.body), state)
        return _merge([body, other])

    def loop(
        self, node: Union[cst.For, cst.While], state: frozenset[_Definition]
    ) -> Optional[frozenset[_Definition]]:
        header = [node.iter, node.target] if isinstance(node, cst.For) else [node.test]
        self.header(node, header, state)
        entry = state
        if type(node) is cst.For and self.name in target_names(node.target):
            entry = frozenset({_Opaque(node)})
        # The body may run again: what it assigns reaches its own start on the next pass.
        again = self.flow.body_pass(self.name, node, _statements(node.body), entry) or frozenset()
        after_body = self.block(_statements(node.body), entry | again)
        out = _merge([state, entry, after_body])
        if node.orelse is not None and out is not None:
            return self.block(_statements(node.orelse.body), out)
        return out

    def try_(
        self, node: cst.Try, state: frozenset[_Definition]
    ) -> Optional[frozenset[_Definition]]:
        body = self.block(_statements(node.body), state)
        # A handler may start anywhere in the body: after any of its assignments.
        passed = self.flow.body_pass(self.name, node, _statements(node.body), state)
        anywhere = _merge([state, passed]) or state
        handlers = [self.block(_statements(handler.body), anywhere) for handler in node.handlers]
        if node.orelse is not None and body is not None:
            body = self.block(_statements(node.orelse.body), body)
        out = _merge([body, *handlers])
        if node.finalbody is not None:
            final = self.block(
                _statements(node.finalbody.body), out if out is not None else anywhere
            )
            return final if out is not None else None
        return out


# A node that is never a use: walks that only collect what a block assigns.
_NOWHERE = cst.Pass()


def _merge(states: Sequence[Optional[frozenset[_Definition]]]) -> Optional[frozenset[_Definition]]:
    live = [state for state in states if state is not None]
    return frozenset().union(*live) if live else None


def _statements(suite: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    if type(suite) is cst.IndentedBlock:
        return suite.body
    return (
        [cst.SimpleStatementLine(body=suite.body)]
        if type(suite) is cst.SimpleStatementSuite
        else []
    )


def _imported_names(node: Union[cst.Import, cst.ImportFrom]) -> set[str]:
    if isinstance(node.names, cst.ImportStar):
        return set()
    found: set[str] = set()
    for alias in node.names:
        if alias.asname is not None and type(alias.asname.name) is cst.Name:
            found.add(alias.asname.name.value)
        else:
            dotted = cst.Module(body=[]).code_for_node(alias.name)
            found.add(dotted.split(".", 1)[0])
    return found


def _bound_in(function: cst.FunctionDef) -> set[str]:
    """The names ``function``'s own body binds anywhere (its local names)."""
    found: set[str] = set()
    indexed = subtree(function.body)
    if indexed is not None:
        order, ends, position, end = indexed
        binders, scopes = _BINDER_TYPES, _SCOPE_TYPES
        while position < end:
            node = order[position]
            kind = type(node)
            if kind in binders:
                found |= _bound_by(node)
            # A nested function or class binds its name here; what it binds inside is its own.
            position = ends[position] if kind in scopes else position + 1
        return found
    stack: list[cst.CSTNode] = list(_statements(function.body))
    while stack:
        node = stack.pop()
        found |= _bound_by(node)
        if type(node) not in _SCOPE_TYPES:
            stack.extend(children(node))
    return found


_EXITS = (cst.Return, cst.Raise)
# What the walk never passes over: a statement it does not know, and one that holds it.
_A_STATEMENT_NOT_ENTERED: tuple[AbstractSet[str], bool] = (frozenset(), True)


def _effects_of(flow: Names, statement: cst.CSTNode) -> tuple[AbstractSet[str], bool]:
    """``Names.effects``, from the statement's own bindings and its blocks' statements (each
    worked out once): the bodies of the functions and classes it defines run elsewhere."""
    kind = type(statement)
    if kind is cst.SimpleStatementLine:
        return _small_effects(statement.body)  # type: ignore[attr-defined]
    if kind is cst.FunctionDef or kind is cst.ClassDef:
        return {statement.name.value}, False  # type: ignore[attr-defined]
    bound: set[str] = set()
    suites: list[Optional[cst.CSTNode]] = []
    if kind is cst.If:
        suites += [statement.body, statement.orelse]  # type: ignore[attr-defined]
    elif kind is cst.For or kind is cst.While:
        if kind is cst.For:
            bound |= target_names(statement.target)  # type: ignore[attr-defined]
        suites += [statement.body, statement.orelse]  # type: ignore[attr-defined]
    elif kind is cst.With:
        for item in statement.items:  # type: ignore[attr-defined]
            if item.asname is not None:
                bound |= target_names(item.asname.name)
        suites.append(statement.body)  # type: ignore[attr-defined]
    elif kind is cst.Try or kind is cst.TryStar:
        for handler in statement.handlers:  # type: ignore[attr-defined]
            if handler.name is not None:
                bound |= target_names(handler.name.name)
            suites.append(handler.body)
        suites += [statement.body, statement.orelse, statement.finalbody]  # type: ignore[attr-defined]
    elif kind is cst.Match:
        suites += [case.body for case in statement.cases]  # type: ignore[attr-defined]
    else:
        return _A_STATEMENT_NOT_ENTERED
    exits = False
    for suite in suites:
        for names, ends in _suite_effects(flow, suite):
            bound |= names
            exits = exits or ends
    return bound, exits


def _suite_effects(
    flow: Names, suite: Optional[cst.CSTNode]
) -> list[tuple[AbstractSet[str], bool]]:
    if type(suite) is cst.If:  # an ``elif``
        return [flow.effects(suite)]
    if type(suite) is cst.Else or type(suite) is cst.Finally:
        suite = suite.body  # type: ignore[union-attr]
    if type(suite) is cst.SimpleStatementSuite:
        return [_small_effects(suite.body)]
    if type(suite) is cst.IndentedBlock:
        return [flow.effects(inner) for inner in suite.body]
    return [] if suite is None else [_A_STATEMENT_NOT_ENTERED]


def _small_effects(smalls: Sequence[cst.BaseSmallStatement]) -> tuple[AbstractSet[str], bool]:
    bound: set[str] = set()
    exits = False
    for small in smalls:
        kind = type(small)
        if kind in _EXITS:
            exits = True
        elif kind is cst.Assign:
            for target in small.targets:  # type: ignore[attr-defined]
                bound |= target_names(target.target)
        elif kind in (cst.AnnAssign, cst.AugAssign):
            bound |= target_names(small.target)  # type: ignore[attr-defined]
        elif kind is cst.Del:
            bound |= target_names(small.target)  # type: ignore[attr-defined]
        elif kind is cst.Import or kind is cst.ImportFrom:
            bound |= _imported_names(small)  # type: ignore[arg-type]
        elif kind is cst.Global or kind is cst.Nonlocal:
            bound.update(item.name.value for item in small.names)  # type: ignore[attr-defined]
    return bound, exits


_BINDER_TYPES = frozenset(
    {
        cst.Assign,
        cst.AnnAssign,
        cst.AugAssign,
        cst.For,
        cst.WithItem,
        cst.FunctionDef,
        cst.ClassDef,
        cst.Import,
        cst.ImportFrom,
    }
)
_NO_NAMES: frozenset[str] = frozenset()


def _bound_by(node: cst.CSTNode) -> AbstractSet[str]:
    """The names one node binds in the scope it sits in."""
    if type(node) not in _BINDER_TYPES:
        return _NO_NAMES
    if type(node) is cst.Assign:
        return set().union(*(target_names(target.target) for target in node.targets))
    if isinstance(node, (cst.AnnAssign, cst.AugAssign)):
        return target_names(node.target)
    if type(node) is cst.For:
        return target_names(node.target)
    if type(node) is cst.WithItem and node.asname is not None:
        return target_names(node.asname.name)
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return {node.name.value}
    if isinstance(node, (cst.Import, cst.ImportFrom)):
        return _imported_names(node)
    return _NO_NAMES
