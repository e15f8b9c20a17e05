"""The facts of the job every part of a script migration agrees on: the model family, whether
the model is tensor parallel, whether its parameters are created late, the precision.

Read once, before any rewrite, so the FSDP wrap, the activation checkpointing and the
tensor-parallel contexts are written for the same answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.literals import literal_value
from smpfix.migrate.script.context import Context
from smpfix.migrate.script.family import Family, model_family
from smpfix.migrate.script.precision import Precision, job_precision

_TP_CONTEXTS = frozenset({"tensor_parallelism", "model_creation", "set_tensor_parallelism"})


@dataclass(frozen=True)
class Shape:
    family: Optional[Family]
    # The model is tensor parallel in v1 (a degree above 1, or a marking with the degree unknown).
    tensor_parallel: bool
    # Where tensor parallelism is marked (first such call), for the report.
    tensor_parallel_call: Optional[cst.Call]
    delayed: bool
    precision: Precision
    microbatches: Optional[int]


def _flag(call: cst.Call, keyword: str, position: Optional[int], default: bool) -> Optional[bool]:
    """A boolean argument's value: True/False, None when it is not a literal."""
    for index, arg in enumerate(call.args):
        if (arg.keyword is not None and arg.keyword.value == keyword) or (
            arg.keyword is None and index == position
        ):
            value = literal_value(arg.value)
            return value if isinstance(value, bool) else None
    return default


def tensor_parallel_marking(ctx: Context, call: cst.Call) -> Optional[bool]:
    member = ctx.member(call.func)
    if member == "tensor_parallelism":
        return _flag(call, "enabled", 0, True)
    if member == "model_creation":
        return _flag(call, "tensor_parallelism", 0, False)
    if member == "set_tensor_parallelism":
        return _flag(call, "enabled", 1, True)
    return False


def delays_initialization(ctx: Context, call: cst.Call) -> Optional[bool]:
    member = ctx.member(call.func)
    if member == "delay_param_initialization":
        return _flag(call, "enabled", 0, True)
    if member == "model_creation":
        return _flag(call, "delay_param_initialization", None, False)
    return False


def job_shape(ctx: Context) -> Shape:
    marked = [
        call for call in ctx.calls(*_TP_CONTEXTS) if tensor_parallel_marking(ctx, call) is not False
    ]
    degree = ctx.setting("tensor_parallel_degree")
    if isinstance(degree, int) and not isinstance(degree, bool):
        tensor_parallel = degree > 1
    else:
        tensor_parallel = bool(marked)
    delayed = any(
        delays_initialization(ctx, call)
        for call in ctx.calls("delay_param_initialization", "model_creation")
    )
    microbatches = ctx.setting("microbatches")
    if microbatches is None and "microbatches" not in ctx.program.job.unknown:
        microbatches = 1  # v1's default
    return Shape(
        model_family(ctx.program),
        tensor_parallel,
        marked[0] if marked else None,
        delayed,
        job_precision(ctx),
        microbatches if isinstance(microbatches, int) else None,
    )
