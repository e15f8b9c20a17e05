"""Where a gradient scaler is used: with the library, off its path, or where smpfix cannot see.

PyTorch's ``GradScaler`` breaks the library when it scales the loss the library's model
backpropagates or steps the library's optimizer; a scaler built on a line every back end runs
and used only by the data-parallel branch (``if args.smp: smp_step(...) else:
scaler.scale(loss).backward()``) does nothing to the library's job. ``scaler_use`` follows the
name the scaler is bound to through its gradient methods (``scale``, ``step``, ``unscale_``,
``update``) and the functions it is passed to (in this file, and in the project modules it
imports, a few calls deep) and asks ``LibraryCode`` of each use's file whether it runs with the
library.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from smpfix.base.walker import iter_nodes
from smpfix.program.model import Program
from smpfix.program.project.parsed_file import ParsedFile
from smpfix.rules.wiring._library_code import LibraryCode

# How many calls deep a scaler passed to functions is followed.
_DEPTH = 3
# The methods that touch gradients and the optimizer; ``state_dict``, ``get_scale`` and the
# like are bookkeeping, harmless wherever they run.
_GRADIENT_METHODS = frozenset({"scale", "step", "unscale_", "update"})


class ScalerUse(enum.Enum):
    WITH_LIBRARY = "some use runs with the library"
    OFF_LIBRARY = "every use runs off the library's path"
    UNSEEN = "smpfix cannot see (all) its uses"


@dataclass
class _Uses:
    """What the walk found: uses on and off the library's path, and whether some went unseen."""

    with_library: bool = False
    off_library: bool = False
    unseen: bool = False
    seen: set[tuple[str, str]] = field(default_factory=set)
    libraries: dict[str, LibraryCode] = field(default_factory=dict)

    def library(self, file: ParsedFile) -> LibraryCode:
        """``LibraryCode`` of ``file``, built once per walk."""
        if file.path not in self.libraries:
            self.libraries[file.path] = LibraryCode(file)
        return self.libraries[file.path]

    @property
    def verdict(self) -> ScalerUse:
        if self.with_library:
            return ScalerUse.WITH_LIBRARY
        if self.unseen or not self.off_library:
            return ScalerUse.UNSEEN
        return ScalerUse.OFF_LIBRARY


@dataclass(frozen=True)
class ScalerUses:
    verdict: ScalerUse
    # Some use runs off the library's path: the line is shared with another back end.
    shared: bool


def scaler_use(program: Program, call: cst.Call) -> ScalerUses:
    """How the scaler ``call`` builds is used; UNSEEN when it is not bound to a plain name or
    has no use smpfix can follow."""
    name = _bound_name(program.file, call)
    if name is None:
        return ScalerUses(ScalerUse.UNSEEN, False)
    uses = _Uses()
    scope = _scope_of(program.file, call)
    _follow(program, program.file, scope, name, uses, _DEPTH)
    return ScalerUses(uses.verdict, uses.off_library)


def _bound_name(file: ParsedFile, call: cst.Call) -> Optional[str]:
    """``scaler = GradScaler()`` or ``scaler = GradScaler() if amp else None``: ``scaler``."""
    child: cst.CSTNode = call
    for parent in file.parents.ancestors(call):
        if type(parent) is cst.IfExp and child is not parent.test:
            child = parent
            continue
        if type(parent) is cst.Assign and len(parent.targets) == 1:
            target = parent.targets[0].target
            return target.value if type(target) is cst.Name else None
        if type(parent) is cst.AnnAssign and type(parent.target) is cst.Name:
            return parent.target.value
        return None
    return None


def _scope_of(file: ParsedFile, node: cst.CSTNode) -> cst.CSTNode:
    for ancestor in file.parents.ancestors(node):
        if type(ancestor) is cst.FunctionDef:
            return ancestor
    return file.module


def _follow(
    program: Program,
    file: ParsedFile,
    scope: cst.CSTNode,
    name: str,
    uses: _Uses,
    depth: int,
) -> None:
    key = (file.path, f"{id(scope)}:{name}")
    if key in uses.seen:
        return
    uses.seen.add(key)
    library = uses.library(file)
    for node in iter_nodes(scope):
        if type(node) is not cst.Name or node.value != name:
            continue
        parent = file.parents.parent_of(node)
        if type(parent) is cst.Attribute and parent.value is node:
            if parent.attr.value not in _GRADIENT_METHODS:
                continue
            if library.runs_with_library(parent):
                uses.with_library = True
            else:
                uses.off_library = True
        elif type(parent) is cst.Arg and parent.value is node:
            _passed(program, file, parent, uses, depth)


def _passed(program: Program, file: ParsedFile, arg: cst.Arg, uses: _Uses, depth: int) -> None:
    """The scaler is an argument: follow it into the callee's parameter."""
    call = file.parents.parent_of(arg)
    if type(call) is not cst.Call or depth == 0:
        uses.unseen = True
        return
    found = _callee(program, file, call)
    if found is None:
        uses.unseen = True
        return
    callee_file, function = found
    parameter = _parameter(function, call, arg)
    if parameter is None:
        uses.unseen = True
        return
    _follow(program, callee_file, function, parameter, uses, depth - 1)


def _callee(
    program: Program, file: ParsedFile, call: cst.Call
) -> Optional[tuple[ParsedFile, cst.FunctionDef]]:
    if type(call.func) is cst.Name and call.func.value in file.facts.functions:
        return file, file.facts.functions[call.func.value]
    qualified = file.facts.qualified_name(call.func)
    modules = program.modules
    if qualified is None or modules is None:
        return None
    defined = modules.for_importer(file.path).definition(qualified)
    if defined is None:
        return None
    linked, name = defined
    function = linked.facts.functions.get(name)
    return (linked, function) if function is not None else None


def _parameter(function: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> Optional[str]:
    parameters = function.params
    if arg.keyword is not None:
        return arg.keyword.value
    if arg.star:
        return None
    position = list(call.args).index(arg)
    positional = [*parameters.posonly_params, *parameters.params]
    return positional[position].name.value if position < len(positional) else None
