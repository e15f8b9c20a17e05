"""Per-GPU memory of an SMP v2 job: PyTorch FSDP sharding, SMP tensor parallelism, activations.

SMP v2 (``torch.sagemaker``) is not SMP v1 with other names: it runs on PyTorch FSDP, so the
model states divide as FSDP divides them, not as v1's optimizer state sharding or sharded
data parallelism do (``memory.model_states``). The premises, with their sources:

- **Sharding degree** (v2 reference, ``hybrid_shard_degree``): 0, the default, keeps the
  script's FSDP strategy when ``tensor_parallel_degree`` is 1 (``FULL_SHARD`` shards over
  every GPU, ``HYBRID_SHARD`` and ``_HYBRID_SHARD_ZERO2`` are "equivalent to
  ``hybrid_shard_degree`` of 8"), and with tensor parallelism takes the largest degree
  ``world_size / tensor_parallel_degree`` allows; 1 is ``NO_SHARD`` (within each
  tensor-parallel group); 2 or more shards over that many GPUs (``shard_degree``).
- **Model states**: FSDP keeps each rank's shard of the parameters in their own dtype and
  the optimizer creates its state for that shard only. The official v2 example
  (``shared-scripts/train_lib.py``) asserts that the parameters are fp32 before the FSDP
  wrap ("Model parameters should be in fp32 for FSDP mixed precision") and trains in
  ``MixedPrecision(param_dtype=bf16, reduce_dtype=bf16)``: 4 (fp32 parameter) + 4 (fp32
  gradient) + 8 (AdamW) bytes per parameter, divided by the sharding degree.
- **Gathered parameters**: FSDP all-gathers one wrapped unit (a transformer layer under
  ``transformer_auto_wrap_policy``, the example's default) at a time, in the compute dtype,
  and prefetches the next; the root unit (embeddings, output head, final norm) stays
  gathered from the forward to the backward pass; in the backward pass a unit's full
  gradient exists until its reduce-scatter. ``SHARD_GRAD_OP`` and ``_HYBRID_SHARD_ZERO2``
  do not free the parameters after the forward pass: every layer stays gathered.
- **Tensor parallelism** (v2 tensor parallelism page): SMP v2 splits the transformer layers
  of the models ``torch.sagemaker.transform`` supports over ``tensor_parallel_degree`` GPUs,
  and FSDP shards the rest over ``hybrid_shard_degree``. The embeddings and the output head
  are counted whole on every tensor-parallel rank (the pages do not say they are split).
- **Expert parallelism** (v2 expert parallelism page: it "handles splitting experts of an
  MoE model across GPU devices", for Mixtral; "not compatible with tensor parallelism"): the
  experts' MLP weights are split evenly over ``expert_parallel_degree`` GPUs (Megatron's
  MoE layer, on which SMP v2 builds it, asserts that the experts divide), each rank
  keeping ``experts / expert_parallel_degree`` of every layer's experts, and FSDP shards
  them over at most ``world_size / expert_parallel_degree`` GPUs (the official Mixtral
  example's range of ``hybrid_shard_degree``); attention, router, norms and embeddings are
  sharded as in a dense model. ``hybrid_shard_degree`` 0 with expert parallelism shards over
  the script's strategy's degree, never more than that range. A Mixtral layer's activations
  are those of a Llama layer whose MLP is ``num_experts_per_tok`` experts wide (each token
  runs that many experts; ``models.dense_equivalent``).
- **FSDP CPU offload** (PyTorch FSDP reference, ``CPUOffload``: ``offload_params`` offloads
  "parameters to CPUs when these parameters are not used for computation on GPUs" and
  "implicitly enables gradient offloading to CPUs ... to work with optimizer", whose state
  then lives on the CPU too): the
  rank's shard of parameters, gradients and optimizer state is in host memory and counts
  nothing on the GPU; the gathered window (parameters of the units being computed, one
  unit's full gradient) stays on the GPU as without offload.
- **Activations** (best-practices page: "FSDP doesn't shard activations"): per layer as
  ``plan.layers`` counts them: SMP v2's own layers (Korthikanti's formula) under
  tensor parallelism, the Hugging Face layers' counted tensors otherwise. The data loader
  gives each tensor-parallel group one batch (the example's
  ``dp_rank = rank // (tensor_parallel_degree * context_parallel_degree)``; the
  best-practices page's "batch size of 1 per tensor parallel group"), so ``batch`` is the
  samples a rank computes on; context parallelism divides the sequence. With activation
  checkpointing each layer keeps its input (not split by tensor parallelism, which is
  conservative); with activation offloading at most ``activation_loading_horizon`` layer
  inputs are on the GPU at once (v2 reference), counted here with one more, the layer being
  computed. Offloading without checkpointing is not counted (the activation offloading page
  uses it with checkpointing).
- **The rest**: as for v1 (``memory.buffers``): CUDA context, communicators, fragmentation.

Bytes throughout. ``docs/plan.md`` lists the approximations and the calibration against the
v2 reference configurations of the best-practices page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from smpfix.plan.layers import LayerKind, LayerTensors, band
from smpfix.plan.memory import (
    CUDA_CONTEXT_BAND,
    CUDA_CONTEXT_BYTES,
    FRAGMENTATION,
    FRAGMENTATION_BAND,
    LOGITS_BYTES_PER_ELEMENT,
    LOGITS_HIGH,
    NCCL_BAND,
    NCCL_BYTES,
    Activations,
    Band,
    Estimate,
    ModelStates,
    banded,
)
from smpfix.plan.models import ModelShape, ParameterCount, dense_equivalent
from smpfix.plan.setup import OPTIMIZER_STATE_BYTES

MIB = 1024**2
# What FSDP's HYBRID_SHARD comes to under SMP v2 without a hybrid_shard_degree (v2 reference).
HYBRID_SHARD_GPUS = 8
# The FSDP sharding strategies, by the name ``ShardingStrategy`` gives them.
FULL_SHARD = "FULL_SHARD"
HYBRID_SHARD = "HYBRID_SHARD"
NO_SHARD = "NO_SHARD"
ZERO2 = frozenset({"SHARD_GRAD_OP", "_HYBRID_SHARD_ZERO2"})
STRATEGIES = frozenset({FULL_SHARD, HYBRID_SHARD, NO_SHARD, *ZERO2})


def shard_degree(hybrid_shard_degree: int, tp: int, world: int, strategy: str, ep: int = 1) -> int:
    """The GPUs one parameter is sharded over, as SMP v2 sets it (see the module docstring);
    with expert parallelism never more than ``world / ep``."""
    if hybrid_shard_degree >= 2:
        return hybrid_shard_degree
    if hybrid_shard_degree == 1:
        return 1
    if tp > 1:
        return world // tp
    if strategy == NO_SHARD:
        return 1
    if strategy in (HYBRID_SHARD, "_HYBRID_SHARD_ZERO2"):
        return min(HYBRID_SHARD_GPUS, world, world // max(ep, 1))
    return world // max(ep, 1)


@dataclass(frozen=True)
class FsdpSetup:
    """An SMP v2 job as the estimate sees it. ``batch`` is the samples of one tensor-parallel
    group (what each of its ranks computes on); ``precision`` is the compute dtype of FSDP's
    ``MixedPrecision`` ("bf16", "fp16") or "fp32" without it."""

    world: int
    shard: int  # from ``shard_degree``
    tp: int = 1
    cp: int = 1
    ep: int = 1  # expert_parallel_degree: splits the experts of a mixture-of-experts model
    experts: int = 0  # the model's experts per layer (``num_local_experts``); 0 when unknown
    seq_len: Optional[int] = None
    batch: Optional[int] = None
    precision: str = "bf16"
    optimizer: str = "adam"
    zero2: bool = False  # SHARD_GRAD_OP or _HYBRID_SHARD_ZERO2: parameters stay gathered
    # FSDP's ``CPUOffload(offload_params=True)``: the sharded model states live in host memory
    cpu_offload: bool = False
    activation_checkpointing: bool = False
    offload_activations: bool = False
    activation_loading_horizon: int = 2  # the v2 default
    flash_attention: bool = False
    # SMP v2's own layers replace a model's under ``torch.sagemaker.transform`` with tensor
    # parallelism; otherwise the model runs its Hugging Face layers (``plan.layers``).
    layers: LayerKind = LayerKind.LIBRARY

    @property
    def half_precision(self) -> bool:
        return self.precision != "fp32"

    @property
    def expert_shard(self) -> int:
        """The GPUs the experts a rank holds are sharded over: FSDP's sharding degree, within
        the ``world / ep`` ranks that hold the same experts."""
        return max(1, min(self.shard, self.world // max(self.ep, 1)))


def problems(setup: FsdpSetup) -> tuple[str, ...]:
    """What makes the setup one SMP v2 refuses: no estimate is made for it."""
    if (
        min(
            setup.world, setup.tp, setup.cp, setup.ep, setup.shard, setup.activation_loading_horizon
        )
        < 1
    ):
        return ("a degree, the process count or activation_loading_horizon is below 1",)
    found = []
    if setup.ep > 1:
        if setup.tp > 1:
            found.append("expert parallelism is not compatible with tensor parallelism")
        if setup.experts % setup.ep:
            found.append(
                f"the model's {setup.experts} experts per layer do not divide over"
                " expert_parallel_degree (Megatron's MoE layer, which SMP v2's expert"
                " parallelism runs on, asserts they do)"
            )
        if setup.world % setup.ep:
            found.append("expert_parallel_degree does not divide the process count")
        elif setup.shard > setup.world // setup.ep:
            found.append(
                "hybrid_shard_degree is above the process count over expert_parallel_degree"
            )
    if setup.world % setup.tp:
        found.append("tensor_parallel_degree does not divide the process count")
    elif setup.shard > setup.world // setup.tp or (setup.world // setup.tp) % setup.shard:
        found.append(
            "hybrid_shard_degree is above, or does not divide, the process count over"
            " tensor_parallel_degree"
        )
    if setup.cp > setup.shard:
        found.append("context_parallel_degree is above hybrid_shard_degree")
    if setup.batch is not None and setup.batch < 1:
        found.append("the batch is below 1")
    if setup.optimizer not in OPTIMIZER_STATE_BYTES:
        found.append(f"unknown optimizer {setup.optimizer!r}")
    return tuple(found)


def _resident(count: ParameterCount, setup: FsdpSetup) -> tuple[float, float]:
    """The parameters one rank holds before FSDP shards them: those tensor parallelism splits
    or keeps whole, and the experts expert parallelism leaves it."""
    dense = (count.in_layers - count.in_experts) / setup.tp + count.outside_layers
    return dense, count.in_experts / setup.ep


def _layer(count: ParameterCount, setup: FsdpSetup) -> float:
    """One transformer layer's parameters on a rank, gathered."""
    if not count.layers:
        return 0.0
    dense, experts = count.in_layers - count.in_experts, count.in_experts
    return (dense / setup.tp + experts / setup.ep) / count.layers


