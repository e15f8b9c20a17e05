"""The v1 imports go once nothing in the file names the library any more.

``import smdistributed.modelparallel.torch as smp`` and its ``from`` forms are dropped only
when every reference was moved; otherwise they stay, so a partly migrated file still runs under
v1. The v2 imports the new code needs are added by ``Context`` as it names them.
"""

from __future__ import annotations

import libcst as cst

from smpfix.base.imports import ImportTable, dotted_name
from smpfix.migrate.script.context import Context

_V1 = "smdistributed.modelparallel"


def _imports_v1(statement: cst.CSTNode) -> bool:
    if isinstance(statement, cst.Import):
        return all((dotted_name(alias.name) or "").startswith(_V1) for alias in statement.names)
    if (
        isinstance(statement, cst.ImportFrom)
        and statement.module is not None
        and not statement.relative
    ):
        return (dotted_name(statement.module) or "").startswith(_V1)
    return False


def drop_v1_imports(ctx: Context) -> frozenset[str]:
    """Drop the v1 imports; the names they bound (``smp``; ``smdistributed`` for ``import
    smdistributed.modelparallel``), which the rewritten file must no longer read."""
    bound: set[str] = set()
    for node in ctx.program.file.nodes_of(cst.Import, cst.ImportFrom):
        statement = ctx.statement(node)
        if (
            isinstance(statement, cst.SimpleStatementLine)
            and len(statement.body) == 1
            and _imports_v1(node)
        ):
            ctx.plan.drop(statement)
            assert isinstance(node, (cst.Import, cst.ImportFrom))
            bound |= set(ImportTable.from_statements([node]).bindings)
    return frozenset(name for name in bound if "." not in name and not name.startswith("*"))
