"""Pipeline placement in a job of one pipeline stage: ``smp.set_partition(module, i)`` and
``with smp.partition(i):`` place modules on stages, and with one stage every module is on it.
Scripts written for any degree keep these calls on a path the job does not need; v2 has no
stages, so the calls go (a loop left with nothing to do goes too) and a ``partition`` block
keeps its body. A job of more stages is blocked before this runs (``blocking.py``).
"""

from __future__ import annotations

import libcst as cst

from smpfix.migrate import links
from smpfix.migrate.items import Outcome
from smpfix.migrate.script.context import Context
from smpfix.migrate.script.plan import leading_lines


def migrate_placement(ctx: Context) -> None:
    for call in ctx.calls("set_partition"):
        statement = ctx.statement(call)
        if statement is None or not (
            isinstance(statement, cst.SimpleStatementLine)
            and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr)
            and statement.body[0].value is call
        ):
            continue
        ctx.plan.drop(ctx.loop_of(statement))
        ctx.plan.handle(call.func)
        ctx.plan.add(
            ctx.line(call),
            Outcome.MOVED,
            "pipeline-parallelism",
            "`smp.set_partition(...)` removed: the job has one pipeline stage, v2 none",
            links.UPGRADE_FROM_V1,
        )
    for call in ctx.calls("partition"):
        item = ctx.parent(call)
        block = ctx.parent(item) if isinstance(item, cst.WithItem) else None
        if (
            not isinstance(block, cst.With)
            or len(block.items) != 1
            or not isinstance(block.body, cst.IndentedBlock)
        ):
            continue
        ctx.plan.replace_statement(block, _body)
        ctx.plan.handle(call.func)
        ctx.plan.add(
            ctx.line(call),
            Outcome.MOVED,
            "pipeline-parallelism",
            "`with smp.partition(...):` removed (its body stays): one pipeline stage",
            links.UPGRADE_FROM_V1,
        )


def _body(updated: cst.BaseStatement) -> list[cst.BaseStatement]:
    assert isinstance(updated, cst.With) and isinstance(updated.body, cst.IndentedBlock)
    body: list[cst.BaseStatement] = list(updated.body.body)
    body[0] = body[0].with_changes(leading_lines=[*updated.leading_lines, *leading_lines(body[0])])
    return body
