"""SMP004: a script imports SMP v1 and SMP v2."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst
from libcst.helpers import get_full_name_for_node

from smpfix.base.imports import SMP_V2
from smpfix.program.facts import FileFacts
from smpfix.rules.rule import FixAvailability, Rule, TensorParallelism
from smpfix.rules.scope import FileScope, Library

_V1 = "smdistributed.modelparallel"


class ScriptImportsBothLibraries(Rule):
    summary = (
        "The script imports SMP v1 (`smdistributed.modelparallel`) and SMP v2"
        " (`torch.sagemaker`): no container has both, so one of the imports fails."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.NONE
    library = Library.EITHER
    scope = FileScope.SMP_V2

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        return facts.imports_smp

    def leave_Module(self, node: cst.Module) -> None:
        first: dict[str, cst.CSTNode] = {}
        for statement in self.program.file.nodes_of(cst.Import, cst.ImportFrom):
            for library in _libraries(statement):
                first.setdefault(library, statement)
        if len(first) < 2:
            return
        v2 = " ".join(self.program.code_for(first[SMP_V2]).split())
        self.report(
            first[_V1],
            "script imports SMP v1 and SMP v2: no container has both, so one import fails",
            explanation=(
                "SMP v1 (`smdistributed.modelparallel`) and SMP v2 (`torch.sagemaker`) are two"
                " different libraries and no container has both (SMP v1 ends with the PyTorch"
                " 2.0.0 container, SMP v2 comes in its own image from PyTorch 2.0.1), so the job"
                " fails at one of the two imports. Keep the library the launcher starts: for SMP"
                " v2 remove this import and its calls (`smp.DistributedModel`, `smp.step`, ...),"
                " for SMP v1 the `torch.sagemaker` import."
            ),
            evidence=(f"the SMP v2 import: `{v2}`",),
        )


def _libraries(statement: cst.CSTNode) -> Iterator[str]:
    """The SMP libraries an import statement imports from."""
    names: list[str] = []
    if isinstance(statement, cst.Import):
        names = [get_full_name_for_node(alias.name) or "" for alias in statement.names]
    elif (
        isinstance(statement, cst.ImportFrom)
        and statement.module is not None
        and not statement.relative
    ):
        module = get_full_name_for_node(statement.module) or ""
        aliases = statement.names if not isinstance(statement.names, cst.ImportStar) else ()
        names = [module, *(f"{module}.{get_full_name_for_node(a.name)}" for a in aliases)]
    for name in names:
        for library in (_V1, SMP_V2):
            if name == library or name.startswith(library + "."):
                yield library
                break