def sharded_states(count: ParameterCount, setup: FsdpSetup) -> float:
    """The rank's shard of fp32 parameters, gradients and optimizer state, wherever it lives."""
    dense, experts = _resident(count, setup)
    sharded_bytes = 8 + OPTIMIZER_STATE_BYTES[setup.optimizer]
    return sharded_bytes * (dense / setup.shard + experts / setup.expert_shard)


def model_states(count: ParameterCount, setup: FsdpSetup) -> ModelStates:
    """The rank's shard of fp32 parameters, gradients and optimizer state (none on the GPU under
    CPU offload), and the window of parameters (and one unit's gradient) gathered in the
    compute dtype."""
    dense, experts = _resident(count, setup)
    resident = dense + experts
    states = 0.0 if setup.cpu_offload else sharded_states(count, setup)
    width = 2 if setup.half_precision else 4
    layer = _layer(count, setup)
    root = float(count.outside_layers)
    gathered = resident if setup.zero2 else root + 2 * layer  # this layer and the prefetched one
    return ModelStates(resident, states, width * (gathered + max(layer, root)))


def model_states_band(count: ParameterCount, setup: FsdpSetup, central: ModelStates) -> Band:
    """The low end gathers one unit at a time, without prefetch or a full gradient."""
    if setup.zero2:
        return Band.exact(central.total)
    width = 2 if setup.half_precision else 4
    one = width * max(_layer(count, setup), float(count.outside_layers))
    return Band(min(central.states + one, central.total), central.total, central.total)


