"""Functions of a script that nothing in the project calls: code that no run of it executes.

Real scripts keep helpers they no longer call (a ``save()`` replaced by a trainer's own
checkpointing, copied from an example with the rest of its file). A finding there is about
code no job runs, so it is at most a hint that says so (``Rule.report``).

Only a file that says how it runs is judged: one with an ``if __name__ == "__main__":`` block.
A module without one may be imported by code outside the checked paths, which can call any of
its functions (``ExecutionOrder`` treats them as entry points), and a short script without one
is often a snippet whose helpers the rest of its project calls.
Only plain module-level functions are candidates: a decorator may register its function
(``@app.command``), and a method is called through attributes anywhere.

A candidate is *used* when its name appears outside its own body: in module-level code, in a
class, in a string (``getattr(module, "save")``), in a used function (so a helper only an
unused function calls is unused too), or in a project module that imports the script (its
folder's modules, the launched scripts above it). Attribute names (``torch.save``), keyword
names and the ``def`` itself are not uses.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.imports import dotted_name
from smpfix.base.literals import literal_value
from smpfix.base.parents import ParentIndex
from smpfix.base.walker import iter_nodes
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import ParsedFile


@dataclass(frozen=True)
class UncalledFunctions:
    """The module-level functions of one script that nothing in the project uses."""

    functions: tuple[cst.FunctionDef, ...] = ()

    def enclosing(self, node: cst.CSTNode, parents: ParentIndex) -> Optional[cst.FunctionDef]:
        """The unused function whose body holds ``node``, if any."""
        if not self.functions:
            return None
        unused = {id(function) for function in self.functions}
        for ancestor in parents.ancestors(node):
            if id(ancestor) in unused:
                return ancestor  # type: ignore[return-value]
        return None

    @classmethod
    def of_file(cls, file: ParsedFile, modules: Optional[LocalModules]) -> UncalledFunctions:
        """The unused functions of ``file``; none unless it has a main block. ``modules``
        finds the project modules that import it (None: a lone text)."""
        module = file.module
        if not has_main_block(module):
            return cls()
        candidates = {
            statement.name.value: statement
            for statement in module.body
            if type(statement) is cst.FunctionDef and not statement.decorators
        }
        if not candidates:
            return cls()
        owners = _uses_by_owner(module, candidates, file.parents)
        used = _reached(owners, owners.get(None, set()))
        unused = set(candidates) - used
        if unused and modules is not None:
            named = _named_by_importers(file.path, modules, unused)
            used = _reached(owners, used | named)
            unused = set(candidates) - used
        return cls(tuple(candidates[name] for name in sorted(unused)))


def has_main_block(module: cst.Module) -> bool:
    """The module says how it runs as a script: ``if __name__ == "__main__":`` at its top."""
    return any(_is_main_block(statement) for statement in module.body)


def _is_main_block(statement: cst.CSTNode) -> bool:
    """``if __name__ == "__main__":`` at module level."""
    if type(statement) is not cst.If or type(statement.test) is not cst.Comparison:
        return False
    test = statement.test
    if len(test.comparisons) != 1 or type(test.comparisons[0].operator) is not cst.Equal:
        return False
    sides = {
        dotted_name(side) or literal_value(side)
        for side in (test.left, test.comparisons[0].comparator)
    }
    return sides == {"__name__", "__main__"}


def _uses_by_owner(
    module: cst.Module, candidates: dict[str, cst.FunctionDef], parents: ParentIndex
) -> dict[Optional[str], set[str]]:
    """For each candidate (None: code outside every candidate), the candidates it names."""
    owner_of = {id(function): name for name, function in candidates.items()}
    owners: dict[Optional[str], set[str]] = {}
    for node in iter_nodes(module):
        if type(node) is cst.Name:
            name = node.value
            parent = parents.parent_of(node)
            if name not in candidates or _not_a_use(node, parent):
                continue
        elif type(node) is cst.SimpleString:
            name = literal_value(node)
            if not isinstance(name, str) or name not in candidates:
                continue
        else:
            continue
        owner = _owner(node, parents, owner_of)
        if owner != name:
            owners.setdefault(owner, set()).add(name)
    return owners


def _not_a_use(node: cst.Name, parent: Optional[cst.CSTNode]) -> bool:
    """The name of a ``def``/``class``, an attribute (``torch.save``), or a keyword name."""
    if isinstance(parent, (cst.FunctionDef, cst.ClassDef)) and parent.name is node:
        return True
    if type(parent) is cst.Attribute and parent.attr is node:
        return True
    return type(parent) is cst.Arg and parent.keyword is node


def _owner(node: cst.CSTNode, parents: ParentIndex, owner_of: dict[int, str]) -> Optional[str]:
    for ancestor in parents.ancestors(node):
        found = owner_of.get(id(ancestor))
        if found is not None:
            return found
    return None


def _reached(owners: dict[Optional[str], set[str]], roots: Iterable[str]) -> set[str]:
    """``roots`` and every candidate a reached candidate names."""
    found = set(roots)
    pending = list(found)
    while pending:
        for callee in owners.get(pending.pop(), ()):
            if callee not in found:
                found.add(callee)
                pending.append(callee)
    return found


def _named_by_importers(path: str, modules: LocalModules, names: set[str]) -> set[str]:
    """The ``names`` that a project module importing ``path`` mentions."""
    importers: Sequence[ParsedFile] = (
        *modules.sibling_importers(path),
        *modules.launched_importers(path),
    )
    found: set[str] = set()
    for importer in importers:
        found |= {name for name in names if re.search(rf"\b{re.escape(name)}\b", importer.text)}
    return found
