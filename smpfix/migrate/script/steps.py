"""``@smp.step``: v1 split each batch into microbatches and ran them through the pipeline;
under FSDP a step is a plain function. With one microbatch the decorator only adds the
``StepOutput`` wrapper, so the decorator goes and each use of what the step returns is
rewritten for the tensor it now is (``step_outputs``). With several microbatches the batch now
runs whole: the scaffold says to use gradient accumulation, or a smaller batch, to keep the
memory v1 used.
"""

from __future__ import annotations

import libcst as cst

from smpfix.migrate import links
from smpfix.migrate.items import Outcome
from smpfix.migrate.script.context import Context
from smpfix.migrate.script.plan import todo_comment
from smpfix.migrate.script.shape import Shape
from smpfix.migrate.script.step_outputs import migrate_step_outputs
from smpfix.program.facts import is_step_decorator


def migrate_steps(ctx: Context, shape: Shape) -> None:
    imports = ctx.program.facts.imports
    steps: dict[str, cst.FunctionDef] = {}
    for function in ctx.program.file.nodes_of(cst.FunctionDef):
        assert isinstance(function, cst.FunctionDef)
        decorators = [d for d in function.decorators if is_step_decorator(imports, d.decorator)]
        if not decorators:
            continue
        steps[function.name.value] = function
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
        migrate_step_outputs(ctx, steps, shape.microbatches == 1)
