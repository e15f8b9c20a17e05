"""Per-GPU memory of a training setup: model states, activations and the rest, each with a band.

- **Model states** (developer guide, "Estimate Memory Requirements"): with fp16 or bf16
  and Adam, 20 bytes per parameter:
  2 (16-bit weight) + 2 (16-bit gradient) on every rank that holds the parameter, 4 (fp32
  master weight) + 4 (fp32 gradient) + 8 (Adam) that optimizer state sharding splits.
  Tensor parallelism divides the parameters inside the layers, pipeline parallelism divides
  all of them, sharded data parallelism divides everything but tensors under a million
  elements, plus a window of gathered parameters.
- **Activations**: per layer as the kind of layer the model runs keeps them (``layers``:
  Korthikanti et al. 2022 for the library's distributed transformer, a count per Hugging Face
  family otherwise), reduced by activation checkpointing to the layer inputs plus one layer
  recomputed, by offloading (with more than one microbatch) to a few layer inputs, multiplied
  by the microbatches a pipeline stage holds; plus the logits.
- **The rest**: the CUDA context, communicator buffers, sharded data parallelism's reduce
  bucket (``sdp_reduce_bucket_size``), SMDDP's buffers and allocator fragmentation.

Every term has a low and a high end (``Band``); ``Estimate.low`` and ``Estimate.high`` add them
up and the verdict weighs the GPU against them (``verdict``). Bytes throughout; ``GIB``
converts. Every approximation and band is listed in ``docs/plan.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from smpfix.plan.layers import LayerTensors, band
from smpfix.plan.models import ModelShape, ParameterCount
from smpfix.plan.setup import OPTIMIZER_STATE_BYTES, Setup

GIB = 1024**3
MIB = 1024**2

# The rest, per GPU: assumptions (with their bands) except the SMDDP sizes and the reduce
# bucket, which are documented defaults.
CUDA_CONTEXT_BYTES = 1.0 * GIB  # CUDA context, cuBLAS/cuDNN workspaces, driver and ECC reserve
CUDA_CONTEXT_BAND = (0.75 * GIB, 1.5 * GIB)
NCCL_BYTES = 0.5 * GIB  # communicators of the tp, pp, dp, rdp and world groups
NCCL_BAND = (0.25 * GIB, 1.0 * GIB)
SMDDP_BYTES = (
    144 * MIB
)  # SMDDP_AG_SCRATCH_BUFFER_SIZE_BYTES (16 MiB) + SMDDP_AG_SORT_BUFFER_SIZE_BYTES (128 MiB)
FRAGMENTATION = 0.05  # caching-allocator fragmentation, as a share of model states and activations
FRAGMENTATION_BAND = (0.0, 0.10)
# 16-bit logits, their 16-bit log-softmax and the 16-bit gradient the loss creates while both live.
LOGITS_BYTES_PER_ELEMENT = 6.0
# A loss computed in fp32 (Hugging Face's ``logits.float()``) keeps up to twice that.
LOGITS_HIGH = 2.0


@dataclass(frozen=True)
class Band:
    """A term's low end, its estimate and its high end, in bytes."""

    low: float
    central: float
    high: float

    @classmethod
    def exact(cls, value: float) -> Band:
        return cls(value, value, value)

    def __add__(self, other: Band) -> Band:
        return Band(self.low + other.low, self.central + other.central, self.high + other.high)


def bytes_per_parameter(precision: str, optimizer: str) -> tuple[int, int]:
    """(held by every rank that holds the parameter, split by optimizer state sharding).

    Mixed precision: 16-bit weight and gradient stay; fp32 master weight, fp32 gradient and
    the optimizer state are split: (4, 16) for Adam, the seeds' 20 bytes. fp32 training has
    no master copies: (8, 8) for Adam.
    """
    state = OPTIMIZER_STATE_BYTES[optimizer]
    if precision == "fp32":
        return 8, state
    return 4, 8 + state


@dataclass(frozen=True)
class ModelStates:
    parameters_per_gpu: float  # parameters resident on one GPU before sharded data parallelism
    states: float  # weights, gradients, master copies and optimizer state
    sdp_window: (
        float  # parameters gathered (and their full gradients) under sharded data parallelism
    )

    @property
    def total(self) -> float:
        return self.states + self.sdp_window


