"""``@smp.step``: v1 split each batch into microbatches and ran them through the pipeline;
under FSDP a step is a plain function. With one microbatch the decorator only adds the
``StepOutput`` wrapper, so the decorator goes and so does ``.reduce_mean()`` (or
``.concat()``) on what the step returns. With several microbatches the batch now runs whole:
the scaffold says to use gradient accumulation, or a smaller batch, to keep the memory v1 used.
"""

from __future__ import annotations

import libcst as cst

from smpfix.migrate import links
from smpfix.migrate.items import Outcome
from smpfix.migrate.script.context import Context
from smpfix.migrate.script.plan import todo_comment
from smpfix.migrate.script.shape import Shape
from smpfix.program.facts import is_step_decorator

_OUTPUT_METHODS = frozenset({"reduce_mean", "concat"})


def migrate_steps(ctx: Context, shape: Shape) -> None:
    imports = ctx.program.facts.imports
    steps: set[str] = set()
    for function in ctx.program.file.nodes_of(cst.FunctionDef):
        assert isinstance(function, cst.FunctionDef)
        decorators = [d for d in function.decorators if is_step_decorator(imports, d.decorator)]
        if not decorators:
            continue
        steps.add(function.name.value)
        for decorator in decorators:
            ctx.plan.drop_decorator(decorator)
            target = decorator.decorator
            ctx.plan.handle(target.func if isinstance(target, cst.Call) else target)
        line = ctx.line(decorators[0])
        if shape.microbatches == 1:
            ctx.plan.add(
                line,
                Outcome.MOVED,
                "step",
                f"`@{ctx.program.code_for(decorators[0].decorator)}` removed from"
                f" `{function.name.value}` (one microbatch)",
                links.UPGRADE_FROM_V1,
            )
            continue
        count = shape.microbatches if shape.microbatches is not None else "an unknown number of"
        what = (
            f"v1 split each batch into {count} microbatches; the batch now runs whole:"
            " lower the batch size and accumulate gradients to keep v1's memory"
        )
        ctx.plan.comment(
            function, todo_comment("gradient-accumulation", what, links.UPGRADE_FROM_V1)
        )
        ctx.plan.add(line, Outcome.SCAFFOLD, "gradient-accumulation", what, links.UPGRADE_FROM_V1)
    if steps:
        _outputs(ctx, steps)


def _receiver(updated: cst.BaseExpression) -> cst.BaseExpression:
    assert isinstance(updated, cst.Call) and isinstance(updated.func, cst.Attribute)
    return updated.func.value


def _outputs(ctx: Context, steps: set[str]) -> None:
    """``train_step(...).reduce_mean()`` and ``out.reduce_mean()`` with ``out = train_step(...)``
    -> the step's result itself."""
    facts = ctx.program.facts
    for call in ctx.program.file.nodes_of(cst.Call):
        assert isinstance(call, cst.Call)
        func = call.func
        if not (
            isinstance(func, cst.Attribute) and func.attr.value in _OUTPUT_METHODS and not call.args
        ):
            continue
        receiver = func.value
        if type(receiver) is cst.Name:
            assigned = facts.names.assignment(receiver.value, call)
            value = assigned.value if assigned is not None else None
        else:
            value = receiver
        if not (
            isinstance(value, cst.Call)
            and type(value.func) is cst.Name
            and value.func.value in steps
        ):
            continue
        ctx.plan.replace(call, _receiver)
        ctx.plan.add(
            ctx.line(call),
            Outcome.MOVED,
            "step",
            f"`.{func.attr.value}()` on a step's result removed: the step returns the tensor",
            links.UPGRADE_FROM_V1,
        )
