"""The training step's library calls: backward, loss scaling, gradient clipping.

v1's ``model.backward(loss)`` ran the backward pass through the pipeline; under FSDP it is
PyTorch's ``loss.backward()``. v1's ``smp.amp.GradScaler`` becomes FSDP's
``ShardedGradScaler``, which agrees on inf/NaN across the shards. Gradient clipping must see
the whole model's norm: ``optimizer.clip_master_grads(x)`` and a local
``torch.nn.utils.clip_grad_norm_(model.parameters(), x)`` become the FSDP model's
``clip_grad_norm_(x)`` (SMP023 says why the local one is wrong under FSDP).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.migrate import links
from smpfix.migrate.items import Outcome
from smpfix.migrate.script.context import Context
from smpfix.migrate.script.plan import ExpressionRewrite
from smpfix.program.objects.model_names import DistributedModelNames

_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)


def migrate_training(ctx: Context) -> None:
    _backward(ctx)
    _scaler(ctx)
    _clipping(ctx)


def _holds_model(ctx: Context, node: cst.CSTNode, name: str) -> bool:
    if not ctx.program.facts.distributed_models:
        return False
    functions = [a for a in ctx.ancestors(node) if type(a) is cst.FunctionDef]
    names = ctx.program.file.answer(DistributedModelNames)
    return names.holds_model(name, list(reversed(functions)))


def _method_calls(ctx: Context, method: str) -> list[tuple[cst.Call, str]]:
    found = []
    for call in ctx.program.file.nodes_of(cst.Call):
        assert isinstance(call, cst.Call)
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == method
            and type(func.value) is cst.Name
        ):
            found.append((call, func.value.value))
    return found


def _backward(ctx: Context) -> None:
    for call, receiver in _method_calls(ctx, "backward"):
        if len(call.args) != 1 or call.args[0].keyword is not None:
            continue
        if not _holds_model(ctx, call, receiver):
            continue

        def rewrite(updated: cst.BaseExpression) -> cst.BaseExpression:
            assert isinstance(updated, cst.Call)
            loss = updated.args[0].value
            if not isinstance(loss, _ATOMS) and not getattr(loss, "lpar", ()):
                loss = loss.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            return cst.Call(func=cst.Attribute(value=loss, attr=cst.Name("backward")))

        ctx.plan.replace(call, rewrite)
        loss = ctx.program.code_for(call.args[0].value)
        value = call.args[0].value
        written = loss if isinstance(value, _ATOMS) or value.lpar else f"({loss})"
        ctx.plan.add(
            ctx.line(call),
            Outcome.MOVED,
            "backward",
            f"`{receiver}.backward({loss})` -> `{written}.backward()`",
            links.UPGRADE_FROM_V1,
        )


def _scaler(ctx: Context) -> None:
    for call in ctx.calls("amp.GradScaler"):
        scaler = ctx.name("torch.distributed.fsdp.sharded_grad_scaler", "ShardedGradScaler")
        ctx.plan.replace_with(call.func, scaler)
        ctx.plan.handle(call.func)
        ctx.plan.add(
            ctx.line(call),
            Outcome.MOVED,
            "loss-scaling",
            f"`smp.amp.GradScaler` -> FSDP's `{scaler}`",
            links.MIXED_PRECISION,
        )


def _model_name(ctx: Context) -> Optional[str]:
    targets = {wrap.target for wrap in ctx.program.facts.distributed_models if wrap.target}
    return targets.pop() if len(targets) == 1 else None


def _clipping(ctx: Context) -> None:
    model = _model_name(ctx)
    optimizers = {w.target for w in ctx.program.facts.distributed_optimizers if w.target}
    for call, receiver in _method_calls(ctx, "clip_master_grads"):
        if receiver not in optimizers or model is None or len(call.args) != 1:
            continue
        ctx.plan.replace(call, _clipping_of(model, 0))
        ctx.plan.add(
            ctx.line(call),
            Outcome.MOVED,
            "gradient-clipping",
            f"`{receiver}.clip_master_grads(...)` -> `{model}.clip_grad_norm_(...)`",
            links.UPGRADE_FROM_V1,
        )
    for call in ctx.program.facts.calls_of("torch.nn.utils.clip_grad_norm_"):
        if not call.args or len(call.args) > 2 or any(arg.keyword for arg in call.args):
            continue
        first = call.args[0].value
        if not (
            isinstance(first, cst.Call)
            and isinstance(first.func, cst.Attribute)
            and first.func.attr.value == "parameters"
            and type(first.func.value) is cst.Name
            and _holds_model(ctx, call, first.func.value.value)
            and len(call.args) == 2
        ):
            continue
        name = first.func.value.value
        ctx.plan.replace(call, _clipping_of(name, 1))
        ctx.plan.add(
            ctx.line(call),
            Outcome.MOVED,
            "gradient-clipping",
            f"`torch.nn.utils.clip_grad_norm_({name}.parameters(), ...)` ->"
            f" `{name}.clip_grad_norm_(...)`, the norm over every shard",
            links.UPGRADE_FROM_V1,
        )


def _clipping_of(model: str, argument: int) -> ExpressionRewrite:
    """``model.clip_grad_norm_(norm)``, the norm being the call's ``argument``-th argument."""

    def rewrite(updated: cst.BaseExpression) -> cst.BaseExpression:
        assert isinstance(updated, cst.Call)
        return cst.Call(
            func=cst.Attribute(value=cst.Name(model), attr=cst.Name("clip_grad_norm_")),
            args=[cst.Arg(updated.args[argument].value)],
        )

    return rewrite
