"""``smp.set_activation_checkpointing(module)`` -> PyTorch's ``apply_activation_checkpointing``.

v1 marks modules one by one after the wrap; PyTorch wraps, once, every submodule a
``check_fn`` accepts, after the FSDP wrap (the v2 activation-checkpointing page). When the
marked modules are the family's transformer layers, one call with
``check_fn=lambda m: isinstance(m, Layer)`` after the wrap does what the v1 loop did; the v1
calls go (a loop left empty keeps ``pass``). A condition around the v1 calls, an unknown
family or no wrap in the file makes it a scaffold: the v2 call is written with a ``TODO``.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.migrate import links
from smpfix.migrate.items import Outcome
from smpfix.migrate.script.context import Context, Statement
from smpfix.migrate.script.plan import todo_comment
from smpfix.migrate.script.shape import Shape

_TOPIC = "activation-checkpointing"


def migrate_activation_checkpointing(
    ctx: Context, shape: Shape, anchor: Optional[Statement]
) -> None:
    calls = list(ctx.calls("set_activation_checkpointing"))
    statements = [ctx.statement(call) for call in calls]
    if not calls or any(not _alone(s, c) for s, c in zip(statements, calls)):
        return
    model = _model(ctx)
    if anchor is None or model is None:
        return
    layer: Optional[str] = None
    if shape.tensor_parallel:
        layer = ctx.name("torch.sagemaker.tensor_parallel.transformer", "TransformerLayer")
    elif shape.family is not None:
        layer = ctx.name(shape.family.module, shape.family.layer)
    module = "torch.distributed.algorithms._checkpoint.checkpoint_wrapper"
    apply = ctx.name(module, "apply_activation_checkpointing")
    wrapper = ctx.name(module, "checkpoint_wrapper")
    check = f"isinstance(submodule, {layer})" if layer is not None else "False"
    ctx.plan.insert_after(
        anchor,
        f"{apply}({model}, checkpoint_wrapper_fn={wrapper}, check_fn=lambda submodule: {check})",
    )
    conditional = any(_conditional(ctx, call) for call in calls)
    todo = []
    if layer is None:
        todo.append("make check_fn accept the modules v1 checkpointed")
    if conditional:
        todo.append("v1 checkpointed under a condition: put the call under it")
    for statement in ctx.with_empty_loops([s for s in statements if s is not None]):
        ctx.plan.drop(statement)
    for call in calls:
        ctx.plan.handle(call.func)
    line = ctx.line(calls[0])
    if todo:
        what = "; ".join(todo)
        ctx.plan.comment(anchor, todo_comment(_TOPIC, what, links.ACTIVATION_CHECKPOINTING))
        ctx.plan.add(line, Outcome.SCAFFOLD, _TOPIC, what, links.ACTIVATION_CHECKPOINTING)
        return
    ctx.plan.add(
        line,
        Outcome.MOVED,
        _TOPIC,
        f"`smp.set_activation_checkpointing` -> `apply_activation_checkpointing` on every"
        f" `{layer}` after the FSDP wrap",
        links.ACTIVATION_CHECKPOINTING,
    )


def _alone(statement: Optional[Statement], call: cst.Call) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and statement.body[0].value is call
    )


def _model(ctx: Context) -> Optional[str]:
    targets = {wrap.target for wrap in ctx.program.facts.distributed_models if wrap.target}
    return targets.pop() if len(targets) == 1 else None


def _conditional(ctx: Context, call: cst.Call) -> bool:
    """Whether an ``if`` decides that the v1 call runs: around it, or around a call of the
    function that holds it."""
    for ancestor in ctx.ancestors(call):
        if _deciding(ctx, ancestor):
            return True
        if type(ancestor) is cst.FunctionDef:
            for caller in ctx.program.facts.calls_by_name.get(ancestor.name.value, ()):
                if any(_deciding(ctx, a) for a in ctx.ancestors(caller)):
                    return True
            return False
    return False


def _deciding(ctx: Context, node: cst.CSTNode) -> bool:
    """An ``if`` that decides something (not the ``if __name__ == "__main__":`` of a script)."""
    if isinstance(node, cst.IfExp):
        return True
    if not isinstance(node, cst.If):
        return False
    test = ctx.program.code_for(node.test).replace("'", '"').replace(" ", "")
    return test not in ('__name__=="__main__"', '"__main__"==__name__')
