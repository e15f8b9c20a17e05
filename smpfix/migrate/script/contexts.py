"""v1's model-creation contexts: ``smp.tensor_parallelism()``, ``smp.model_creation(...)``,
``smp.delay_param_initialization(...)``, and ``smp.set_tensor_parallelism(module)``.

In v2 a tensor-parallel model is converted after it is built (``tsm.transform``, written at
the FSDP wrap), and delayed parameter initialisation builds the model on no device
(``accelerate.init_empty_weights``) and lets FSDP create the parameters
(``DelayedParamIniter``, the v2 delayed-parameter-initialisation page). So a context that
only marked tensor parallelism or set a dtype goes (its body stays), and one that delayed
initialisation becomes ``init_empty_weights()``.
"""

from __future__ import annotations

import libcst as cst

from smpfix.migrate import links
from smpfix.migrate.items import Outcome
from smpfix.migrate.script.context import Context
from smpfix.migrate.script.plan import leading_lines
from smpfix.migrate.script.shape import Shape, delays_initialization

_CONTEXTS = ("tensor_parallelism", "model_creation", "delay_param_initialization")


def migrate_contexts(ctx: Context, shape: Shape) -> None:
    for call in ctx.calls(*_CONTEXTS):
        item = ctx.parent(call)
        statement = ctx.parent(item) if isinstance(item, cst.WithItem) else None
        if not isinstance(statement, cst.With) or len(statement.items) != 1:
            continue
        if isinstance(statement.body, cst.SimpleStatementSuite):
            continue
        if shape.tensor_parallel and shape.family is not None and not shape.family.tensor_parallel:
            continue  # blocked: the job stays on v1
        ctx.plan.handle(call.func)
        line = ctx.line(call)
        if delays_initialization(ctx, call):
            empty = ctx.name("accelerate", "init_empty_weights")
            ctx.plan.replace_with(call, f"{empty}()")
            ctx.plan.add(
                line,
                Outcome.MOVED,
                "delayed-parameter-initialization",
                f"`{ctx.program.code_for(call.func)}(...)` -> `{empty}()`; FSDP creates the"
                " parameters (DelayedParamIniter at the wrap)",
                links.DELAYED_PARAMETER_INITIALIZATION,
            )
            continue
        ctx.plan.replace_statement(statement, _unwrapped)
        what = "tsm.transform at the FSDP wrap" if shape.tensor_parallel else "nothing"
        ctx.plan.add(
            line,
            Outcome.MOVED,
            "tensor-parallelism" if shape.tensor_parallel else "model-creation",
            f"`with {ctx.program.code_for(call)}:` removed (its body stays); v2 needs {what}",
            links.TENSOR_PARALLELISM,
        )
    for call in ctx.calls("set_tensor_parallelism"):
        statement = ctx.statement(call)
        if (
            not shape.tensor_parallel
            or shape.family is None
            or not shape.family.tensor_parallel
            or not isinstance(statement, cst.SimpleStatementLine)
            or len(statement.body) != 1
            or not isinstance(statement.body[0], cst.Expr)
        ):
            continue
        ctx.plan.drop(statement)
        ctx.plan.handle(call.func)
        ctx.plan.add(
            ctx.line(call),
            Outcome.MOVED,
            "tensor-parallelism",
            "`smp.set_tensor_parallelism(...)` removed: tsm.transform converts the whole model",
            links.TENSOR_PARALLELISM,
        )


def _unwrapped(updated: cst.BaseStatement) -> list[cst.BaseStatement]:
    """A ``with`` block's body in its place, the ``with`` line's comments on the first
    statement."""
    assert isinstance(updated, cst.With) and isinstance(updated.body, cst.IndentedBlock)
    body: list[cst.BaseStatement] = list(updated.body.body)
    first = body[0]
    body[0] = first.with_changes(leading_lines=[*updated.leading_lines, *leading_lines(first)])
    return body
