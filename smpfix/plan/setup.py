"""A training setup as the memory estimate sees it: degrees, batch, sequence and switches.

It is the numbers the library divides memory by, read from the launcher, the job settings
and the script; ``planner`` fills it in. ``batch`` is the script's batch (``train_batch_size``):
per rank without ``prescaled_batch``, per tensor-parallel group with it, as the best-practices
page defines it. ``seq_len`` and ``batch`` may be unknown: model states can still be
estimated, activations cannot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

from smpfix.plan.layers import LayerKind

# Optimizer state in fp32 per parameter, as each ``torch.optim`` class keeps it per parameter
# (its ``state[p]`` tensors): Adam's two moments are 8 bytes, one momentum 4.
OPTIMIZER_STATE_BYTES: Mapping[str, int] = {
    "adam": 8,  # exp_avg, exp_avg_sq (AdamW, Adamax, NAdam, RAdam, LAMB alike)
    "sgd with momentum": 4,  # momentum_buffer
    "sgd": 0,
    "adagrad": 4,  # sum
    "rmsprop": 4,  # square_avg (momentum and centered add one tensor each, not counted)
    "adafactor": 4,  # factored second moment: well under 4 bytes, counted as 4
    "adadelta": 8,  # square_avg, acc_delta
    "rprop": 8,  # prev, step_size
    "asgd": 4,  # ax (eta and mu are scalars)
    "lion": 4,  # exp_avg
}
PRECISIONS = ("fp16", "bf16", "fp32")


@dataclass(frozen=True)
class Setup:
    world: int  # processes: instance_count x processes_per_host
    seq_len: Optional[int] = None
    # The sequence length is the model's context width, not the data's: the longest it can be.
    seq_len_upper_bound: bool = False
    batch: Optional[int] = None
    tp: int = 1
    pp: int = 1
    sdp: int = 1
    oss: bool = False
    prescaled_batch: bool = False
    microbatches: int = 1
    active_microbatches: Optional[int] = None  # the library's default: pp + 2
    precision: str = "fp16"
    optimizer: str = "adam"
    activation_checkpointing: bool = False
    checkpoint_group: int = 1  # layers per checkpoint: 1 for strategy "each", k for "group_k"
    offload_activations: bool = False
    activation_loading_horizon: int = 4
    flash_attention: bool = False
    distribute_embedding: bool = (
        False  # automatic under sharded data parallelism with tensor parallelism
    )
    sdp_max_live_parameters: int = 10**9
    smddp_collectives: bool = (
        False  # sharded data parallelism's AllGather through SMDDP (p4d, several instances)
    )
    sdp_reduce_bucket_size: int = 5 * 10**8  # elements of the default dtype (v1 reference)
    layers: LayerKind = LayerKind.LIBRARY  # whose transformer layers run (``plan.layers``)

    @property
    def dp(self) -> int:
        """The library's ``dp_size()``: world / pp (tensor-parallel peers count as data-parallel
        ranks)."""
        return self.world // self.pp

    @property
    def rdp(self) -> int:
        """The library's ``rdp_size()``: world / (pp x tp)."""
        return self.world // (self.pp * self.tp)

    @property
    def in_flight(self) -> int:
        """Microbatches whose activations one pipeline stage holds at once."""
        if self.pp <= 1:
            return 1
        active = self.active_microbatches if self.active_microbatches is not None else self.pp + 2
        return max(1, min(active, self.microbatches))

    @property
    def group_microbatch(self) -> Optional[float]:
        """Samples one tensor-parallel layer processes per microbatch: without prescaled batch
        the library gathers the batches of the tensor-parallel group."""
        if self.batch is None:
            return None
        group_batch = self.batch if self.prescaled_batch else self.batch * self.tp
        return group_batch / self.microbatches

    @property
    def half_precision(self) -> bool:
        return self.precision != "fp32"


def problems(setup: Setup) -> tuple[str, ...]:
    """What makes the setup one the library refuses (the configuration rules report these):
    no estimate is made for it."""
    found = []
    if min(setup.world, setup.tp, setup.pp, setup.sdp, setup.microbatches) < 1:
        found.append("a degree, the process count or microbatches is below 1")
        return tuple(found)
    if setup.world % (setup.tp * setup.pp):
        found.append(
            "the process count is not divisible by tensor_parallel_degree x "
            "pipeline_parallel_degree"
        )
    if setup.sdp > 1 and (setup.pp > 1 or setup.oss):
        found.append(
            "sharded data parallelism needs pipeline_parallel_degree 1 and no optimizer state "
            "sharding"
        )
    if setup.sdp > 1 and setup.rdp % setup.sdp:
        found.append(
            "sharded_data_parallel_degree does not divide the reduced data-parallel degree"
        )
    if setup.batch is not None and (setup.batch < 1 or setup.batch % setup.microbatches):
        found.append("the batch is not divisible by microbatches")
    if setup.precision not in PRECISIONS:
        found.append(f"unknown precision {setup.precision!r}")
    if setup.optimizer not in OPTIMIZER_STATE_BYTES:
        found.append(f"unknown optimizer {setup.optimizer!r}")
    return tuple(found)
