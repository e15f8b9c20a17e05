"""The model and optimizer wraps: ``smp.DistributedModel`` -> an FSDP wrap,
``smp.DistributedOptimizer(opt)`` -> ``opt``, built after the wrap.

FSDP shards one transformer layer at a time when its auto-wrap policy names the family's layer
class (``transformer_auto_wrap_policy``); a tensor-parallel model is converted first with
``tsm.transform``, whose layers are SMP's ``TransformerLayer`` (the SMP v2 tensor-parallelism
page; SMP026 says why the Hugging Face class must not be named then). The optimizer must be
built from the wrapped model's parameters (FSDP flattens them in place; SMP020), so an
optimizer built before the wrap moves below it. v1's ``model.get_module()`` is FSDP's
``model.module`` and ``optimizer.optimizer`` the optimizer itself.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.migrate import links
from smpfix.migrate.items import Outcome
from smpfix.migrate.script.context import Context, Statement
from smpfix.migrate.script.plan import StatementRewrite, leading_lines, todo_comment
from smpfix.migrate.script.precision import mixed_precision
from smpfix.migrate.script.shape import Shape
from smpfix.program.facts import Wrap
from smpfix.program.objects.model_names import DistributedModelNames

_EMPTY = cst.Module([])


def code(node: cst.CSTNode) -> str:
    return _EMPTY.code_for_node(node)


def migrate_wraps(ctx: Context, shape: Shape) -> Optional[Statement]:
    """Rewrite the wraps; the statement of the (first) model wrap, where code that needs the
    wrapped model goes after."""
    anchor: Optional[Statement] = None
    for wrap in ctx.program.facts.distributed_models:
        statement = _wrap_model(ctx, shape, wrap)
        anchor = anchor or statement
    for wrap in ctx.program.facts.distributed_optimizers:
        _unwrap_optimizer(ctx, wrap, anchor)
    _model_members(ctx)
    return anchor


def _keywords(ctx: Context, shape: Shape) -> tuple[list[str], list[str]]:
    """The FSDP keyword arguments, and what a person must still finish."""
    torch = ctx.torch
    todo: list[str] = []
    keywords: list[str] = []
    layer: Optional[str] = None
    if shape.tensor_parallel:
        layer = ctx.name("torch.sagemaker.tensor_parallel.transformer", "TransformerLayer")
        if shape.family is None:
            todo.append(
                "tsm.transform converts GPT-NeoX, Llama, Mistral and Mixtral models only: check"
                " this one is, else drop tsm.transform and shard with FSDP alone"
            )
    elif shape.family is not None:
        layer = ctx.name(shape.family.module, shape.family.layer)
        if shape.family.option_default:
            todo.append(
                f"{shape.family.layer} is the layer of the option default"
                f" {shape.family.option_default!r}: name the layer of the model the job trains"
            )
    if layer is not None:
        policy = ctx.name("torch.distributed.fsdp.wrap", "transformer_auto_wrap_policy")
        keywords.append(
            f"auto_wrap_policy={ctx.plain_module('functools')}.partial("
            f"{policy}, transformer_layer_cls={{{layer}}})"
        )
    else:
        todo.append("name the model's transformer layer class in an auto_wrap_policy")
    mixed = mixed_precision(ctx, shape.precision)
    if mixed is not None:
        keywords.append(f"mixed_precision={mixed}")
    elif not shape.precision.known:
        todo.append("set mixed_precision from the job's fp16/bf16 (unknown here)")
    keywords.append(f"device_id={torch}.cuda.current_device()")
    return keywords, todo


def _wrap_model(ctx: Context, shape: Shape, wrap: Wrap) -> Optional[Statement]:
    call = wrap.call
    statement = ctx.statement(call)
    if not call.args or call.args[0].keyword is not None or statement is None:
        return None
    fsdp = ctx.fsdp
    keywords, todo = _keywords(ctx, shape)
    argument = call.args[0].value
    if shape.delayed:
        if type(argument) is cst.Name:
            initer = ctx.name("torch.sagemaker.delayed_param", "DelayedParamIniter")
            keywords[-1:-1] = [
                "param_init_fn=delayed_initer.get_param_init_fn()",
                "post_param_init_fn=delayed_initer.get_post_param_init_fn()",
            ]
            ctx.plan.replace_statement(
                statement, _after_setup(f"delayed_initer = {initer}({argument.value})")
            )
        else:
            todo.append(
                "build the model in a variable under init_empty_weights() and pass"
                " DelayedParamIniter(model).get_param_init_fn() as param_init_fn"
            )
    transform = f"{ctx.tsm}.transform" if shape.tensor_parallel else None
    # LibCST indents the lines inside the brackets by the statement's block itself.
    indent = "    "

    def rewrite(updated: cst.BaseExpression) -> cst.BaseExpression:
        assert isinstance(updated, cst.Call)
        argument = code(updated.args[0].value)
        if transform is not None:
            argument = f"{transform}({argument})"
        lines = "".join(f"\n{indent}{each}," for each in [argument, *keywords])
        return cst.parse_expression(f"{fsdp}({lines}\n)")

    ctx.plan.replace(call, rewrite)
    ctx.plan.handle(call.func)
    passes = next(
        (a.value for a in call.args if a.keyword and a.keyword.value == "backward_passes_per_step"),
        None,
    )
    if passes is not None:
        todo.append(
            f"v1 reduced gradients every {code(passes)} backward passes: run the passes in"
            " between under model.no_sync() and step the optimizer after the last"
        )
    what = "FSDP" + (" of tsm.transform(model)" if transform else "")
    family = f" ({shape.family.name} layers)" if shape.family is not None else ""
    if todo:
        ctx.plan.comment(
            statement, todo_comment("fsdp-wrap", "; ".join(todo), links.HYBRID_SHARDING)
        )
        ctx.plan.add(
            ctx.line(call),
            Outcome.SCAFFOLD,
            "fsdp-wrap",
            f"`{ctx.program.code_for(call.func)}` -> {what}{family}; to finish: {'; '.join(todo)}",
            links.HYBRID_SHARDING,
        )
    else:
        ctx.plan.add(
            ctx.line(call),
            Outcome.MOVED,
            "fsdp-wrap",
            f"`{ctx.program.code_for(call.func)}` -> {what}{family}",
            links.HYBRID_SHARDING,
        )
    if (
        shape.precision.fp16
        and not ctx.program.facts.calls_of(
            "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler"
        )
        and not list(ctx.calls("amp.GradScaler"))
    ):
        what_to_do = (
            "v1 scaled the fp16 loss in DistributedOptimizer; add a ShardedGradScaler: "
            "scaler.scale(loss).backward(), scaler.step(optimizer), scaler.update()"
        )
        ctx.plan.comment(
            statement, todo_comment("fp16-loss-scaling", what_to_do, links.MIXED_PRECISION)
        )
        ctx.plan.add(
            ctx.line(call), Outcome.SCAFFOLD, "fp16-loss-scaling", what_to_do, links.MIXED_PRECISION
        )
    return statement


def _after_setup(setup: str) -> StatementRewrite:
    """``setup`` written above the statement, with the statement's blank and comment lines."""
    new = cst.parse_statement(setup)

    def rewrite(old: cst.BaseStatement) -> list[cst.BaseStatement]:
        return [
            new.with_changes(leading_lines=leading_lines(old)),
            old.with_changes(leading_lines=()),
        ]

    return rewrite


