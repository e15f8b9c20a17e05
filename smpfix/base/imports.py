"""Which local names mean which imported objects, from the module's own import statements.

LibCST's ``QualifiedNameProvider`` builds a full scope analysis and costs about eight parses
per file. Training scripts import the library at the top and rarely shadow it, so a table of
the file's imports answers "is ``mp.DistributedModel`` the library's ``DistributedModel``?"
for a fraction of that cost. Imports anywhere in the file count (a script that imports
inside ``main()`` is still an SMP script); a local variable that shadows an import is not
tracked, which is the one precision this gives up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Optional, Union

import libcst as cst

SMP_TORCH = "smdistributed.modelparallel.torch"
SMP_TF = "smdistributed.modelparallel.tensorflow"
# The undocumented TensorFlow 1 API: another step, no ``DistributedModel`` class.
SMP_TF_V1 = "smdistributed.modelparallel.tensorflow.v1"
SMP_V2 = "torch.sagemaker"


def dotted_name(node: cst.BaseExpression) -> Optional[str]:
    """``a.b.c`` for a chain of names and attributes; None for anything else."""
    parts: list[str] = []
    current: cst.BaseExpression = node
    while type(current) is cst.Attribute:  # exact types: isinstance against a LibCST class is slow
        parts.append(current.attr.value)
        current = current.value
    if type(current) is not cst.Name:
        return None
    parts.append(current.value)
    return ".".join(reversed(parts))


def _module_name(node: Union[cst.Attribute, cst.Name]) -> str:
    name = dotted_name(node)
    assert name is not None
    return name


@dataclass(frozen=True)
class ImportTable:
    """Local name -> fully qualified name, built from ``import`` and ``from ... import``."""

    bindings: Mapping[str, str] = field(default_factory=dict)
    # Names of the project's own modules that stand for the library (qualified prefix ->
    # the library's qualified name): ``utils.dist.wrap_model`` for
    # ``smdistributed.modelparallel.torch.DistributedModel`` when that helper returns
    # ``smp.DistributedModel(model)``, ``utils.smp`` for a module the helper re-exports.
    # Found by ``smpfix.program.objects.library_wrappers``; empty for a file alone.
    aliases: Mapping[str, str] = field(default_factory=dict)
    # The library's modules a file that never imports them runs through the project's
    # functions it calls (``args = dist_setting(args)``, which calls ``smp.rank()``): the
    # file is a script of the library (``imports_module``), though no name of it is one.
    reached: tuple[str, ...] = ()
    # Answers already given, by the node's ``id`` (a node's own ``__hash__`` is a Python call,
    # and rules ask hundreds of thousands of times per project) with the node itself, which
    # keeps it alive, so that no other node can take its id: rules ask about the same calls
    # over and over, and neither the table nor a node ever changes.
    _resolved: dict[int, tuple[cst.CSTNode, Optional[str]]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    # The same for ``smp_member``, and ``imports_module``'s answers by prefix.
    _members: dict[int, tuple[cst.CSTNode, Optional[str]]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    _modules: dict[str, bool] = field(default_factory=dict, init=False, compare=False, repr=False)

    @classmethod
    def from_statements(
        cls, statements: Iterable[Union[cst.Import, cst.ImportFrom]], package: str = ""
    ) -> ImportTable:
        bindings: dict[str, str] = {}
        for statement in statements:
            if isinstance(statement, cst.Import):
                for alias in statement.names:
                    full = _module_name(alias.name)
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        bindings[alias.asname.name.value] = full
                    else:
                        head = full.split(".")[0]
                        bindings.setdefault(head, head)
                        # `import a.b.c` binds `a`, but remember the submodule was imported so
                        # that `a.b.c.X` resolves to itself.
                        bindings.setdefault(full, full)
            else:
                if statement.module is None and not statement.relative:
                    continue
                module = _module_name(statement.module) if statement.module is not None else ""
                if statement.relative:
                    # Relative imports name the user's own modules, never the library.
                    module = "." * len(statement.relative) + module
                if isinstance(statement.names, cst.ImportStar):
                    bindings[f"*{module}"] = module
                    continue
                for alias in statement.names:
                    imported = _module_name(alias.name)
                    local = imported
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        local = alias.asname.name.value
                    joined = (
                        f"{module}{imported}" if module.strip(".") == "" else f"{module}.{imported}"
                    )
                    bindings[local] = joined if module else imported
        return cls(bindings=bindings)

    @classmethod
    def of_module(cls, module: cst.Module) -> ImportTable:
        """The table of every import statement in ``module``, wherever it is (as the facts build
        it)."""
        from smpfix.base.walker import nodes_of_type

        return cls.from_statements(nodes_of_type(module, cst.Import, cst.ImportFrom))

    def qualified_name(self, node: cst.BaseExpression) -> Optional[str]:
        """The qualified name ``node`` refers to, or None when it is not an imported name.

        ``smp.DistributedModel`` with ``import smdistributed.modelparallel.torch as smp`` gives
        ``smdistributed.modelparallel.torch.DistributedModel``; ``DistributedModel`` imported
        with ``from`` gives the same.
        """
        known = self._resolved.get(id(node))
        if known is not None and known[0] is node:
            return known[1]
        found = self._qualify(node)
        self._resolved[id(node)] = (node, found)
        return found

    def smp_member(self, node: cst.BaseExpression) -> Optional[str]:
        """The library member ``node`` names (``"DistributedModel"``, ``"nn.DistributedLinear"``),
        remembered like ``qualified_name``.

        Both the PyTorch and the TensorFlow flavour count. None when ``node`` is not the library.
        """
        known = self._members.get(id(node))
        if known is not None and known[0] is node:
            return known[1]
        member = library_member(self.qualified_name(node))
        self._members[id(node)] = (node, member)
        return member

    def _qualify(self, node: cst.BaseExpression) -> Optional[str]:
        found = self.imported_name(node)
        if found is None or not self.aliases:
            return found
        parts = found.split(".")
        for cut in range(len(parts), 0, -1):
            alias = self.aliases.get(".".join(parts[:cut]))
            if alias is not None:
                return ".".join([alias, *parts[cut:]])
        return found

    def through_alias(self, node: cst.BaseExpression) -> bool:
        """Whether ``node`` names the library only through a project wrapper (``aliases``)."""
        return bool(self.aliases) and self.qualified_name(node) != self.imported_name(node)

    def imported_name(self, node: cst.BaseExpression) -> Optional[str]:
        """The qualified name ``node`` refers to as its imports spell it, before ``aliases``."""
        dotted = dotted_name(node)
        if dotted is None:
            return None
        parts = dotted.split(".")
        # Longest bound prefix wins: `import a.b.c` then `a.b.c.X`.
        for cut in range(len(parts), 0, -1):
            prefix = ".".join(parts[:cut])
            bound = self.bindings.get(prefix)
            if bound is not None:
                rest = parts[cut:]
                return ".".join([bound, *rest])
        starred = self._starred_library
        return f"{starred}.{dotted}" if starred else None

    @cached_property
    def _starred_library(self) -> str:
        """The library module of the first ``from smdistributed... import *``, or ""."""
        for key, module in self.bindings.items():
            if key.startswith("*") and module in (SMP_TORCH, SMP_TF):
                return module
        return ""

    def imports_module(self, prefix: str) -> bool:
        known = self._modules.get(prefix)
        if known is None:
            known = self._modules[prefix] = any(
                value == prefix or value.startswith(prefix + ".")
                for values in (self.bindings.values(), self.aliases.values(), self.reached)
                for value in values
            )
        return known

    def local_names_for(self, qualified: str) -> list[str]:
        """Local names bound to exactly ``qualified`` (used to write new code the file's way)."""
        return sorted(
            local
            for local, value in self.bindings.items()
            if value == qualified and not local.startswith("*")
        )


# ``smp_member(table, node)``: the method itself, without a call around it (rules ask it
# hundreds of thousands of times per project).
smp_member = ImportTable.smp_member


def library_member(qualified: Optional[str]) -> Optional[str]:
    """The library member a qualified name is (``"init"``), or None when it is not the library."""
    if qualified is None:
        return None
    for module in (SMP_TORCH, SMP_TF):
        if qualified.startswith(module + "."):
            member = qualified[len(module) + 1 :]
            # `smdistributed.modelparallel.tensorflow.v2` re-exports the TensorFlow 2 API.
            return member[len("v2.") :] if module == SMP_TF and member.startswith("v2.") else member
    if qualified.startswith("smdistributed.modelparallel."):
        rest = qualified[len("smdistributed.modelparallel.") :]
        head, _, member = rest.partition(".")
        if head in ("torch", "tensorflow") and member:
            return member
    return None
