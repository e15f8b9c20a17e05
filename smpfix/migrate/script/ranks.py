"""Ranks, sizes and barriers: ``smp.rank()`` -> ``dist.get_rank()`` and the like.

SMP v2 leaves process groups to PyTorch: the global rank and size are
``torch.distributed``'s, the local rank is what ``torchrun`` (the ``torch_distributed``
launcher) puts in ``LOCAL_RANK``, the tensor-parallel rank is ``tsm.state.tp_rank``, and
the ranks that read different data (v1's reduced data-parallel group) are the global rank
divided by the tensor-parallel degree (the official v2 example computes its data-parallel rank
so). A job that gets here has one pipeline stage (pipeline parallelism is reported before), so
v1's data-parallel group is the world, the model-parallel group is the tensor-parallel one and
the pipeline rank is 0.
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
        # With one pipeline stage v1's data-parallel group is the world (tensor-parallel ranks
        # included); the reduced one leaves the tensor-parallel ranks out.
        "dp_rank": lambda: f"{ctx.dist}.get_rank()",
        "dp_size": lambda: f"{ctx.dist}.get_world_size()",
        "rdp_rank": ctx.rdp_rank,
        "rdp_size": ctx.rdp_size,
        "get_dp_process_group": lambda: f"{ctx.dist}.group.WORLD",
        "get_world_process_group": lambda: f"{ctx.dist}.group.WORLD",
        # Groups as lists of global ranks; a tensor-parallel group is consecutive ranks.
        "get_tp_group": lambda: _ranks(ctx, "//"),
        "get_mp_group": lambda: _ranks(ctx, "//"),
        "get_rdp_group": lambda: _ranks(ctx, "%"),
        "get_dp_group": lambda: f"list(range({ctx.dist}.get_world_size()))",
        "get_world_group": lambda: f"list(range({ctx.dist}.get_world_size()))",
        "pp_rank": lambda: "0",
        "pp_size": lambda: "1",
        "barrier": lambda: f"{ctx.dist}.barrier()",
        "is_initialized": lambda: f"{ctx.dist}.is_initialized()",
    }


_COMPOUND = frozenset({"rdp_rank", "rdp_size"})


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


def _ranks(ctx: Context, operator: str) -> str:
    """The global ranks that share this rank's ``rank // degree`` (its tensor-parallel group)
    or ``rank % degree`` (its reduced data-parallel group)."""
    degree = f"{ctx.tsm}.state.tensor_parallel_degree"
    return (
        f"[other for other in range({ctx.dist}.get_world_size())"
        f" if other {operator} {degree} == {ctx.dist}.get_rank() {operator} {degree}]"
    )


def _needs_brackets(ctx: Context, call: cst.Call) -> bool:
    """A quotient inside another operation (``smp.dp_rank() * 2``) or before an attribute
    keeps its meaning only in brackets."""
    parent = ctx.parent(call)
    return isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.Attribute)) or (
        isinstance(parent, cst.Subscript) and parent.value is call
    )


def migrate_layers(ctx: Context) -> None:
    """``smp.nn.FusedLayerNorm`` -> ``torch.nn.LayerNorm``: v1's fused kernel of the same
    layer (same arguments), which ``isinstance`` tests (weight-decay groups) also name."""
    for node in ctx.program.file.nodes_of(cst.Name, cst.Attribute):
        if ctx.member(node) != "nn.FusedLayerNorm":
            continue
        if isinstance(ctx.parent(node), cst.Attribute):
            continue  # a part of a longer name, or the name after a dot
        if any(isinstance(a, (cst.Import, cst.ImportFrom)) for a in ctx.ancestors(node)):
            continue
        ctx.plan.replace_with(node, f"{ctx.torch}.nn.LayerNorm")  # type: ignore[arg-type]
        ctx.plan.handle(node)
        ctx.plan.add(
            ctx.line(node),
            Outcome.MOVED,
            "layers",
            f"`{ctx.program.code_for(node)}` -> `torch.nn.LayerNorm` (v1's fused kernel of it)",
            links.UPGRADE_FROM_V1,
        )