def _first_argument(updated: cst.BaseExpression) -> cst.BaseExpression:
    assert isinstance(updated, cst.Call)
    return updated.args[0].value


def _unwrap_optimizer(ctx: Context, wrap: Wrap, anchor: Optional[Statement]) -> None:
    call = wrap.call
    statement = ctx.statement(call)
    if not call.args or call.args[0].keyword is not None or statement is None:
        return
    inner = call.args[0].value
    ctx.plan.handle(call.func)
    extra = [arg.keyword.value for arg in call.args[1:] if arg.keyword is not None]
    line = ctx.line(call)
    if type(inner) is cst.Name and wrap.target == inner.value and _alone(statement, call):
        # ``optimizer = smp.DistributedOptimizer(optimizer)``: nothing left to assign.
        ctx.plan.drop(statement)
        built = ctx.program.facts.names.assignment(inner.value, call)
        source = built.where.statement if built is not None and built.where is not None else None
        if source is not None and anchor is not None and _before(ctx, source, anchor):
            ctx.plan.move_after(source, anchor)
    else:
        ctx.plan.replace(call, _first_argument)
        if anchor is not None and _before(ctx, statement, anchor):
            ctx.plan.move_after(statement, anchor)
    message = "`smp.DistributedOptimizer(...)` -> the optimizer itself, built after the FSDP wrap"
    if extra:
        message += f" (v1 arguments dropped: {', '.join(extra)})"
    ctx.plan.add(line, Outcome.MOVED, "optimizer", message, links.UPGRADE_FROM_V1)


def _alone(statement: Statement, call: cst.Call) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Assign)
        and statement.body[0].value is call
    )


def _before(ctx: Context, first: cst.BaseStatement, second: cst.BaseStatement) -> bool:
    """``first`` comes before ``second`` in the same block."""
    facts = ctx.program.facts
    one, two = facts.statement_of(first), facts.statement_of(second)
    return one is not None and two is not None and one.block is two.block and one.index < two.index


def _model_members(ctx: Context) -> None:
    """``model.get_module()`` -> ``model.module``; ``optimizer.optimizer`` -> ``optimizer``
    (on the names the file wraps with ``DistributedOptimizer``)."""
    facts = ctx.program.facts
    names = ctx.program.file.answer(DistributedModelNames)
    # A helper module handed the wrapped model wraps nothing itself: there ``get_module()``,
    # v1's own method name, is the model's.
    helper = not facts.distributed_models
    optimizers = {wrap.target for wrap in facts.distributed_optimizers if wrap.target}
    for call in ctx.program.file.nodes_of(cst.Call):
        assert isinstance(call, cst.Call)
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "get_module"
            and not call.args
            and type(func.value) is cst.Name
            and (helper or names.holds_model(func.value.value, _functions(ctx, call)))
        ):
            ctx.plan.replace_with(call, f"{func.value.value}.module")
            ctx.plan.add(
                ctx.line(call),
                Outcome.MOVED,
                "fsdp-wrap",
                f"`{func.value.value}.get_module()` -> `{func.value.value}.module`",
                links.UPGRADE_FROM_V1,
            )
    for attribute in ctx.program.file.nodes_of(cst.Attribute):
        assert isinstance(attribute, cst.Attribute)
        if (
            attribute.attr.value == "optimizer"
            and type(attribute.value) is cst.Name
            and attribute.value.value in optimizers
        ):
            ctx.plan.replace_with(attribute, attribute.value.value)
            ctx.plan.add(
                ctx.line(attribute),
                Outcome.MOVED,
                "optimizer",
                f"`{attribute.value.value}.optimizer` -> `{attribute.value.value}`",
                links.UPGRADE_FROM_V1,
            )


def _functions(ctx: Context, node: cst.CSTNode) -> list[cst.FunctionDef]:
    found = [a for a in ctx.ancestors(node) if type(a) is cst.FunctionDef]
    return list(reversed(found))
