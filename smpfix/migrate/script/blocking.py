"""What v2 cannot run until a person redesigns it: reported, never rewritten.

SMP v2 has no pipeline parallelism and no TensorFlow flavour (the v2 support page), no
Hugging Face ``Trainer`` integration (``Trainer`` drove v1 through its own SMP code path),
and tensor parallelism only for the families its tensor-parallelism page lists. A job with
any of these keeps its v1 code; the item says what to do instead.
"""

from __future__ import annotations

import libcst as cst

from smpfix.migrate import links
from smpfix.migrate.items import Outcome
from smpfix.migrate.script.context import Context
from smpfix.migrate.script.shape import Shape

_PIPELINE_CALLS = ("partition", "set_partition")


def report_blocking(ctx: Context, shape: Shape) -> None:
    facts = ctx.program.facts
    first = _first_line(ctx)
    if facts.is_tensorflow:
        ctx.plan.add(
            first,
            Outcome.REPORT,
            "tensorflow",
            "SMP v2 supports PyTorch only: port the TensorFlow model to PyTorch (FSDP) first",
            links.SUPPORTED_FRAMEWORKS,
            blocking=True,
        )
        return
    degree = ctx.setting("pipeline_parallel_degree")
    if isinstance(degree, int) and not isinstance(degree, bool) and degree > 1:
        inits = list(ctx.calls("init"))
        ctx.plan.add(
            ctx.line(inits[0]) if inits else first,
            Outcome.REPORT,
            "pipeline-parallelism",
            f"the job runs {degree} pipeline stages; SMP v2 has no pipeline parallelism:"
            " shard the model with FSDP (hybrid_shard_degree) and tensor parallelism instead,"
            " `smpfix plan` sizes them",
            links.HYBRID_SHARDING,
            blocking=True,
        )
    for call in ctx.calls(*_PIPELINE_CALLS):
        if ctx.one_pipeline_stage:
            continue  # one pipeline stage: the placement is moot (``pipeline.py`` removes it)
        ctx.plan.add(
            ctx.line(call),
            Outcome.REPORT,
            "pipeline-parallelism",
            f"`{ctx.program.code_for(call.func)}` places modules on pipeline stages, which"
            " SMP v2 does not have: remove it and shard with FSDP",
            links.HYBRID_SHARDING,
            blocking=True,
        )
    if facts.uses_hf_trainer:
        ctx.plan.add(
            _trainer_line(ctx, first),
            Outcome.REPORT,
            "hf-trainer",
            "the Hugging Face Trainer's SMP integration is v1 only: write the training loop"
            " with FSDP (or use Trainer's own FSDP support) and SMP v2's tsm.init()",
            links.USE_V2,
            blocking=True,
        )
    family = shape.family
    if shape.tensor_parallel and family is not None and not family.tensor_parallel:
        marking = shape.tensor_parallel_call
        ctx.plan.add(
            ctx.line(marking) if marking is not None else first,
            Outcome.REPORT,
            "tensor-parallelism",
            f"SMP v2 has no tensor parallelism for {family.name}: shard it with FSDP alone"
            " (hybrid_shard_degree; `smpfix plan` chooses the degree)",
            links.TENSOR_PARALLELISM,
            blocking=True,
        )


def _first_line(ctx: Context) -> int:
    """The line of the first import of the library (else 1): where a job-wide item points."""
    imports = ctx.program.facts.imports
    for node in ctx.program.file.nodes_of(cst.Import, cst.ImportFrom):
        names: list[cst.BaseExpression] = []
        if isinstance(node, cst.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, cst.ImportFrom) and node.module is not None:
            names = [node.module]
        for name in names:
            qualified = imports.qualified_name(name) or ""
            if qualified.startswith("smdistributed.modelparallel") or (
                ctx.program.code_for(name).startswith("smdistributed.modelparallel")
            ):
                return ctx.line(node)
    return 1


def _trainer_line(ctx: Context, default: int) -> int:
    for call in ctx.program.file.nodes_of(cst.Call):
        assert isinstance(call, cst.Call)
        qualified = ctx.program.facts.imports.qualified_name(call.func) or ""
        if qualified.startswith("transformers.") and qualified.endswith("Trainer"):
            return ctx.line(call)
    return default
