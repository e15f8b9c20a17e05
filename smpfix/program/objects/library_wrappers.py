"""The project's own functions and modules that stand for the library.

An entry script may never name ``smdistributed``: ``utils/dist.py`` imports it and offers
``init_distributed()``, ``wrap_model(model)`` and ``rank()``; ``train.py`` imports those. What
the script does to the library is what it does through them, so its order, sampler and
checkpoint rules must see ``wrap_model(model)`` as the ``smp.DistributedModel(model)`` it is.
This finds, for the names a script imports from the project, the library name each stands
for, as the import table's ``aliases``: the facts of the script are then collected with them
(``facts.collect``), and every rule reads the wrappers as library calls through the same
``qualified_name``/``smp_member`` it asks of any call. A script that calls a project function
running library calls that stand for nothing the rules read (``args = dist_setting(args)``,
which sets ``args.rank = smp.rank()``) runs under the library too (``reached``); one whose
calls into such a module run nothing of the library (a ``seed_everything`` beside the
wrappers) stays a script without SMP.

A function stands for a library member when every ``return`` gives one call of it (directly
or through a local name assigned from it: ``model = smp.DistributedModel(model); return
model``), for the model and optimizer wrappers only when the library call gets the function's
first parameter first (so the script's first argument is what is wrapped); a function that
returns no such call but calls ``smp.init`` stands for ``init`` (whatever else it returns:
the device, the arguments). A name a helper module imports from the library (``from
smdistributed.modelparallel.torch import rank``, or the module itself: ``from utils.dist
import smp``) stands for what it names. Each is read through the helpers' own imports of each
other, a few levels deep, resolved by ``LocalModules`` like every other cross-module
question. Predicates (``is_main()`` returning ``smp.rank() == 0``) are no alias:
``ranks.guards`` reads them where they are called, and ``ranks.rank_terms`` reads the
attributes a helper sets (``args.rank``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.imports import library_member
from smpfix.program.facts import RANK_FUNCTIONS, SIZE_FUNCTIONS, FileFacts
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import ParsedFile
from smpfix.program.steps import own_nodes

# Members a wrapper may stand for: what the order, sampler and guard rules read.
_WRAPPED = frozenset({"DistributedModel", "DistributedOptimizer"})
_VALUES = RANK_FUNCTIONS | SIZE_FUNCTIONS | _WRAPPED
_DEPTH = 3


@dataclass(frozen=True)
class LibraryReach:
    """What a file that never imports the library reaches of it through the project."""

    # Qualified names of project functions and modules -> the library name each stands for.
    aliases: Mapping[str, str]
    # The library's modules (``smdistributed.modelparallel.torch``) whose calls run inside
    # project functions the file calls (``args = dist_setting(args)`` setting
    # ``args.rank = smp.rank()``): the file runs under the library, as its scripts do.
    modules: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.aliases) or bool(self.modules)


def library_reach(facts: FileFacts, modules: LocalModules) -> LibraryReach:
    """The project's names this file uses that stand for the library, and the library modules
    the project functions it calls use (empty when it reaches nothing of the library)."""
    found: dict[str, str] = {}
    for qualified in sorted(facts.imports.bindings.values()):
        if qualified.startswith(("smdistributed.", "torch.", "*")):
            continue
        resolved = _resolve(qualified, modules, _DEPTH)
        if resolved is not None:
            found[resolved[0]] = resolved[1]
    used: set[str] = set()
    for qualified in sorted(facts.calls_by_qualified_name):
        if qualified.startswith(("smdistributed.", "torch.")):
            continue
        resolved = _resolve(qualified, modules, _DEPTH)
        if resolved is not None:
            found[resolved[0]] = resolved[1]
            continue
        definition = modules.definition(qualified)
        if definition is None:
            continue
        linked, name = definition
        function = _module_function(linked, name)
        if function is not None:
            used.update(
                _library_modules(function, linked.facts, modules.for_importer(linked.path), _DEPTH)
            )
    return LibraryReach(found, tuple(sorted(used)))


def _module_function(linked: ParsedFile, name: str) -> Optional[cst.FunctionDef]:
    """The function ``name`` defined at the top level of ``linked`` (what ``from linked import
    name`` gives), not a method or a nested function of that name."""
    function = linked.facts.functions.get(name)
    if function is None or any(
        type(outer) in (cst.ClassDef, cst.FunctionDef)
        for outer in linked.parents.ancestors(function)
    ):
        return None
    return function


def _library_modules(
    function: cst.FunctionDef, facts: FileFacts, modules: LocalModules, depth: int
) -> set[str]:
    """The library modules ``function`` calls into: directly, or through the functions of the
    project it calls, ``depth`` levels deep."""
    found: set[str] = set()
    for node in own_nodes(function):
        if type(node) is not cst.Call:
            continue
        qualified = facts.qualified_name(node.func)
        if library_member(qualified) is not None:
            found.add(_flavour_module(qualified or ""))
            continue
        if depth <= 1:
            continue
        if type(node.func) is cst.Name and node.func.value in facts.functions:
            inner = facts.functions[node.func.value]
            if inner is not function:
                found |= _library_modules(inner, facts, modules, depth - 1)
            continue
        if qualified is None or qualified.startswith(("torch.", "smdistributed.")):
            continue
        definition = modules.definition(qualified)
        if definition is not None:
            linked, name = definition
            called = linked.facts.functions.get(name)
            if called is not None:
                resolver = modules.for_importer(linked.path)
                found |= _library_modules(called, linked.facts, resolver, depth - 1)
    return found


def _flavour_module(qualified: str) -> str:
    """The library module a qualified name of the library belongs to."""
    from smpfix.base.imports import SMP_TF, SMP_TORCH

    return SMP_TF if qualified.startswith(SMP_TF) else SMP_TORCH


def _resolve(qualified: str, modules: LocalModules, depth: int) -> Optional[tuple[str, str]]:
    """(the prefix of ``qualified`` that names a project function or re-exported name, the
    library name it stands for), or None."""
    if depth <= 0:
        return None
    parts = qualified.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:cut])
        if not module_name.strip("."):
            continue
        path = modules.find_file(module_name)
        if path is None:
            continue
        linked = modules.load(path)
        if linked is None:
            return None
        name = parts[cut]
        key = ".".join(parts[: cut + 1])
        target = _stands_for(linked, name, modules.for_importer(linked.path), depth)
        return (key, target) if target is not None else None
    return None


def _stands_for(linked: ParsedFile, name: str, modules: LocalModules, depth: int) -> Optional[str]:
    """The library name ``name`` of the module ``linked`` stands for, if any."""
    facts = linked.facts
    function = _module_function(linked, name)
    if function is not None:
        return _function_stands_for(function, facts, modules, depth)
    bound = facts.imports.bindings.get(name)
    if bound is None:
        return None
    if bound.startswith("smdistributed.modelparallel."):
        return bound
    resolved = _resolve(bound, modules, depth - 1)
    return resolved[1] if resolved is not None and resolved[0] == bound else None


def _function_stands_for(
    function: cst.FunctionDef, facts: FileFacts, modules: LocalModules, depth: int
) -> Optional[str]:
    returned: set[str] = set()
    returns = 0
    calls_init = False
    for node in own_nodes(function):
        if type(node) is cst.Call and _member(node, facts, modules, depth) == "init":
            calls_init = True
        if type(node) is not cst.Return or node.value is None:
            continue
        returns += 1
        value = node.value
        if type(value) is cst.Name:
            assignment = facts.names.assignment(value.value, value)
            value = assignment.value if assignment is not None else value
        member = _member(value, facts, modules, depth) if type(value) is cst.Call else None
        if (
            type(value) is not cst.Call
            or member not in _VALUES
            or (member in _WRAPPED and not _wraps_first_parameter(value, function))
        ):
            returned.add("")
            continue
        returned.add(member)
    if returns and len(returned) == 1 and "" not in returned:
        return _qualified(facts, next(iter(returned)))
    if calls_init:
        # ``setup(args)`` that initialises the library and returns the device or the
        # arguments: the script's call of it is its ``smp.init()``.
        return _qualified(facts, "init")
    return None


def _member(
    call: cst.BaseExpression, facts: FileFacts, modules: LocalModules, depth: int
) -> Optional[str]:
    """The library member ``call`` calls: directly, or through another wrapper of the
    project."""
    if type(call) is not cst.Call:
        return None
    member = facts.smp_member(call.func)
    if member is not None:
        return member
    if type(call.func) is cst.Name and call.func.value in facts.functions:
        if depth <= 1:
            return None
        inner = _function_stands_for(facts.functions[call.func.value], facts, modules, depth - 1)
        return library_member(inner)
    qualified = facts.qualified_name(call.func)
    if qualified is None or qualified.startswith(("smdistributed.", "torch.")):
        return None
    resolved = _resolve(qualified, modules, depth - 1)
    return library_member(resolved[1]) if resolved is not None else None


def _wraps_first_parameter(call: cst.Call, function: cst.FunctionDef) -> bool:
    """``smp.DistributedModel(model, ...)`` in ``def wrap(model, ...)``: the library wraps
    what the caller passes first (also through ``model.to(device)``)."""
    params = function.params.params
    if not params or not call.args or call.args[0].keyword is not None:
        return False
    node = call.args[0].value
    while type(node) is cst.Call and type(node.func) is cst.Attribute:
        node = node.func.value
    return type(node) is cst.Name and node.value == params[0].name.value


def _qualified(facts: FileFacts, member: str) -> str:
    """The library's qualified name of ``member``, in the flavour the helper imports."""
    from smpfix.base.imports import SMP_TF, SMP_TORCH

    module = SMP_TF if facts.imports_smp_tf and not facts.imports_smp_torch else SMP_TORCH
    return f"{module}.{member}"
