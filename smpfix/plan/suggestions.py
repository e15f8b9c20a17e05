"""The smallest configuration changes that make a job fit, each with its new estimate.

Breadth first: every single change that fits is offered before any pair of changes, cheapest
first: memory savers that keep the parallel layout (activation checkpointing, optimizer
state sharding, offloading, more microbatches, a smaller batch), then more sharding, tensor
parallelism (a power of two inside a node, with ``prescaled_batch``), then pipeline
parallelism. A change that turns ``prescaled_batch`` on keeps the samples of each
tensor-parallel group, so its estimate is not an artifact of a smaller batch. For each knob the
smallest value that fits is kept. Only setups the library accepts are offered (``setup.problems``).
When nothing fits on this instance type, the same job on a type with more GPU memory and as many
GPUs per instance is tried.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Optional

from smpfix.job.instances import INSTANCE_TYPES, InstanceType
from smpfix.plan.memory import Estimate, estimate
from smpfix.plan.models import ModelShape, ParameterCount
from smpfix.plan.setup import Setup, problems


@dataclass(frozen=True)
class Suggestion:
    change: str
    setup: Setup
    estimate: Estimate
    instance: Optional[InstanceType] = None  # a bigger instance type, when that is the change


@dataclass(frozen=True)
class _SetupChange:
    knob: str
    change: str
    setup: Setup


_MAX_DIVIDED = 10**7  # no suggestion splits a number larger than this (a batch, a process count)


def _divisors(n: int) -> list[int]:
    """The divisors of ``n`` in ascending order; none for an implausibly large ``n``."""
    if n > _MAX_DIVIDED:
        return []
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return sorted({*small, *(n // k for k in small)})


def _savers(setup: Setup) -> list[_SetupChange]:
    """Changes that keep the parallel layout."""
    found = []
    if not setup.activation_checkpointing:
        found.append(
            _SetupChange(
                "checkpointing",
                "turn on activation checkpointing of each transformer layer "
                "(`smp.set_activation_checkpointing`)",
                replace(setup, activation_checkpointing=True),
            )
        )
    if not setup.oss and setup.sdp == 1 and setup.dp > 1:
        found.append(_SetupChange("oss", "turn on shard_optimizer_state", replace(setup, oss=True)))
    if setup.activation_checkpointing and not setup.offload_activations:
        found.append(
            _SetupChange(
                "offload", "turn on offload_activations", replace(setup, offload_activations=True)
            )
        )
    if setup.batch is not None:
        for count in _divisors(setup.batch):
            if count > setup.microbatches:
                found.append(
                    _SetupChange(
                        "microbatches",
                        f"raise microbatches to {count}",
                        replace(setup, microbatches=count),
                    )
                )
        for smaller in sorted(_divisors(setup.batch), reverse=True):
            if smaller < setup.batch and smaller % setup.microbatches == 0:
                found.append(
                    _SetupChange(
                        "batch", f"lower the batch to {smaller}", replace(setup, batch=smaller)
                    )
                )
    return found


def _prescaled(setup: Setup) -> tuple[Setup, str]:
    """``setup`` with ``prescaled_batch`` on, and in words what that asks of the script. The
    samples a tensor-parallel group processes stay the same: a batch per rank becomes the
    group's batch, ``tp`` times larger."""
    if setup.prescaled_batch:
        return setup, ""
    if setup.batch is None:
        return replace(setup, prescaled_batch=True), " with prescaled_batch"
    batch = setup.batch * setup.tp
    return replace(
        setup, prescaled_batch=True, batch=batch
    ), f" with prescaled_batch and a batch of {batch} per tensor-parallel group"


def _parallelism(setup: Setup, gpus_per_instance: int) -> list[_SetupChange]:
    """More sharding, tensor parallelism or pipeline parallelism over the same GPUs."""
    found = []
    if setup.pp == 1 and not setup.oss:
        for degree in _divisors(setup.rdp):
            if degree > setup.sdp:
                # Sharded data parallelism with tensor parallelism needs prescaled_batch.
                base, how = _prescaled(setup) if setup.tp > 1 else (setup, "")
                found.append(
                    _SetupChange(
                        "sdp",
                        f"set sharded_data_parallel_degree to {degree}{how}",
                        replace(base, sdp=degree),
                    )
                )
    degree = setup.tp * 2
    base, how = _prescaled(setup)
    while degree <= gpus_per_instance:
        found.append(
            _SetupChange(
                "tp", f"raise tensor_parallel_degree to {degree}{how}", replace(base, tp=degree)
            )
        )
        degree *= 2
    if setup.sdp == 1 and setup.world % setup.tp == 0:
        for degree in _divisors(setup.world // setup.tp):
            if degree > setup.pp:
                microbatches = max(setup.microbatches, degree)
                found.append(
                    _SetupChange(
                        "pp",
                        f"raise pipeline_parallel_degree to {degree} (microbatches {microbatches})",
                        replace(setup, pp=degree, microbatches=microbatches),
                    )
                )
    return found


def suggest(
    count: ParameterCount,
    shape: Optional[ModelShape],
    setup: Setup,
    instance: InstanceType,
    depth: int = 2,
    limit: int = 3,
) -> tuple[Suggestion, ...]:
    """Up to ``limit`` changes (of up to ``depth`` steps) after which ``setup`` fits on
    ``instance``; none when it is not known not to fit. When activations are unknown, a
    change qualifies when it brings the lower bound (model states and buffers) under the GPU."""
    if estimate(count, shape, setup, instance.gpu_memory_mib).fits is not False:
        return ()
    found: list[Suggestion] = []
    frontier: list[tuple[str, Setup]] = [("", setup)]
    seen = {setup}
    for _ in range(depth):
        following: list[tuple[str, Setup]] = []
        settled: set[str] = (
            set()
        )  # knobs whose smallest fitting value is found: no larger one, no other way to it
        for done, current in frontier:
            for candidate in [*_savers(current), *_parallelism(current, instance.gpus)]:
                if (
                    candidate.knob in settled
                    or candidate.setup in seen
                    or problems(candidate.setup)
                ):
                    continue
                seen.add(candidate.setup)
                change = f"{done}; {candidate.change}" if done else candidate.change
                result = estimate(count, shape, candidate.setup, instance.gpu_memory_mib)
                if result.fits is not False:
                    settled.add(candidate.knob)
                    found.append(Suggestion(change, candidate.setup, result))
                    if len(found) >= limit:
                        return tuple(found)
                else:
                    following.append((change, candidate.setup))
        if found:
            return tuple(found)
        frontier = following
    return tuple(_bigger_instances(count, shape, setup, instance, limit))


def _bigger_instances(
    count: ParameterCount,
    shape: Optional[ModelShape],
    setup: Setup,
    instance: InstanceType,
    limit: int,
) -> Sequence[Suggestion]:
    found = []
    for other in sorted(INSTANCE_TYPES.values(), key=lambda t: t.gpu_memory_mib):
        if (
            other.gpus != instance.gpus
            or other.gpu_memory_mib <= instance.gpu_memory_mib
            or not other.smp_v1_supported
        ):
            continue
        result = estimate(count, shape, setup, other.gpu_memory_mib)
        if result.fits is not False:
            found.append(Suggestion(f"use {other.name} ({other.gpu_model})", setup, result, other))
            if len(found) >= limit:
                break
    return found
