"""Moving one SMP v1 training script (or a helper module it imports) to SMP v2.

``migrate_script(program)`` reads the file's program model, with the job facts of the launcher
that starts it, and returns the file before and after with an item per change or left-over
task. The modules here each move one concern (initialisation, ranks, the training step's
calls, the wraps, step functions, model-creation contexts, activation checkpointing,
checkpoints, collectives), record their decisions in one ``Plan``, and ``rewrite`` writes the
plan in a single LibCST pass. What v2 cannot run is only reported (``blocking``) and leaves the
file as it is; what no transformation moved keeps the whole file on v1 (``TODO`` comments
only), so it runs under v1 until a person finishes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

import libcst as cst

from smpfix.base.imports import ImportTable
from smpfix.migrate import links
from smpfix.migrate.items import FileMigration, Outcome
from smpfix.migrate.script.activation import migrate_activation_checkpointing
from smpfix.migrate.script.blocking import report_blocking
from smpfix.migrate.script.checkpoints import migrate_checkpoints, migrate_objects
from smpfix.migrate.script.collectives import (
    migrate_broadcasts,
    migrate_collectives,
    migrate_pipeline_exchanges,
)
from smpfix.migrate.script.context import Context
from smpfix.migrate.script.contexts import migrate_contexts
from smpfix.migrate.script.imports import drop_v1_imports
from smpfix.migrate.script.init import migrate_init
from smpfix.migrate.script.leftovers import migrate_version, report_leftovers
from smpfix.migrate.script.pipeline import migrate_placement
from smpfix.migrate.script.plan import Plan
from smpfix.migrate.script.ranks import migrate_layers, migrate_ranks
from smpfix.migrate.script.rewrite import write
from smpfix.migrate.script.shape import job_shape
from smpfix.migrate.script.steps import migrate_steps
from smpfix.migrate.script.training import migrate_training
from smpfix.migrate.script.wrap import migrate_wraps
from smpfix.program.model import Program

__all__ = ["migrate_script"]


def migrate_script(program: Program) -> FileMigration:
    """The file moved to SMP v2 as far as it can be, and what a person must still do."""
    text = program.file.text
    facts = program.facts
    ctx = Context(program, Plan(program.path))
    if not facts.imports_smp:
        return FileMigration(program.path, text, text, ())
    shape = job_shape(ctx)
    report_blocking(ctx, shape)
    if ctx.plan.items:
        # Blocked: the job stays on v1 as a whole (the driver marks it with TODO comments).
        return _result(ctx, text)
    migrate_init(ctx)
    migrate_ranks(ctx)
    migrate_layers(ctx)
    migrate_training(ctx)
    anchor = migrate_wraps(ctx, shape)
    migrate_steps(ctx, shape)
    migrate_contexts(ctx, shape)
    migrate_placement(ctx)
    migrate_activation_checkpointing(ctx, shape, anchor)
    migrate_checkpoints(ctx, anchor)
    migrate_objects(ctx)
    migrate_collectives(ctx)
    migrate_broadcasts(ctx)
    migrate_pipeline_exchanges(ctx)
    migrate_version(ctx)
    dropped = frozenset() if report_leftovers(ctx) else drop_v1_imports(ctx)
    after = write(program.module, ctx.plan)
    problem = _broken(after, dropped)
    if problem is not None:
        ctx.plan.items.clear()
        ctx.plan.add(
            1,
            Outcome.REPORT,
            "internal-error",
            f"smpfix's rewrite of this file {problem}; the file is left as it was:"
            " please report this",
            links.UPGRADE_FROM_V1,
        )
        return _result(ctx, text)
    return _result(ctx, after)


class _Loads(cst.CSTVisitor):
    """The plain names an expression reads (not attributes after a dot, keywords or
    parameters)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        return False

    def visit_ImportAlias(self, node: cst.ImportAlias) -> bool:
        return False


def _broken(after: str, dropped: Iterable[str]) -> Optional[str]:
    """What is wrong with the rewritten text: it does not parse, or it still uses a name of
    the v1 import it dropped; None when neither."""
    try:
        module = cst.parse_module(after)
    except cst.ParserSyntaxError as error:
        return f"does not parse ({error.message})"
    names = frozenset(dropped) - set(ImportTable.of_module(module).bindings)
    if names:
        loads = _Loads()
        module.visit(loads)
        used = loads.names & names
        if used:
            return f"still uses {', '.join(sorted(used))} of the v1 import it removed"
    return None


def _result(ctx: Context, after: str) -> FileMigration:
    items = sorted(ctx.plan.items, key=lambda item: (item.line, item.topic))
    return FileMigration(ctx.program.path, ctx.program.file.text, after, tuple(items))