def activations(
    shape: ModelShape, count: ParameterCount, setup: FsdpSetup
) -> Optional[Activations]:
    """Per-GPU activations at the peak of the backward pass; None without sequence or batch.
    Each layer keeps what its kind keeps (``layers.band``, the central count)."""
    dense = dense_equivalent(shape)
    return _activations(
        dense, count, setup, band(dense, setup.layers).central, LOGITS_BYTES_PER_ELEMENT
    )


def _activations(
    shape: ModelShape,
    count: ParameterCount,
    setup: FsdpSetup,
    tensors: LayerTensors,
    logits_bytes: float,
) -> Optional[Activations]:
    if setup.seq_len is None or setup.batch is None:
        return None
    seq = math.ceil(setup.seq_len / setup.cp)
    samples, tp = setup.batch, setup.tp
    width = 1 if setup.half_precision else 2
    layers = count.layers or shape.depth
    one_layer = tensors.bytes(shape, seq, samples, tp, setup.flash_attention) * width
    if setup.activation_checkpointing:
        kept = float(layers)
        if setup.offload_activations:
            kept = min(kept, setup.activation_loading_horizon + 1.0)
        checkpoints = 2 * width * seq * samples * shape.hidden * kept
        working = one_layer
    else:
        checkpoints, working = one_layer * layers, 0.0
    logits = seq * samples * shape.vocab * logits_bytes * width if shape.lm_head else 0.0
    return Activations(checkpoints, working, logits)


