"""Initialisation: ``smp.init(...)`` -> ``dist.init_process_group`` then ``tsm.init()``.

SMP v2 runs on a process group PyTorch creates (the reference's "use SMP v2" page: initialise
PyTorch Distributed, then ``torch.sagemaker.init()``), reads its configuration from the
launcher, and, unlike v1, does not pick the GPU: each process sets its device from
``LOCAL_RANK``. A v1 configuration dict passed to ``smp.init`` moves to the launcher (the
launcher half of the migration); the item says so.
"""

from __future__ import annotations

import libcst as cst

from smpfix.migrate import links
from smpfix.migrate.items import Outcome
from smpfix.migrate.script.context import Context
from smpfix.migrate.script.plan import in_place_of


def migrate_init(ctx: Context) -> None:
    facts = ctx.program.facts
    sets_device = bool(facts.calls_of("torch.cuda.set_device"))
    # A script that already creates the process group (a DDP script started by an SMP launcher)
    # must not create it twice.
    has_group = bool(facts.calls_of("torch.distributed.init_process_group"))
    for call in ctx.calls("init"):
        statement = ctx.statement(call)
        if not _alone(statement, call):
            continue
        assert statement is not None
        lines = [f"{ctx.tsm}.init()"]
        if not has_group:
            lines.insert(0, f'{ctx.dist}.init_process_group(backend="nccl")')
            has_group = True
        if not sets_device:
            lines.append(f"{ctx.torch}.cuda.set_device({ctx.local_rank()})")
            sets_device = True
        ctx.plan.replace_statement(statement, in_place_of(*lines))
        ctx.plan.handle(call.func)
        dropped = " (its configuration is the launcher's in v2)" if call.args else ""
        ctx.plan.add(
            ctx.line(call),
            Outcome.MOVED,
            "initialisation",
            f"`{ctx.program.code_for(call.func)}()` -> `{'`, `'.join(lines)}`{dropped}",
            links.USE_V2,
        )


def _alone(statement: object, call: cst.Call) -> bool:
    """``smp.init(...)`` written as a statement of its own (not inside an expression)."""
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and statement.body[0].value is call
    )
