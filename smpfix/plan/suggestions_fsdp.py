"""The changes that make an SMP v2 job fit: the configurations ``search`` finds for SMP v2.

As for SMP v1 (``suggestions``): first the same job on an instance type with more GPU memory
and as many GPUs, then the configurations of SMP v2's own levers that fit on this cluster
(``hybrid_shard_degree``, ``tensor_parallel_degree`` for the models
``torch.sagemaker.transform`` supports, ``expert_parallel_degree`` for a mixture of experts on a
release that has it, activation checkpointing and offloading) in the
best-practices order, each said as the changes from the job's settings. When the job trains
in fp32 on GPUs with bf16, training in bf16 is offered first: the v2 best-practices page
recommends mixed precision before any sharding. None of SMP v1's levers (pipelines,
``shard_optimizer_state``, microbatches) is offered, and SMP v1's memory model is never used.

A job whose FSDP CPU offload overflows the instance's host memory gets its own change
(``host_changes``): no bigger GPU helps it, and training without the offload never does (each
instance type whose host memory smpfix knows has more of it per GPU than GPU memory), but
sharding the offloaded states over more GPUs does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from smpfix.job.instances import INSTANCE_TYPES, InstanceType
from smpfix.plan.fsdp import FsdpSetup, estimate, problems, sharded_states
from smpfix.plan.memory import GIB, Estimate
from smpfix.plan.models import ModelShape, ParameterCount
from smpfix.plan.search import Cluster, Workload, search
from smpfix.plan.verdict import Verdict, verdict_of

MAX_SUGGESTIONS = 3
_FITTING = (Verdict.FITS, Verdict.TIGHT)


def suggest(
    count: ParameterCount,
    shape: Optional[ModelShape],
    setup: FsdpSetup,
    instance: InstanceType,
    expert_parallelism: bool = True,
) -> tuple[tuple[str, Estimate], ...]:
    """Up to ``MAX_SUGGESTIONS`` changes after which ``setup`` fits, with their estimates;
    ``expert_parallelism``: the job's release may have it (SMP 2.3.0 and later)."""
    found: list[tuple[str, Estimate]] = []
    found += _bigger_instance(count, shape, setup, instance)
    if setup.precision == "fp32" and instance.bf16:
        bf16 = replace(setup, precision="bf16")
        result = estimate(count, shape, bf16, instance.gpu_memory_mib)
        if verdict_of(result) in _FITTING:
            found.append(
                ("train in bf16 with FSDP's `MixedPrecision(param_dtype=torch.bfloat16)`", result)
            )
    if setup.world % instance.gpus == 0:
        workload = Workload(
            count,
            shape,
            setup.seq_len,
            setup.batch * (setup.world // setup.tp) if setup.batch is not None else None,
            setup.precision,
            setup.flash_attention,
            setup.optimizer,
        )
        cluster = Cluster(instance, setup.world // instance.gpus)
        for candidate in search(workload, cluster, "v2", setup, expert_parallelism):
            assert isinstance(candidate.setup, FsdpSetup)
            undoes = (
                setup.activation_checkpointing and not candidate.setup.activation_checkpointing
            ) or (setup.offload_activations and not candidate.setup.offload_activations)
            change = describe(setup, candidate.setup)
            if change and not undoes and not problems(candidate.setup):
                found.append((change, candidate.estimate))
    return tuple(found[:MAX_SUGGESTIONS])


def host_changes(
    count: ParameterCount,
    shape: Optional[ModelShape],
    setup: FsdpSetup,
    instance: InstanceType,
    processes: int,
) -> tuple[tuple[str, Estimate], ...]:
    """For a job whose CPU offload overflows host memory: the smallest larger
    ``hybrid_shard_degree`` whose offloaded shards the ``processes`` ranks of an instance hold
    in its memory and with which the GPUs hold the job, with its GPU estimate."""
    host = instance.host_memory_gib
    ranks = setup.world // setup.tp
    for shard in range(setup.shard + 1, ranks + 1):
        wider = replace(setup, shard=shard)
        if host is None or ranks % shard or problems(wider):
            continue
        offloaded = sharded_states(count, wider) * processes / GIB
        result = estimate(count, shape, wider, instance.gpu_memory_mib)
        if offloaded <= host and verdict_of(result) in _FITTING:
            change = (
                f"set hybrid_shard_degree to {shard} (the {processes} ranks of an instance then"
                f" offload {offloaded:.1f} GiB of its {host} GiB)"
            )
            return ((change, result),)
    return ()


def describe(before: FsdpSetup, after: FsdpSetup) -> str:
    changes = []
    if after.tp != before.tp:
        changes.append(
            f"set tensor_parallel_degree to {after.tp} (the model must be one"
            " `torch.sagemaker.transform` supports)"
        )
    if after.ep != before.ep:
        changes.append(
            f"set expert_parallel_degree to {after.ep} (SMP 2.3.0 or later; the model's"
            f" {after.experts} experts per layer split over {after.ep} GPUs)"
            if after.ep > 1
            else "set expert_parallel_degree to 1"
        )
    if after.shard != before.shard:
        changes.append(f"set hybrid_shard_degree to {after.shard}")
    if after.activation_checkpointing and not before.activation_checkpointing:
        changes.append(
            "turn on activation checkpointing of each transformer layer"
            " (`apply_activation_checkpointing` after the FSDP wrap)"
        )
    if after.offload_activations and not before.offload_activations:
        changes.append(
            "turn on activation offloading (`offload_wrapper(model)` after checkpointing)"
        )
    if changes and after.batch != before.batch and after.batch is not None:
        changes.append(f"with a batch of {after.batch} per tensor-parallel group")
    return "; ".join(changes)


def _bigger_instance(
    count: ParameterCount, shape: Optional[ModelShape], setup: FsdpSetup, instance: InstanceType
) -> list[tuple[str, Estimate]]:
    for other in sorted(INSTANCE_TYPES.values(), key=lambda t: (t.gpu_memory_mib, t.name)):
        if other.gpus != instance.gpus or other.gpu_memory_mib <= instance.gpu_memory_mib:
            continue
        if not other.bf16 and setup.half_precision and setup.precision == "bf16":
            continue
        result = estimate(count, shape, setup, other.gpu_memory_mib)
        if verdict_of(result) in _FITTING:
            return [(f"use {other.name} ({other.gpu_model})", result)]
    return []
