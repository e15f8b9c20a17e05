"""Step functions: which function bodies run once per microbatch, and who calls them.

``facts.step_functions`` holds the names callers use; the rules about the step body also need
the ``def`` that runs (for ``train_step = smp.step(f)`` that is ``f``), the ``smp.step(...)``
call that carries ``non_split_inputs``, the calls of the step, and the shape of what it
returns. This module answers those once, in the same way for every rule.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Optional, Union, overload

import libcst as cst

from smpfix.base.walker import Ancestry, children, iter_nodes, known_own_nodes
from smpfix.program.facts import FileFacts, is_step_decorator
from smpfix.program.names import StatementRef
from smpfix.program.project.parsed_file import ParsedFile


@dataclass(frozen=True)
class StepFunction:
    """One ``smp.step`` function.

    ``name`` is what callers write; ``function`` is the body that runs once per microbatch
    (None when the wrapped function is not defined in this file); ``options`` is the
    ``smp.step(...)`` call whose keywords configure splitting (None for a bare ``@smp.step``).
    """

    name: str
    function: Optional[cst.FunctionDef]
    options: Optional[cst.Call]


@dataclass(frozen=True)
class StepFunctions(Sequence[StepFunction]):
    """The file's step functions, in the order ``step_functions`` finds them."""

    functions: tuple[StepFunction, ...]

    @classmethod
    def of_file(cls, file: ParsedFile) -> StepFunctions:
        return cls(step_functions(file.facts))

    def __iter__(self) -> Iterator[StepFunction]:
        return iter(self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    @overload
    def __getitem__(self, index: int) -> StepFunction: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[StepFunction]: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[StepFunction, Sequence[StepFunction]]:
        return self.functions[index]

    @cached_property
    def bodies(self) -> frozenset[cst.FunctionDef]:
        """The ``def``s that run once per microbatch."""
        return step_bodies(self.functions)


def step_functions(facts: FileFacts) -> tuple[StepFunction, ...]:
    """Every step function of the file: decorated ``def``s and ``name = smp.step(...)(f)``."""
    found: list[StepFunction] = []
    for name, function in facts.functions.items():
        for decorator in function.decorators:
            if is_step_decorator(facts.imports, decorator.decorator):
                options = decorator.decorator if type(decorator.decorator) is cst.Call else None
                found.append(StepFunction(name, function, options))
                break
    for name, assignments in facts.assignments.items():
        for assignment in assignments:
            value = assignment.value
            if type(value) is not cst.Call:
                continue
            if facts.smp_member(value.func) == "step" and value.args and not value.args[0].keyword:
                # `train_step = smp.step(f)` or `smp.step(f, non_split_inputs=[...])`
                wrapped = value.args[0].value
                options = value if len(value.args) > 1 else None
            elif (
                type(value.func) is cst.Call
                and facts.smp_member(value.func.func) == "step"
                and value.args
            ):
                # `train_step = smp.step(non_split_inputs=[...])(f)`
                wrapped = value.args[0].value
                options = value.func
            else:
                continue
            defined = facts.functions.get(wrapped.value) if type(wrapped) is cst.Name else None
            found.append(StepFunction(name, defined, options))
    return tuple(found)


def step_bodies(steps: Sequence[StepFunction]) -> frozenset[cst.FunctionDef]:
    return frozenset(step.function for step in steps if step.function is not None)


def enclosing_step(
    ancestry: Ancestry, bodies: frozenset[cst.FunctionDef], facts: Optional[FileFacts] = None
) -> Optional[cst.FunctionDef]:
    """The step body the node being visited sits in, lexically (nested ``def``s count).

    For a call of the file with ``facts``, the functions around it are read up the chain of
    statements (a call's statement, the function holding it, that function's own statement...)
    instead of the whole ancestry: rules ask this of every call."""
    if not bodies:
        return None
    node = ancestry.stack[-1] if ancestry.stack else None
    where = (
        facts.call_statements.get(node) if facts is not None and type(node) is cst.Call else None
    )
    if where is not None and facts is not None:
        statement = where.statement
        if type(statement) is cst.FunctionDef and statement in bodies:  # in its header
            return statement
        scope: Optional[StatementRef] = where
        while scope is not None and type(scope.scope) is cst.FunctionDef:
            if scope.scope in bodies:
                return scope.scope
            scope = facts.statement_of(scope.scope)
        if scope is not None:
            return None
    for ancestor in reversed(ancestry.stack):
        # The exact type first: a node's hash is a Python call, and most nodes are no ``def``.
        if type(ancestor) is cst.FunctionDef and ancestor in bodies:
            return ancestor
    return None


def returns_container(function: cst.FunctionDef) -> bool:
    """Whether every ``return`` of ``function`` gives a tuple, list or dict display.

    The library turns each tensor *inside* such a container into a ``StepOutput``, so the
    call's result is a plain container and ``out[0]``/``out["loss"]`` are the StepOutputs;
    a function returning one tensor gives a ``StepOutput`` whose ``[i]`` is a microbatch.
    """
    values = [node.value for node in own_nodes(function) if type(node) is cst.Return]
    return bool(values) and all(
        isinstance(value, (cst.Tuple, cst.List, cst.Dict)) for value in values
    )


# Nodes whose body is code of its own, run when called, not where it stands.
NESTED_SCOPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})


def own_nodes(function: cst.FunctionDef) -> list[cst.CSTNode]:
    """The nodes of ``function``'s body without those of nested functions and classes (in no
    particular order)."""
    indexed = known_own_nodes(function.body, NESTED_SCOPES)
    if indexed is not None:
        return indexed
    out: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(children(node))
    return out


def positional_parameters(function: cst.FunctionDef) -> tuple[str, ...]:
    """Parameters that can be passed by position (``inspect.getfullargspec(f).args``)."""
    params = function.params
    return tuple(param.name.value for param in (*params.posonly_params, *params.params))


def body_statements(function: cst.FunctionDef) -> Sequence[cst.BaseStatement]:
    body = function.body
    if type(body) is cst.IndentedBlock:
        return body.body
    return ()


def contains_name_call(node: cst.CSTNode, names: frozenset[str]) -> bool:
    """Whether ``node`` calls one of ``names`` (``model(x)``) or a method on it
    (``model.backward``)."""
    for inner in iter_nodes(node):
        if type(inner) is cst.Call:
            func = inner.func
            if type(func) is cst.Attribute:
                func = func.value
            if type(func) is cst.Name and func.value in names:
                return True
    return False
