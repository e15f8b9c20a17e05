"""Is an expression a number whenever it runs? (``total_steps``, ``epoch``, ``len(files)``)

Library calls that want a string (a checkpoint tag) fail when given a step counter. A value
counts as a number only when every way it can be bound says so: a numeric literal, arithmetic
on numbers, ``len``/``int``/``float``/``round``, a ``for`` target over ``range(...)`` (or the
index of ``enumerate(...)``), an ``args.<name>`` read from ``add_argument(..., type=int)``
that the script never reassigns, or a name whose reaching assignments (``Names.reaching``) are
all such values; where a ``for`` target or a parameter reaches, every binding of the name in
its function (or, for a name the function does not bind, at module level) must be one. A parameter,
a ``with`` target or any binding smpfix cannot read makes the answer "not known to be a number".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Optional

import libcst as cst

from smpfix.base.parents import CodeScope
from smpfix.base.walker import children, known_own_nodes
from smpfix.program.flow.command_line import (
    CommandLineArgument,
    assigned_attributes,
    command_line_arguments,
)
from smpfix.program.project.parsed_file import ParsedFile

_ARITHMETIC = (
    cst.Add,
    cst.Subtract,
    cst.Multiply,
    cst.Divide,
    cst.FloorDivide,
    cst.Modulo,
    cst.Power,
)
_NUMBER_BUILTINS = frozenset({"len", "int", "float", "round"})
_NUMBER_FUNCTIONS = frozenset({"math.floor", "math.ceil", "math.trunc"})
_MAX_DEPTH = 6

# A binding of a name: the expression it takes its value from, or None when unreadable.
_Binding = Optional[cst.BaseExpression]


class NumericValues:
    """Answers ``is_number(expr, scope)`` for one file; build once per rule and file."""

    def __init__(self, file: ParsedFile) -> None:
        self.file = file
        self.facts = file.facts
        self.module = file.module
        self.flow = file.facts.names
        self._arguments: Optional[Mapping[str, Sequence[CommandLineArgument]]] = None
        self._assigned: Optional[set[str]] = None

    def is_number(self, expr: cst.BaseExpression, scope: CodeScope, depth: int = 0) -> bool:
        if depth > _MAX_DEPTH:
            return False
        if isinstance(expr, (cst.Integer, cst.Float)):
            return True
        if type(expr) is cst.UnaryOperation and type(expr.operator) is not cst.Not:
            return self.is_number(expr.expression, scope, depth + 1)
        if type(expr) is cst.BinaryOperation and isinstance(expr.operator, _ARITHMETIC):
            return self.is_number(expr.left, scope, depth + 1) and self.is_number(
                expr.right, scope, depth + 1
            )
        if type(expr) is cst.IfExp:
            return self.is_number(expr.body, scope, depth + 1) and self.is_number(
                expr.orelse, scope, depth + 1
            )
        if type(expr) is cst.Call:
            return self._number_call(expr)
        if type(expr) is cst.Attribute:
            return self._integer_argument(expr)
        if type(expr) is cst.Name:
            reaching = self.flow.reaching(expr.value, expr)
            if reaching.assignments and not reaching.opaque:
                return all(
                    a.where is not None and self.is_number(a.value, a.where.scope, depth + 1)
                    for a in reaching.assignments
                )
            bindings = self._bindings(expr.value, scope)
            return bool(bindings) and all(
                value is not None and self.is_number(value, owner, depth + 1)
                for value, owner in bindings
            )
        return False

    def _number_call(self, call: cst.Call) -> bool:
        func = call.func
        if type(func) is cst.Name and func.value in _NUMBER_BUILTINS:
            return (
                func.value not in self.facts.imports.bindings
                and func.value not in self.facts.functions
            )
        return self.facts.qualified_name(func) in _NUMBER_FUNCTIONS

    def _integer_argument(self, expr: cst.Attribute) -> bool:
        """``args.save_steps`` from ``add_argument("--save_steps", type=int)``, never reassigned."""
        if type(expr.value) is not cst.Name or self.facts.qualified_name(expr) is not None:
            return False
        if self._arguments is None:
            self._arguments = command_line_arguments([self.file])
            self._assigned = assigned_attributes(self.facts)
        name = expr.attr.value
        found = self._arguments.get(name, ())
        return len(found) == 1 and found[0].integer and name not in (self._assigned or set())

    def _bindings(self, name: str, scope: CodeScope) -> list[tuple[_Binding, CodeScope]]:
        """Every binding of ``name`` that may give its value in ``scope``, with its scope."""
        own = list(_bindings_in(scope, name))
        if own or type(scope) is cst.Module:
            return [(value, scope) for value in own]
        return [(value, self.module) for value in _bindings_in(self.module, name)]


def _bindings_in(scope: CodeScope, name: str) -> Iterator[_Binding]:
    """The bindings of ``name`` in ``scope``'s own body (nested functions and classes excluded)."""
    if type(scope) is cst.FunctionDef:
        params = scope.params
        every = (
            *params.posonly_params,
            *params.params,
            *params.kwonly_params,
            params.star_arg,
            params.star_kwarg,
        )
        if any(isinstance(param, cst.Param) and param.name.value == name for param in every):
            yield None
    indexed = known_own_nodes(
        scope.body if isinstance(scope, cst.FunctionDef) else scope,
        _NESTED_DEFINITIONS | _NESTED_SCOPES,
    )
    if indexed is not None:
        for node in indexed[1:] if type(scope) is cst.Module else indexed:
            kind = type(node)
            if kind in _NESTED_DEFINITIONS:
                if node.name.value == name:  # type: ignore[attr-defined]
                    yield None
            elif kind in _BINDERS:
                yield from _binding_of(node, name)
        return
    stack: list[cst.CSTNode] = (
        [scope.body] if isinstance(scope, cst.FunctionDef) else list(scope.body)
    )
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            if node.name.value == name:
                yield None
            continue
        if isinstance(
            node, (cst.Lambda, cst.GeneratorExp, cst.ListComp, cst.SetComp, cst.DictComp)
        ):
            continue
        yield from _binding_of(node, name)
        stack.extend(children(node))


