"""Writing new code the way the file already writes it.

A fix that introduces ``rdp_rank`` must say ``smp.rdp_rank`` in a file that imports the
library as ``smp``, ``mp.rdp_rank`` with ``as mp``, and plain ``rdp_rank`` (adding it to the
existing ``from ... import``) in a file that imports names directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.edits import InsertAfter, NodeEdit
from smpfix.base.imports import SMP_TORCH
from smpfix.program.project.parsed_file import ParsedFile


@dataclass(frozen=True)
class Reference:
    """Text naming a library member here, plus the import edits it needs (if any)."""

    text: str
    edits: tuple[NodeEdit, ...] = ()


def _from_imports(module: cst.Module) -> list[cst.ImportFrom]:
    from smpfix.base.walker import iter_nodes

    return [node for node in iter_nodes(module) if type(node) is cst.ImportFrom]


def smp_reference(file: ParsedFile, member: str, flavour: str = SMP_TORCH) -> Optional[Reference]:
    """How to name ``flavour.member`` in ``file``; None when the file has no usable import."""
    facts, module = file.facts, file.module
    direct = facts.imports.local_names_for(f"{flavour}.{member}")
    if direct:
        return Reference(direct[0])
    aliases = facts.imports.local_names_for(flavour)
    if aliases:
        preferred = sorted(aliases, key=lambda name: (name.count("."), len(name)))[0]
        return Reference(f"{preferred}.{member}")
    # `import smdistributed.modelparallel` (or `as smdp`): reach the flavour through the package.
    for local, bound in sorted(facts.imports.bindings.items()):
        if (
            not local.startswith("*")
            and flavour.startswith(bound + ".")
            and bound.startswith("smdistributed")
        ):
            return Reference(f"{local}{flavour[len(bound) :]}.{member}")
    for statement in _from_imports(module):
        if (
            statement.relative
            or statement.module is None
            or isinstance(statement.names, cst.ImportStar)
        ):
            continue
        name = module.code_for_node(statement.module)
        if name.replace(" ", "") == flavour and statement.names:
            last = statement.names[-1]
            return Reference(member, (InsertAfter(last.asname or last.name, f", {member}"),))
    return None


def callee(call: cst.Call, module: cst.Module) -> str:
    """How a message names what ``call`` calls: ``random.seed``, or ``.shuffle`` on a chain."""
    func = call.func
    if type(func) is cst.Attribute and not isinstance(func.value, (cst.Name, cst.Attribute)):
        return f".{func.attr.value}"
    return module.code_for_node(func)


def spelled(file: ParsedFile, member: str, flavour: str = SMP_TORCH) -> str:
    """How a message names ``member`` in ``file`` (``mp.dp_rank()``), ``smp.`` as a fallback."""
    reference = smp_reference(file, member, flavour)
    return f"{reference.text}()" if reference is not None else f"smp.{member}()"