def model_states(
    count: ParameterCount, setup: Setup, oss_splits_fp32_gradients: bool = True
) -> ModelStates:
    """Per-GPU model states, divided as SMP v1 divides them.

    Optimizer state sharding splits tensor-parallel parameters over the reduced data-parallel
    group and the others over the data-parallel group (the library's OSS ``step``). It is
    taken to split the fp32 gradients too (4 + 16/d for Adam): the official GPT example's
    fp16 optimizer keeps fp32 master weights, and with them their gradients, only for the
    rank's shard. ``oss_splits_fp32_gradients=False`` gives a more conservative
    reading (8 + 12/d); the reference configurations fit under both (``docs/plan.md``).
    """
    replicated, shardable = bytes_per_parameter(setup.precision, setup.optimizer)
    total_bytes = replicated + shardable
    if not oss_splits_fp32_gradients and setup.half_precision:
        replicated, shardable = replicated + 4, shardable - 4
    distributed = setup.distribute_embedding or (setup.sdp > 1 and setup.tp > 1)
    split_by_tp = count.in_layers + (count.outside_layers if distributed else 0)
    local_tp = split_by_tp / setup.tp / setup.pp
    local_whole = (count.total - split_by_tp) / setup.pp
    parameters = local_tp + local_whole
    if setup.sdp > 1:
        small = count.small / setup.tp
        states = total_bytes * (parameters - small) / setup.sdp + total_bytes * small
        layer = count.per_layer / setup.tp
        gathered = min(
            float(setup.sdp_max_live_parameters), 2 * layer
        )  # this layer and the next, prefetched
        width = 4 if setup.precision == "fp32" else 2
        return ModelStates(
            parameters, states, width * (gathered + layer)
        )  # + one layer's full gradient
    if setup.oss and setup.dp > 1:
        states = local_tp * (replicated + shardable / setup.rdp) + local_whole * (
            replicated + shardable / setup.dp
        )
        return ModelStates(parameters, states, 0.0)
    return ModelStates(parameters, total_bytes * parameters, 0.0)


def model_states_band(count: ParameterCount, setup: Setup, central: ModelStates) -> Band:
    """``central``'s band. Sharded data parallelism: the window of gathered layers is an
    assumption, and DeepSpeed's ZeRO-3 estimator (18 bytes per parameter over the GPUs plus
    4 bytes per parameter of the largest layer) gives the low end. Optimizer state sharding:
    the two readings of what it splits (``model_states``) are the ends. Otherwise exact."""
    if setup.sdp > 1:
        replicated, shardable = bytes_per_parameter(setup.precision, setup.optimizer)
        total_bytes = replicated + shardable
        small = count.small / setup.tp
        layer = count.per_layer / setup.tp
        deepspeed = (total_bytes - 2) * (central.parameters_per_gpu - small) / setup.sdp + (
            total_bytes * small + 4 * layer
        )
        return Band(min(deepspeed, central.total), central.total, central.total)
    if setup.oss and setup.dp > 1 and setup.half_precision:
        readings = (central.total, model_states(count, setup, False).total)
        return Band(min(readings), central.total, max(readings))
    return Band.exact(central.total)


@dataclass(frozen=True)
class Activations:
    checkpoints: float  # stored layer inputs (with checkpointing) or every layer's activations
    working_layer: float  # the activations of the layers being recomputed
    logits: float

    @property
    def total(self) -> float:
        """The logits are freed before the last layers are recomputed in the backward pass:
        the two phases do not overlap."""
        return self.checkpoints + max(self.working_layer, self.logits)


def activations(shape: ModelShape, count: ParameterCount, setup: Setup) -> Optional[Activations]:
    """Per-GPU activations at the peak of the backward pass; None without sequence length or batch.

    With checkpointing, a stage keeps each checkpointed group's input (``2·s·G·h/t`` bytes,
    G the samples of a tensor-parallel group's microbatch) for every microbatch in flight,
    and recomputes one group at a time. Offloading keeps ``activation_loading_horizon`` + 1
    layer inputs on the GPU; it does nothing without checkpointing, and with one microbatch
    "it does not save memory" (developer guide, "Activation Offloading"). Logits: ``s·G·V/t``
    elements on the last stage, charged together with the first stage's checkpoints.
    fp32 training doubles every activation. Each layer keeps what its kind keeps
    (``layers.band``, the central count).
    """
    return _activations(
        shape, count, setup, band(shape, setup.layers).central, LOGITS_BYTES_PER_ELEMENT
    )


def activations_band(shape: ModelShape, count: ParameterCount, setup: Setup) -> Optional[Band]:
    """The activations' low and high ends: the layer count's band (``layers.band``), and a
    loss in fp32 for the logits at the high end."""
    counts = band(shape, setup.layers)
    ends = [
        _activations(shape, count, setup, tensors, logits)
        for tensors, logits in (
            (counts.low, LOGITS_BYTES_PER_ELEMENT),
            (counts.central, LOGITS_BYTES_PER_ELEMENT),
            (counts.high, LOGITS_BYTES_PER_ELEMENT * LOGITS_HIGH),
        )
    ]
    low, central, high = ends
    if low is None or central is None or high is None:
        return None
    return Band(low.total, central.total, high.total)


