"""Collectives on v1's groups, as PyTorch's collectives over the same ranks.

``x = smp.allgather(obj, group)`` becomes ``all_gather_object`` into a list (the world's group
is v1's data-parallel group when there is one pipeline stage); on a group v2 does not have, the
shape is written with a ``TODO`` to build that group. v1's ``smp.broadcast`` on one rank and
``smp.recv_from`` on the others become one ``broadcast_object_list`` collective.
"""

from __future__ import annotations

import libcst as cst

from smpfix.migrate import links
from smpfix.migrate.items import Outcome
from smpfix.migrate.script.context import Context
from smpfix.migrate.script.plan import in_place_of, todo_comment
from smpfix.migrate.script.wrap import code

_WORLD_GROUPS = frozenset({"WORLD", "DP_GROUP"})


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
# v1's pipeline group and ranks: with one pipeline stage the group holds each rank alone.
_PIPELINE_GROUPS = frozenset({"PP_GROUP"})
_PIPELINE_RANKS = frozenset({"RankType.PP_RANK"})


def migrate_pipeline_exchanges(ctx: Context) -> None:
    """With one pipeline stage, v1's exchanges inside a pipeline group (the official examples'
    data pipeline sends the loader's length from stage 0 to the other stages) have nobody to
    reach: ``smp.broadcast(x, smp.PP_GROUP)`` sends to no other rank and goes; the
    ``smp.recv_from(0, smp.RankType.PP_RANK)`` of the other stages is on a branch no rank
    takes (``smp.pp_rank()`` is 0 on every rank), which a person should remove, so it is
    written as ``None`` with a ``TODO``."""
    if not ctx.one_pipeline_stage:
        return
    for call in ctx.calls("broadcast"):
        statement = ctx.statement(call)
        if not _on(ctx, call, _PIPELINE_GROUPS) or not _alone(statement, call, cst.Expr):
            continue
        assert statement is not None
        ctx.plan.drop(statement)
        ctx.plan.handle(call.func, call.args[1].value)
        ctx.plan.add(
            ctx.line(call),
            Outcome.MOVED,
            "collectives",
            "`smp.broadcast(..., smp.PP_GROUP)` removed: with one pipeline stage the group"
            " holds this rank alone",
            links.UPGRADE_FROM_V1,
        )
    for call in ctx.calls("recv_from"):
        statement = ctx.statement(call)
        if not _on(ctx, call, _PIPELINE_RANKS) or statement is None:
            continue
        ctx.plan.replace_with(call, "None")
        ctx.plan.handle(call.func, call.args[1].value)
        what = (
            "v1 received this from pipeline stage 0; with one stage no rank runs this branch"
            " (smp.pp_rank() was 0 everywhere): remove it"
        )
        ctx.plan.comment(statement, todo_comment("collectives", what, links.UPGRADE_FROM_V1))
        ctx.plan.add(ctx.line(call), Outcome.SCAFFOLD, "collectives", what, links.UPGRADE_FROM_V1)


def migrate_broadcasts(ctx: Context) -> None:
    """v1's ``smp.broadcast(obj, group)`` on one rank and ``smp.recv_from(src, rank_type)`` on
    the others become one ``broadcast_object_list`` collective on every rank: the sender's list
    holds the object, the receivers' a placeholder. Over the world (v1's data-parallel group
    and ranks with one pipeline stage); another group is left to a person."""
    dist = None
    for call in ctx.calls("broadcast"):
        statement = ctx.statement(call)
        if not _on(ctx, call, _WORLD_GROUPS) or not _alone(statement, call, cst.Expr):
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
        if not _on(ctx, call, _WORLD_RANKS) or not _alone(statement, call, cst.Assign):
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


def _on(ctx: Context, call: cst.Call, groups: frozenset[str]) -> bool:
    """``call`` passes two positional arguments, the second one of v1's ``groups`` (or rank
    types)."""
    return (
        len(call.args) == 2
        and not any(arg.keyword or arg.star for arg in call.args)
        and ctx.member(call.args[1].value) in groups
    )


def _alone(statement: object, call: cst.Call, kind: type) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], kind)
        and statement.body[0].value is call  # type: ignore[attr-defined]
    )
