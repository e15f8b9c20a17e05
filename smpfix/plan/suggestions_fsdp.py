"""The smallest single changes that make an SMP v2 job fit, each with its new estimate.

SMP v2's own levers, cheapest first, in the order the best-practices page recommends them:
activation checkpointing ("we recommend you to enable activation checkpointing"), mixed
precision on GPUs with bf16, activation offloading ("it can address your memory needs without
having to increase the sharding degree, which means less communication"), a smaller batch,
then more sharding ("start with the lowest degree to fit your model in the GPU memory") and
tensor parallelism (a degree inside one instance that divides the process count, for the
models ``torch.sagemaker.transform`` supports). For each lever the smallest change that fits
is kept. None of SMP v1's levers (pipelines, ``shard_optimizer_state``, microbatches) is offered.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Optional

from smpfix.job.instances import InstanceType
from smpfix.plan.fsdp import FsdpSetup, estimate, problems
from smpfix.plan.memory import Estimate
from smpfix.plan.models import ModelShape, ParameterCount
from smpfix.plan.verdict import Verdict, verdict_of

MAX_SUGGESTIONS = 3
_TENSOR_PARALLEL_DEGREES = (2, 4, 8)
_MAX_DIVIDED = 10**7  # no suggestion splits a larger number (a batch, a process count)


def _divisors(n: int) -> list[int]:
    """The divisors of ``n`` in ascending order; none for an implausibly large ``n``."""
    if n > _MAX_DIVIDED:
        return []
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return sorted({*small, *(n // k for k in small)})


def _smaller(batch: int) -> list[int]:
    """Smaller batches, largest first: each one below a small batch, halvings of a large one."""
    if batch <= 64:
        return list(range(batch - 1, 0, -1))
    return [batch >> k for k in range(1, batch.bit_length())]


def suggest(
    count: ParameterCount, shape: Optional[ModelShape], setup: FsdpSetup, instance: InstanceType
) -> tuple[tuple[str, Estimate], ...]:
    """Up to ``MAX_SUGGESTIONS`` changes after which ``setup`` fits, with their estimates."""
    found: list[tuple[str, Estimate]] = []
    seen: set[str] = set()
    for lever, change, candidate in _changes(setup, instance):
        if lever in seen or problems(candidate):
            continue
        result = estimate(count, shape, candidate, instance.gpu_memory_mib)
        if verdict_of(result) in (Verdict.FITS, Verdict.TIGHT):
            seen.add(lever)
            found.append((change, result))
            if len(found) == MAX_SUGGESTIONS:
                break
    return tuple(found)


def _changes(setup: FsdpSetup, instance: InstanceType) -> Iterator[tuple[str, str, FsdpSetup]]:
    """(lever, the change in words, the changed setup), smallest change of each lever first."""
    if not setup.activation_checkpointing:
        yield (
            "checkpointing",
            "turn on activation checkpointing of each transformer layer"
            " (`apply_activation_checkpointing` after the FSDP wrap)",
            replace(setup, activation_checkpointing=True),
        )
    if setup.precision == "fp32" and instance.bf16:
        yield (
            "precision",
            "train in bf16 with FSDP's `MixedPrecision(param_dtype=torch.bfloat16)`",
            replace(setup, precision="bf16"),
        )
    if setup.activation_checkpointing and not setup.offload_activations:
        yield (
            "offloading",
            "turn on activation offloading (`offload_wrapper(model)` after checkpointing)",
            replace(setup, offload_activations=True),
        )
    if setup.batch is not None:
        for batch in _smaller(setup.batch):
            yield (
                "batch",
                f"lower the batch per tensor-parallel group to {batch}",
                replace(setup, batch=batch),
            )
    ranks = setup.world // setup.tp
    for shard in _divisors(ranks):
        if shard > setup.shard:
            yield "sharding", f"set hybrid_shard_degree to {shard}", replace(setup, shard=shard)
    for tp in _TENSOR_PARALLEL_DEGREES:
        if setup.tp < tp <= instance.gpus and setup.world % tp == 0:
            yield (
                "tensor",
                f"set tensor_parallel_degree to {tp} (sharding over the {setup.world // tp} GPUs"
                " left; the model must be one `torch.sagemaker.transform` supports)",
                replace(setup, tp=tp, shard=setup.world // tp),
            )
