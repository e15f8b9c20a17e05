"""Where values flow between the functions of a launched script, for the plan.

The official SMP v1 examples build the model in a shared ``model_config.py``:

    def get_model_config_from_args(model_type, model_name, args, log=False):
        if model_name:
            return AutoConfig.from_pretrained(model_name), args
        if model_type == "gpt2":
            config_type = GPT2Config
            config_kwargs = _get_gpt2_config_from_args(args)
        ...
        return config_type(**config_kwargs), args

and ``train.py`` calls it with ``args.model_type, args.model_name, args``. To size that model
a plan needs what a parameter receives (the arguments of the function's calls in the
project), the ``if`` branches a statement is under, the dict a helper returns, and the
attribute writes (``args.use_distributed_transformer = 0``) with the branch each one is in.
These are read per file, once, and only when a plan asks.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.parents import ParentIndex
from smpfix.program.project.parsed_file import ParsedFile


def branches(parents: ParentIndex, node: cst.CSTNode) -> Iterator[tuple[cst.BaseExpression, bool]]:
    """The ``if`` tests around ``node``, innermost first, each with the value it must have
    for ``node`` to run (True in the body, False in the ``else`` or an ``elif``)."""
    previous: cst.CSTNode = node
    for ancestor in parents.ancestors(node):
        if type(ancestor) is cst.If:  # exact: faster than ABCMeta's isinstance
            if previous is ancestor.body:
                yield ancestor.test, True
            elif previous is ancestor.orelse:
                yield ancestor.test, False
        previous = ancestor


def returned_before(parents: ParentIndex, node: cst.CSTNode) -> Iterator[cst.BaseExpression]:
    """The tests of the ``if`` statements before ``node`` in its function whose body ends in
    ``return`` or ``raise`` and that have no ``else``: when one holds, ``node`` never runs."""
    child: cst.CSTNode = node
    for ancestor in parents.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return
        if type(ancestor) is cst.IndentedBlock or type(ancestor) is cst.Module:
            for statement in ancestor.body:
                if statement is child:
                    break
                if type(statement) is cst.If and statement.orelse is None and _ends(statement):
                    yield statement.test
        child = ancestor


def _ends(statement: cst.If) -> bool:
    body = statement.body.body
    last = body[-1] if body else None
    if type(last) is not cst.SimpleStatementLine:
        return False
    return any(type(small) in (cst.Return, cst.Raise) for small in last.body)


# Methods that run without their name being written: ``module(x)`` runs ``forward``.
_CALLED_BY_PYTHON = frozenset({"forward", "backward", "setup", "main"})


@dataclass(frozen=True)
class FileFunctions:
    """The functions a file defines at its top level, and the calls it makes by a plain or
    dotted function name (``f(...)``, ``model_config_lib.f(...)``), by that name."""

    defined: dict[str, cst.FunctionDef]
    calls: dict[str, tuple[cst.Call, ...]]
    # How often each name is written (a call, a reference, an attribute, a ``def``).
    mentions: dict[str, int]
    # How many functions and methods, at any depth, have each name; the classes defined.
    definitions: dict[str, int]
    classes: frozenset[str]

    @classmethod
    def of_file(cls, file: ParsedFile) -> FileFunctions:
        defined = {
            statement.name.value: statement
            for statement in file.module.body
            if type(statement) is cst.FunctionDef
        }
        calls: dict[str, list[cst.Call]] = {}
        for call in file.facts.call_order:
            func = call.func
            name = (
                func.value
                if type(func) is cst.Name
                else func.attr.value
                if type(func) is cst.Attribute and type(func.value) is cst.Name
                else None
            )
            if name is not None:
                calls.setdefault(name, []).append(call)
        mentions: dict[str, int] = {}
        for node in file.nodes_of(cst.Name):
            name = node.value  # type: ignore[attr-defined]
            mentions[name] = mentions.get(name, 0) + 1
        definitions: dict[str, int] = {}
        for node in file.nodes_of(cst.FunctionDef):
            name = node.name.value  # type: ignore[attr-defined]
            definitions[name] = definitions.get(name, 0) + 1
        classes = frozenset(node.name.value for node in file.nodes_of(cst.ClassDef))  # type: ignore[attr-defined]
        return cls(
            defined,
            {name: tuple(found) for name, found in calls.items()},
            mentions,
            definitions,
            classes,
        )


@dataclass(frozen=True)
class Defined:
    """A project function: the file that defines it and its ``def``."""

    file: ParsedFile
    function: cst.FunctionDef


def project_function(files: Sequence[ParsedFile], name: str) -> Optional[Defined]:
    """The one top-level function ``name`` among ``files``; None when none or several define
    it (then which one a call reaches is not known without following imports)."""
    found = [
        Defined(file, defined)
        for file in files
        if (defined := file.answer(FileFunctions).defined.get(name)) is not None
    ]
    return found[0] if len(found) == 1 else None


def never_used(files: Sequence[ParsedFile], file: ParsedFile, node: cst.CSTNode) -> bool:
    """``node`` is in a top-level function, or a method of a top-level class, whose name no
    file among ``files`` calls or refers to: imported, perhaps, but never run (a shared
    ``model_config.py`` whose factory the script does not call, a ``from_pretrained`` method
    of a project model class the script builds from its own configuration). Methods Python
    calls itself (``__init__``, ``forward`` through ``__call__``) count as used."""
    outermost: Optional[cst.FunctionDef] = None
    for ancestor in file.parents.ancestors(node):
        if type(ancestor) is cst.FunctionDef:
            outermost = ancestor
    if outermost is None:
        return False
    name = outermost.name.value
    if name.startswith("__") or name in _CALLED_BY_PYTHON:
        return False
    definitions = sum(other.answer(FileFunctions).definitions.get(name, 0) for other in files)
    mentions = sum(other.answer(FileFunctions).mentions.get(name, 0) for other in files)
    return mentions <= definitions


def project_classes(files: Sequence[ParsedFile]) -> frozenset[str]:
    """The names of the classes the project's files define (a ``BertConfig`` of its own)."""
    return frozenset().union(*(file.answer(FileFunctions).classes for file in files))


