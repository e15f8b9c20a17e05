"""The v1 references no transformation moved: collectives on v1's groups, ``smp.nn`` modules,
and any other member. Each gets a ``TODO`` comment and an item; while one is left, the file
stays as it is, so it still runs under v1 until a person finishes.

``x = smp.allgather(obj, group)`` is written in its v2 shape, ``all_gather_object`` into a
list (the world's group is v1's data-parallel group when there is one pipeline stage); on a
group v2 does not have, the shape is written with a ``TODO`` to build that group.

A file with anything left keeps all its v1 code (only ``TODO`` comments are added): half of it
on v2 would import both libraries, which no container has.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from smpfix.migrate import links
from smpfix.migrate.items import Outcome
from smpfix.migrate.script.context import Context
from smpfix.migrate.script.plan import Plan, in_place_of, todo_comment
from smpfix.migrate.script.wrap import code

_WORLD_GROUPS = frozenset({"WORLD", "DP_GROUP"})


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


def migrate_collectives(ctx: Context) -> None:
    for call in ctx.calls("allgather"):
        statement = ctx.statement(call)
        if not (
            isinstance(statement, cst.SimpleStatementLine)
            and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Assign)
            and statement.body[0].value is call
            and len(statement.body[0].targets) == 1
            and type(statement.body[0].targets[0].target) is cst.Name
            and len(call.args) == 2
            and not any(arg.keyword for arg in call.args)
        ):
            continue
        group = ctx.member(call.args[1].value)
        if group is None:
            continue
        target = statement.body[0].targets[0].target.value  # type: ignore[attr-defined]
        dist = ctx.dist
        ctx.plan.replace_statement(
            statement,
            in_place_of(
                f"{target} = [None] * {dist}.get_world_size()",
                f"{dist}.all_gather_object({target}, {code(call.args[0].value)})",
            ),
        )
        ctx.plan.handle(call.func, call.args[1].value)
        line = ctx.line(call)
        if group in _WORLD_GROUPS:
            ctx.plan.add(
                line,
                Outcome.MOVED,
                "collectives",
                f"`smp.allgather(..., smp.{group})` -> `{dist}.all_gather_object` over the world",
                links.UPGRADE_FROM_V1,
            )
            continue
        what = (
            f"v2 has no smp.{group}: gather over a group of the ranks v1's {group} held"
            f" ({dist}.new_group) and size the list to it"
        )
        ctx.plan.comment(statement, todo_comment("collectives", what, links.UPGRADE_FROM_V1))
        ctx.plan.add(line, Outcome.SCAFFOLD, "collectives", what, links.UPGRADE_FROM_V1)


_WORLD_RANKS = frozenset({"RankType.WORLD_RANK", "RankType.DP_RANK"})


def migrate_broadcasts(ctx: Context) -> None:
    """v1's ``smp.broadcast(obj, group)`` on one rank and ``smp.recv_from(src, rank_type)`` on
    the others become one ``broadcast_object_list`` collective on every rank: the sender's list
    holds the object, the receivers' a placeholder. Over the world (v1's data-parallel group
    and ranks with one pipeline stage); another group is left to a person."""
    dist = None
    for call in ctx.calls("broadcast"):
        statement = ctx.statement(call)
        if (
            len(call.args) != 2
            or any(arg.keyword for arg in call.args)
            or ctx.member(call.args[1].value) not in _WORLD_GROUPS
            or not _alone(statement, call, cst.Expr)
        ):
            continue
        assert statement is not None
        dist = dist or ctx.dist
        sent = code(call.args[0].value)
        ctx.plan.replace_statement(
            statement,
            in_place_of(f"{dist}.broadcast_object_list([{sent}], src={dist}.get_rank())"),
        )
        ctx.plan.handle(call.func, call.args[1].value)
        ctx.plan.add(
            ctx.line(call),
            Outcome.MOVED,
            "collectives",
            "`smp.broadcast` -> `broadcast_object_list` from this rank (the receivers'"
            " `smp.recv_from` calls take part in the same collective)",
            links.UPGRADE_FROM_V1,
        )
    for call in ctx.calls("recv_from"):
        statement = ctx.statement(call)
        if (
            len(call.args) != 2
            or any(arg.keyword for arg in call.args)
            or ctx.member(call.args[1].value) not in _WORLD_RANKS
            or not _alone(statement, call, cst.Assign)
        ):
            continue
        assert isinstance(statement, cst.SimpleStatementLine)
        assign = statement.body[0]
        assert isinstance(assign, cst.Assign)
        target = assign.targets[0].target
        if len(assign.targets) != 1 or type(target) is not cst.Name:
            continue
        dist = dist or ctx.dist
        holder = f"{target.value}_received"
        ctx.plan.replace_statement(
            statement,
            in_place_of(
                f"{holder} = [None]",
                f"{dist}.broadcast_object_list({holder}, src={code(call.args[0].value)})",
                f"{target.value} = {holder}[0]",
            ),
        )
        ctx.plan.handle(call.func, call.args[1].value)
        ctx.plan.add(
            ctx.line(call),
            Outcome.MOVED,
            "collectives",
            "`smp.recv_from` -> `broadcast_object_list` from the sending rank",
            links.UPGRADE_FROM_V1,
        )


def _alone(statement: object, call: cst.Call, kind: type) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], kind)
        and statement.body[0].value is call  # type: ignore[attr-defined]
    )


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
        ctx.plan.add(ctx.line(node), Outcome.REPORT, topic, what, link)
    return True
