"""The changes that make an SMP v1 job fit: the configurations ``search`` finds, in its order.

A launcher's job that does not fit (or may not) gets the answer ``smpfix plan --model`` gives
for the same model, cluster, sequence and global batch, in the same best-practices order
(``search``): first the same job on an instance type with more GPU memory and as many GPUs
("using large GPU instance types" heads the page's list), then the configurations that fit on
this cluster, each said as the changes from the job's own settings; none turns off the
checkpointing or offloading the job has on. The job's precision,
optimizer, flash attention and checkpointing strategy are kept. Only setups the library
accepts are offered (``setup.problems``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from smpfix.job.instances import INSTANCE_TYPES, InstanceType
from smpfix.plan.memory import Estimate, estimate
from smpfix.plan.models import ModelShape, ParameterCount
from smpfix.plan.search import Cluster, Workload, search
from smpfix.plan.setup import Setup
from smpfix.plan.verdict import Verdict, verdict_of

_CHECKPOINTING = "turn on activation checkpointing of each transformer layer" + (
    " (`smp.set_activation_checkpointing`)"
)


@dataclass(frozen=True)
class Suggestion:
    change: str
    setup: Setup
    estimate: Estimate
    instance: Optional[InstanceType] = None  # a bigger instance type, when that is the change


def suggest(
    count: ParameterCount,
    shape: Optional[ModelShape],
    setup: Setup,
    instance: InstanceType,
    limit: int = 3,
) -> tuple[Suggestion, ...]:
    """Up to ``limit`` configurations that fit, best first; none for a job that fits."""
    if verdict_of(estimate(count, shape, setup, instance.gpu_memory_mib)) in (
        Verdict.FITS,
        Verdict.TIGHT,
    ):
        return ()
    found = list(_bigger_instance(count, shape, setup, instance))
    if setup.world % instance.gpus == 0:
        workload = Workload(
            count,
            shape,
            setup.seq_len,
            global_batch(setup),
            setup.precision,
            setup.flash_attention,
            setup.optimizer,
        )
        for candidate in search(
            workload, Cluster(instance, setup.world // instance.gpus), "v1", setup
        ):
            assert isinstance(candidate.setup, Setup)
            if _undoes_a_saver(setup, candidate.setup):
                continue
            change = describe(setup, candidate.setup)
            if change:
                found.append(Suggestion(change, candidate.setup, candidate.estimate))
    return tuple(found[:limit])


def _undoes_a_saver(before: Setup, after: Setup) -> bool:
    """A suggestion never turns off the checkpointing or offloading the job has on."""
    return (before.activation_checkpointing and not after.activation_checkpointing) or (
        before.offload_activations and not after.offload_activations
    )


def global_batch(setup: Setup) -> Optional[int]:
    """The samples of one step over the cluster: a tensor-parallel group's batch (the rank's
    times the degree without ``prescaled_batch``) times the reduced data-parallel degree."""
    if setup.batch is None:
        return None
    group = setup.batch if setup.prescaled_batch else setup.batch * setup.tp
    return group * setup.rdp


def describe(before: Setup, after: Setup) -> str:
    """The changes from ``before`` to ``after`` in the words of the launcher's settings."""
    changes = []
    if after.tp != before.tp:
        changes.append(f"set tensor_parallel_degree to {after.tp}")
    if after.pp != before.pp:
        changes.append(
            f"set pipeline_parallel_degree to {after.pp} (microbatches {after.microbatches})"
        )
    elif after.microbatches != before.microbatches:
        changes.append(f"set microbatches to {after.microbatches}")
    if after.sdp != before.sdp:
        changes.append(f"set sharded_data_parallel_degree to {after.sdp}")
    if after.oss != before.oss:
        changes.append(f"turn {'on' if after.oss else 'off'} shard_optimizer_state")
    if after.activation_checkpointing != before.activation_checkpointing:
        changes.append(
            _CHECKPOINTING
            if after.activation_checkpointing
            else "turn off activation checkpointing"
        )
    if after.offload_activations != before.offload_activations:
        changes.append(f"turn {'on' if after.offload_activations else 'off'} offload_activations")
    if changes and after.prescaled_batch and after.batch is not None:
        if after.batch != before.batch or not before.prescaled_batch:
            changes.append(
                f"with prescaled_batch and a batch of {after.batch} per tensor-parallel group"
            )
    return "; ".join(changes)


def _bigger_instance(
    count: ParameterCount,
    shape: Optional[ModelShape],
    setup: Setup,
    instance: InstanceType,
) -> list[Suggestion]:
    """The same job on the smallest instance type with more GPU memory, as many GPUs and SMP
    v1 support on which it fits."""
    for other in sorted(INSTANCE_TYPES.values(), key=lambda t: (t.gpu_memory_mib, t.name)):
        if (
            other.gpus != instance.gpus
            or other.gpu_memory_mib <= instance.gpu_memory_mib
            or not other.smp_v1_supported
        ):
            continue
        moved = replace(setup, smddp_collectives=setup.smddp_collectives and other.efa)
        result = estimate(count, shape, moved, other.gpu_memory_mib)
        if verdict_of(result) in (Verdict.FITS, Verdict.TIGHT):
            return [Suggestion(f"use {other.name} ({other.gpu_model})", moved, result, other)]
    return []
