"""The v1 references no transformation moved: collectives on v1's groups, ``smp.nn`` modules,
and any other member. Each gets a ``TODO`` comment and an item; while one is left, the file
stays as it is, so it still runs under v1 until a person finishes. v1's ``__version__``, which
scripts only log, is the one reference written as a scaffold here.

A file with anything left keeps all its v1 code (only ``TODO`` comments are added): half of it
on v2 would import both libraries, which no container has.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from smpfix.migrate import links
from smpfix.migrate.items import Outcome
from smpfix.migrate.script.context import Context
from smpfix.migrate.script.plan import Plan, todo_comment


def references(ctx: Context) -> Iterator[cst.CSTNode]:
    """Every outermost name or attribute that names a v1 member, outside import statements."""
    for node in ctx.program.file.nodes_of(cst.Name, cst.Attribute):
        parent = ctx.parent(node)
        if isinstance(parent, cst.Attribute):
            continue  # a part of a longer name, or the name after a dot
        if isinstance(parent, (cst.ImportAlias, cst.Import, cst.ImportFrom)):
            continue
        if any(isinstance(a, (cst.Import, cst.ImportFrom)) for a in ctx.ancestors(node)):
            continue
        qualified = ctx.program.facts.imports.qualified_name(node) or ""  # type: ignore[arg-type]
        if ctx.member(node) is not None or qualified.startswith("smdistributed.modelparallel"):
            yield node


def left_over(ctx: Context) -> list[cst.CSTNode]:
    plan = ctx.plan
    covered = plan.handled | set(plan.expressions) | plan.dropped | plan.decorators
    return [
        node
        for node in references(ctx)
        if id(node) not in covered and not any(id(a) in covered for a in ctx.ancestors(node))
    ]


_VERSIONS = frozenset(
    {"smdistributed.modelparallel.__version__", "smdistributed.modelparallel.torch.__version__"}
)


def migrate_version(ctx: Context) -> None:
    """v1's ``__version__``, which scripts log: v2 has no documented counterpart, so the value
    becomes ``"unknown"`` with a ``TODO`` (a log line is no reason to keep the file on v1)."""
    imports = ctx.program.facts.imports
    for node in ctx.program.file.nodes_of(cst.Attribute):
        assert isinstance(node, cst.Attribute)
        if imports.qualified_name(node) not in _VERSIONS:
            continue
        statement = ctx.statement(node)
        if statement is None:
            continue
        ctx.plan.replace_with(node, '"unknown"')
        ctx.plan.handle(node)
        what = "v1's version was logged here: log the SMP v2 release the job runs"
        ctx.plan.comment(statement, todo_comment("version", what, links.SUPPORTED_FRAMEWORKS))
        ctx.plan.add(ctx.line(node), Outcome.SCAFFOLD, "version", what, links.SUPPORTED_FRAMEWORKS)


def report_leftovers(ctx: Context) -> bool:
    """Report what no transformation moved, in a plan of its own that only adds the ``TODO``
    comments (a file that still needs the v1 library cannot also import v2: SMP004); whether
    anything was left."""
    left = left_over(ctx)
    if not left:
        return False
    ctx.plan = Plan(ctx.plan.path)
    seen: set[int] = set()
    for node in left:
        statement = ctx.statement(node)
        member = ctx.member(node) or ""
        key = id(statement) if statement is not None else id(node)
        if key in seen:
            continue
        seen.add(key)
        if member.startswith("nn."):
            topic = "smp-nn"
            what = (
                f"smp.{member} has no v2 counterpart: build the model from Hugging Face or"
                " PyTorch modules (tsm.transform gives tensor parallelism to the families"
                " v2 supports)"
            )
            link = links.TENSOR_PARALLELISM
        elif member in ("broadcast", "send", "recv_from", "allgather", "barrier"):
            topic = "collectives"
            what = (
                f"smp.{member} on v1's groups: use torch.distributed's collective over a"
                " group of the same ranks"
            )
            link = links.UPGRADE_FROM_V1
        else:
            topic = "v1-api"
            what = (
                f"{ctx.program.code_for(node)} has no v2 counterpart smpfix can write:"
                " move it by hand"
            )
            link = links.UPGRADE_FROM_V1
        if statement is not None:
            ctx.plan.comment(statement, todo_comment(topic, what, link))
        # Blocking: the file stays on v1 until a person moves this, so its job must too (a
        # launcher moved to v2 would start a script that still needs v1).
        ctx.plan.add(ctx.line(node), Outcome.REPORT, topic, what, link, blocking=True)
    return True
