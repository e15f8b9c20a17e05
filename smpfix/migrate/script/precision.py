"""Mixed precision: v1's ``fp16``/``bf16`` settings -> FSDP's ``MixedPrecision``.

v1 keeps the model in half precision when ``fp16`` or ``bf16`` is on; FSDP keeps full-precision
parameters and computes, reduces and buffers in the ``param_dtype`` of ``MixedPrecision``
(the v2 mixed-precision page). Unknown settings are not guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from smpfix.job.jobfacts import Tri
from smpfix.migrate.script.context import Context


@dataclass(frozen=True)
class Precision:
    # ``float16`` / ``bfloat16``, or None for full precision.
    dtype: Optional[str]
    # Whether the settings are known (else the dtype is None and a person must choose).
    known: bool

    @property
    def fp16(self) -> bool:
        return self.dtype == "float16"


def job_precision(ctx: Context) -> Precision:
    fp16, bf16 = ctx.state("FP16"), ctx.state("BF16")
    if fp16 is Tri.ON:
        return Precision("float16", True)
    if bf16 is Tri.ON:
        return Precision("bfloat16", True)
    return Precision(None, fp16 is Tri.OFF and bf16 is Tri.OFF)


def mixed_precision(ctx: Context, precision: Precision) -> Optional[str]:
    """The ``MixedPrecision(...)`` argument for ``precision``, None for full precision."""
    if precision.dtype is None:
        return None
    mixed = ctx.name("torch.distributed.fsdp", "MixedPrecision")
    dtype = f"{ctx.torch}.{precision.dtype}"
    return f"{mixed}(param_dtype={dtype}, reduce_dtype={dtype}, buffer_dtype={dtype})"