def enclosing_function(file: ParsedFile, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    for ancestor in file.parents.ancestors(node):
        if type(ancestor) is cst.FunctionDef:
            return ancestor
    return None


def passed(
    call: cst.Call, function: cst.FunctionDef, parameter: cst.Param
) -> Optional[cst.BaseExpression]:
    """The expression ``call`` passes for ``parameter`` of ``function`` (its default when it
    passes none); None when that cannot be read (``*args``, ``**kwargs``, no default)."""
    if any(arg.star for arg in call.args):
        return None
    name = parameter.name.value
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    positional = [arg for arg in call.args if arg.keyword is None]
    ordered = [*function.params.posonly_params, *function.params.params]
    for index, param in enumerate(ordered):
        if param is parameter and index < len(positional):
            return positional[index].value
    return parameter.default


def returned(function: cst.FunctionDef) -> tuple[cst.BaseExpression, ...]:
    """The expressions ``function`` returns (not those of functions nested in it); a bare
    ``return`` or the end of the body are not values and leave them out."""
    found: list[cst.BaseExpression] = []
    pending: list[cst.CSTNode] = [function.body]
    while pending:
        node = pending.pop()
        if type(node) is cst.Return and node.value is not None:
            found.append(node.value)
            continue
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        pending.extend(node.children)
    return tuple(found)


@dataclass(frozen=True)
class AttributeWrites:
    """The statements of a file that assign an attribute other than ``self``'s
    (``args.use_distributed_transformer = 0``), by attribute name, in source order."""

    by_attribute: dict[str, tuple[cst.BaseSmallStatement, ...]]

    @classmethod
    def of_file(cls, file: ParsedFile) -> AttributeWrites:
        found: dict[str, list[cst.BaseSmallStatement]] = {}
        for statement in file.facts.statements:
            if type(statement) is not cst.SimpleStatementLine:
                continue
            for small in statement.body:
                targets: Sequence[cst.BaseExpression] = ()
                if type(small) is cst.Assign:
                    targets = [target.target for target in small.targets]
                elif type(small) in (cst.AnnAssign, cst.AugAssign):
                    targets = [small.target]  # type: ignore[attr-defined]
                for target in targets:
                    if type(target) is cst.Attribute and not (
                        type(target.value) is cst.Name and target.value.value == "self"
                    ):
                        found.setdefault(target.attr.value, []).append(small)
        return cls({name: tuple(writes) for name, writes in found.items()})