_NESTED_DEFINITIONS = frozenset({cst.FunctionDef, cst.ClassDef})
_NESTED_SCOPES = frozenset({cst.Lambda, cst.GeneratorExp, cst.ListComp, cst.SetComp, cst.DictComp})
# The nodes ``_binding_of`` reads.
_BINDERS = frozenset(
    {
        cst.Assign,
        cst.AnnAssign,
        cst.AugAssign,
        cst.For,
        cst.NamedExpr,
        cst.WithItem,
        cst.ExceptHandler,
        cst.Import,
        cst.ImportFrom,
        cst.Global,
        cst.Nonlocal,
    }
)


def _binding_of(node: cst.CSTNode, name: str) -> Iterator[_Binding]:
    if type(node) is cst.Assign:
        for target in node.targets:
            if _is_name(target.target, name):
                yield node.value
            elif _binds(target.target, name):
                yield None
    elif isinstance(node, (cst.AnnAssign, cst.AugAssign)) and _is_name(node.target, name):
        if type(node) is cst.AugAssign:
            yield node.value if isinstance(node.operator, _AUGMENTED_ARITHMETIC) else None
        else:
            yield node.value
    elif type(node) is cst.For and _binds(node.target, name):
        yield _loop_counter(node, name)
    elif type(node) is cst.NamedExpr and _is_name(node.target, name):
        yield node.value
    elif type(node) is cst.WithItem and node.asname is not None and _binds(node.asname.name, name):
        yield None
    elif type(node) is cst.ExceptHandler and node.name is not None and _binds(node.name.name, name):
        yield None
    elif isinstance(node, (cst.Import, cst.ImportFrom, cst.Global, cst.Nonlocal)) and _mentions(
        node, name
    ):
        yield None


_AUGMENTED_ARITHMETIC = (
    cst.AddAssign,
    cst.SubtractAssign,
    cst.MultiplyAssign,
    cst.DivideAssign,
    cst.FloorDivideAssign,
    cst.ModuloAssign,
    cst.PowerAssign,
)
_ONE = cst.Integer("1")


def _loop_counter(loop: cst.For, name: str) -> _Binding:
    """A number for ``for name in range(...)`` and ``for name, _ in enumerate(...)``."""
    iterated = loop.iter
    if type(iterated) is not cst.Call or type(iterated.func) is not cst.Name:
        return None
    if iterated.func.value == "range" and _is_name(loop.target, name):
        return _ONE
    if iterated.func.value == "enumerate" and isinstance(loop.target, (cst.Tuple, cst.List)):
        elements = loop.target.elements
        if elements and _is_name(elements[0].value, name):
            return _ONE
    return None


def _is_name(node: cst.BaseExpression, name: str) -> bool:
    return type(node) is cst.Name and node.value == name


def _binds(target: cst.CSTNode, name: str) -> bool:
    if type(target) is cst.Name:
        return target.value == name
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds(element.value, name) for element in target.elements)
    if type(target) is cst.StarredElement:
        return _binds(target.value, name)
    return False


def _mentions(node: cst.CSTNode, name: str) -> bool:
    from smpfix.base.walker import iter_nodes

    return any(type(inner) is cst.Name and inner.value == name for inner in iter_nodes(node))


def enclosing_scope(stack: Sequence[cst.CSTNode], module: cst.Module) -> CodeScope:
    """The innermost function around the node at the end of ``stack`` (the module at top level)."""
    for node in reversed(stack[:-1]):
        if type(node) is cst.FunctionDef:
            return node
    return module
