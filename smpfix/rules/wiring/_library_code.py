"""Does this code run with the library: "is this PyTorch feature used in the model-parallel path?"

Scripts written for several back ends keep each one's code apart: a function for the
data-parallel set-up beside one for the model-parallel set-up, or
``if is_sagemaker_mp_enabled(): scaler = smp.amp.GradScaler() else: scaler =
torch.cuda.amp.GradScaler()``. A feature the library does not support is a problem only on the
library's path, so rules about
such features ask ``LibraryCode.runs_with_library(node)``. It is False when

- ``node`` sits on one side of an ``if`` whose other side uses the library (a library member,
  or a call of one of the file's step functions) and its own side does not (the non-library
  branch of a switch), or
- its function neither uses the library nor is reached from code that does (a step function,
  a function calling a library member, and the file's functions they call by name, to any
  depth), or, at module level, no module-level statement uses the library.

Anything else counts as the library's path: precision here means not calling code outside
that path a mistake.
"""

from __future__ import annotations

from typing import Optional, Union

import libcst as cst

from smpfix.base.imports import dotted_name
from smpfix.base.walker import children, iter_nodes, known_own_nodes
from smpfix.program.project.parsed_file import ParsedFile
from smpfix.program.steps import step_bodies, step_functions


class LibraryCode:
    """Answers ``runs_with_library`` for one file; build once per rule that needs it."""

    def __init__(self, file: ParsedFile) -> None:
        self.facts = file.facts
        self.module = module = file.module
        self.parents = file.parents
        self._uses: dict[int, bool] = {}
        self._steps = frozenset(step.name for step in step_functions(self.facts))
        top: list[cst.CSTNode] = [
            s for s in module.body if not isinstance(s, (cst.FunctionDef, cst.ClassDef))
        ]
        self.module_level = any(self._uses_library(s) for s in top)
        self.functions = self._library_functions(top if self.module_level else [])

    def runs_with_library(self, node: cst.CSTNode) -> bool:
        if self._in_non_library_branch(node):
            return False
        function = self._function_of(node)
        if function is None:
            return self.module_level
        return function in self.functions

    # -- internals --------------------------------------------------------------------------
    def _uses_library(self, node: cst.CSTNode) -> bool:
        known = self._uses.get(id(node))
        if known is None:
            member = self.facts.smp_member
            known = self._uses[id(node)] = any(
                member(child.func if type(child) is cst.Call else child) is not None
                or (
                    type(child) is cst.Call
                    and type(child.func) is cst.Name
                    and child.func.value in self._steps
                )
                for child in _own_nodes(node)
                if type(child) is cst.Call or type(child) is cst.Attribute
            )
        return known

    def _function_of(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
        for ancestor in self.parents.ancestors(node):
            if type(ancestor) is cst.FunctionDef:
                return ancestor
        return None

    def _in_non_library_branch(self, node: cst.CSTNode) -> bool:
        child: cst.CSTNode = node
        for ancestor in self.parents.ancestors(node):
            if type(ancestor) is cst.FunctionDef:
                return False
            if (
                type(ancestor) is cst.If
                and ancestor.orelse is not None
                and (child is ancestor.body or child is ancestor.orelse)
            ):
                other: cst.CSTNode = ancestor.orelse if child is ancestor.body else ancestor.body
                if self._uses_library(other) and not self._uses_library(child):
                    return True
            child = ancestor
        return False

    def _library_functions(self, top: list[cst.CSTNode]) -> frozenset[cst.FunctionDef]:
        """Functions that use the library, run a step, or are called (by name, or as a class
        being built) from such functions or from module-level code that uses the library."""
        functions = [node for node in iter_nodes(self.module) if type(node) is cst.FunctionDef]
        by_name: dict[str, list[cst.FunctionDef]] = {}
        for function in functions:
            by_name.setdefault(function.name.value, []).append(function)
        for name, cls in self.facts.classes.items():
            # Building an instance runs the class's code: its methods run with whoever builds it.
            by_name.setdefault(name, []).extend(
                s for s in cls.body.body if type(s) is cst.FunctionDef
            )
        found = set(step_bodies(step_functions(self.facts)))
        found.update(function for function in functions if self._uses_library(function.body))
        for statement in top:
            for call in _own_nodes(statement):
                if type(call) is cst.Call and type(call.func) is cst.Name:
                    found.update(by_name.get(call.func.value, ()))
        pending = list(found)
        while pending:
            current = pending.pop()
            for call in _own_nodes(current.body):
                if type(call) is cst.Call and type(call.func) is cst.Name:
                    for callee in by_name.get(call.func.value, ()):
                        if callee not in found:
                            found.add(callee)
                            pending.append(callee)
            # Functions nested in library code run with it too.
            for nested in iter_nodes(current.body):
                if type(nested) is cst.FunctionDef and nested not in found:
                    found.add(nested)
                    pending.append(nested)
        return frozenset(found)


_NESTED = frozenset({cst.FunctionDef, cst.ClassDef})
# The library's modules (``smdistributed.modelparallel.torch``, ...).
_LIBRARY = "smdistributed.modelparallel"


def _own_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Nodes of ``node`` without nested functions and classes (their code runs elsewhere), in
    no particular order."""
    indexed = known_own_nodes(node, _NESTED)
    if indexed is not None:
        return [indexed[0], *(own for own in indexed[1:] if type(own) not in _NESTED)]
    found: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(
            child
            for child in children(current)
            if not isinstance(child, (cst.FunctionDef, cst.ClassDef))
        )
    return found


def library_import_optional(file: ParsedFile) -> bool:
    """The file imports the library inside ``try:`` (``except ImportError: smp = None``): the
    code around it runs without the library too."""
    for node in iter_nodes(file.module):
        if type(node) is cst.Try and any(_imports_library(s) for s in _imports(node.body)):
            return True
    return False


def _imports_library(statement: Union[cst.Import, cst.ImportFrom]) -> bool:
    if isinstance(statement, cst.Import):
        names = [dotted_name(alias.name) or "" for alias in statement.names]
    else:
        module = dotted_name(statement.module) if statement.module is not None else ""
        aliases = statement.names if not isinstance(statement.names, cst.ImportStar) else ()
        names = [module or "", *(f"{module}.{dotted_name(a.name)}" for a in aliases)]
    return any(name.startswith(_LIBRARY) for name in names)


def _imports(body: cst.BaseSuite) -> list[Union[cst.Import, cst.ImportFrom]]:
    return [
        small
        for statement in (body.body if isinstance(body, cst.IndentedBlock) else [body])
        if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite))
        for small in statement.body
        if isinstance(small, (cst.Import, cst.ImportFrom))
    ]