def _activations(
    shape: ModelShape,
    count: ParameterCount,
    setup: Setup,
    tensors: LayerTensors,
    logits_bytes: float,
) -> Optional[Activations]:
    samples = setup.group_microbatch
    if setup.seq_len is None or samples is None:
        return None
    seq, tp = setup.seq_len, setup.tp
    width = 1 if setup.half_precision else 2
    layers_here = (
        math.ceil(count.layers / setup.pp) if count.layers else math.ceil(shape.depth / setup.pp)
    )
    one_layer = tensors.bytes(shape, seq, samples, tp, setup.flash_attention) * width
    if setup.activation_checkpointing:
        group = max(1, min(setup.checkpoint_group, layers_here))
        kept = math.ceil(layers_here / group) * setup.in_flight
        if setup.offload_activations and setup.microbatches > 1:
            kept = min(kept, setup.activation_loading_horizon + 1)
        checkpoints = 2 * width * seq * samples * shape.hidden / tp * kept
        working = one_layer * group
    else:
        checkpoints = one_layer * layers_here * setup.in_flight
        working = 0.0
    logits = seq * samples * shape.vocab / tp * logits_bytes * width if shape.lm_head else 0.0
    return Activations(checkpoints, working, logits)


def buffers(setup: Setup, states_and_activations: float) -> Band:
    """The rest: fixed buffers plus fragmentation of what the model and activations take.

    Sharded data parallelism reduces gradients through a bucket of ``sdp_reduce_bucket_size``
    elements of the default dtype (v1 reference, default 5e8: 0.93 GiB in 16 bits, 1.86 GiB
    in fp32), and through SMDDP its AllGather buffers."""
    multi = setup.world > 1
    context = Band(CUDA_CONTEXT_BAND[0], CUDA_CONTEXT_BYTES, CUDA_CONTEXT_BAND[1])
    fixed = context + (Band(NCCL_BAND[0], NCCL_BYTES, NCCL_BAND[1]) if multi else Band.exact(0))
    if setup.sdp > 1:
        width = 2 if setup.half_precision else 4
        fixed = fixed + Band.exact(float(setup.sdp_reduce_bucket_size) * width)
        if setup.smddp_collectives:
            fixed = fixed + Band.exact(SMDDP_BYTES)
    share = FRAGMENTATION_BAND
    return fixed + Band(
        share[0] * states_and_activations,
        FRAGMENTATION * states_and_activations,
        share[1] * states_and_activations,
    )


@dataclass(frozen=True)
class Estimate:
    """Per-GPU bytes. ``activations`` is None when the sequence length, the batch or the
    model's shape is unknown: the total then counts model states and buffers only, a lower
    bound that can show a job does not fit, never that it fits. ``low`` and ``high`` are the
    ends of the band of the total (each term's band added up)."""

    parameters: int
    model_states: ModelStates
    activations: Optional[Activations]
    buffers: float
    gpu_bytes: float
    low: float = 0.0
    high: float = 0.0

    @property
    def total(self) -> float:
        return (
            self.model_states.total
            + (self.activations.total if self.activations is not None else 0.0)
            + self.buffers
        )

    @property
    def complete(self) -> bool:
        return self.activations is not None

    @property
    def share(self) -> float:
        return self.total / self.gpu_bytes

    @property
    def fits(self) -> Optional[bool]:
        """False when even the low end is over the GPU; True when the estimate is under it
        and complete; None otherwise (within the band of the GPU, or only a lower bound)."""
        if self.low > self.gpu_bytes:
            return False
        if self.total > self.gpu_bytes or not self.complete:
            return None
        return True


def banded(
    count: ParameterCount,
    states: ModelStates,
    states_band: Band,
    acts: Optional[Activations],
    acts_band: Optional[Band],
    rest: Band,
    gpu_bytes: float,
) -> Estimate:
    """An ``Estimate`` whose band adds up the terms' bands."""
    total = states_band + (acts_band if acts_band is not None else Band.exact(0.0)) + rest
    return Estimate(count.total, states, acts, rest.central, gpu_bytes, total.low, total.high)


def estimate(
    count: ParameterCount,
    shape: Optional[ModelShape],
    setup: Setup,
    gpu_memory_mib: int,
    oss_splits_fp32_gradients: bool = True,
) -> Estimate:
    states = model_states(count, setup, oss_splits_fp32_gradients)
    acts = activations(shape, count, setup) if shape is not None else None
    acts_band = activations_band(shape, count, setup) if shape is not None else None
    body = states.total + (acts.total if acts is not None else 0.0)
    return banded(
        count,
        states,
        model_states_band(count, setup, states),
        acts,
        acts_band,
        buffers(setup, body),
        gpu_memory_mib * MIB,
    )
