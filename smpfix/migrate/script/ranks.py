"""Ranks, sizes and barriers: ``smp.rank()`` -> ``dist.get_rank()`` and the like.

SMP v2 leaves process groups to PyTorch: the global rank and size are
``torch.distributed``'s, the local rank is what ``torchrun`` (the ``torch_distributed``
launcher) puts in ``LOCAL_RANK``, the tensor-parallel rank is ``tsm.state.tp_rank``, and
the ranks that read different data are the global rank divided by the tensor-parallel degree
(the official v2 example computes its data-parallel rank so). A job that gets here has one
pipeline stage (pipeline parallelism is reported before), so the model-parallel group is the
tensor-parallel one and the pipeline rank is 0.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from smpfix.migrate import links
from smpfix.migrate.items import Outcome
from smpfix.migrate.script.context import Context


def _table(ctx: Context) -> dict[str, Callable[[], str]]:
    return {
        "rank": lambda: f"{ctx.dist}.get_rank()",
        "size": lambda: f"{ctx.dist}.get_world_size()",
        "local_rank": ctx.local_rank,
        "local_size": lambda: f'int({ctx.plain_module("os")}.environ["LOCAL_WORLD_SIZE"])',
        "tp_rank": lambda: f"{ctx.tsm}.state.tp_rank",
        "mp_rank": lambda: f"{ctx.tsm}.state.tp_rank",
        "tp_size": lambda: f"{ctx.tsm}.state.tensor_parallel_degree",
        "mp_size": lambda: f"{ctx.tsm}.state.tensor_parallel_degree",
        "dp_rank": ctx.rdp_rank,
        "rdp_rank": ctx.rdp_rank,
        "dp_size": ctx.rdp_size,
        "rdp_size": ctx.rdp_size,
        "pp_rank": lambda: "0",
        "pp_size": lambda: "1",
        "barrier": lambda: f"{ctx.dist}.barrier()",
        "is_initialized": lambda: f"{ctx.dist}.is_initialized()",
    }


_COMPOUND = frozenset({"dp_rank", "rdp_rank", "dp_size", "rdp_size"})


def migrate_ranks(ctx: Context) -> None:
    table = _table(ctx)
    for call in ctx.calls(*table):
        if call.args:
            continue  # ``smp.barrier(group)``: a group v2 does not have (left to the leftovers)
        member = ctx.member(call.func)
        assert member is not None
        code = table[member]()
        if member in _COMPOUND and _needs_brackets(ctx, call):
            code = f"({code})"
        ctx.plan.replace_with(call, code)
        ctx.plan.handle(call.func)
        ctx.plan.add(
            ctx.line(call),
            Outcome.MOVED,
            "ranks",
            f"`{ctx.program.code_for(call)}` -> `{code}`",
            links.UPGRADE_FROM_V1,
        )


def _needs_brackets(ctx: Context, call: cst.Call) -> bool:
    """A quotient inside another operation (``smp.dp_rank() * 2``) or before an attribute
    keeps its meaning only in brackets."""
    parent = ctx.parent(call)
    return isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.Attribute)) or (
        isinstance(parent, cst.Subscript) and parent.value is call
    )