def activations_band(shape: ModelShape, count: ParameterCount, setup: FsdpSetup) -> Optional[Band]:
    shape = dense_equivalent(shape)
    counts = band(shape, setup.layers)
    low = _activations(shape, count, setup, counts.low, LOGITS_BYTES_PER_ELEMENT)
    central = _activations(shape, count, setup, counts.central, LOGITS_BYTES_PER_ELEMENT)
    high = _activations(shape, count, setup, counts.high, LOGITS_BYTES_PER_ELEMENT * LOGITS_HIGH)
    if low is None or central is None or high is None:
        return None
    return Band(low.total, central.total, high.total)


def estimate(
    count: ParameterCount, shape: Optional[ModelShape], setup: FsdpSetup, gpu_memory_mib: int
) -> Estimate:
    states = model_states(count, setup)
    acts = activations(shape, count, setup) if shape is not None else None
    acts_band = activations_band(shape, count, setup) if shape is not None else None
    body = states.total + (acts.total if acts is not None else 0.0)
    rest = Band(CUDA_CONTEXT_BAND[0], CUDA_CONTEXT_BYTES, CUDA_CONTEXT_BAND[1])
    if setup.world > 1:
        rest = rest + Band(NCCL_BAND[0], NCCL_BYTES, NCCL_BAND[1])
    rest = rest + Band(
        FRAGMENTATION_BAND[0] * body, FRAGMENTATION * body, FRAGMENTATION_BAND[1] * body
    )
    return banded(
        count,
        states,
        model_states_band(count, setup, states),
        acts,
        acts_band,
        rest,
        gpu_memory_mib * MIB,
    )
