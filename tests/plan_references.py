"""The seeds' reference configurations and clearly weaker ones, as plan inputs.

Reference configurations (must fit), from the seed tables:
- best practices page: GPT-2, sequence 512, vocabulary about 50k, 16 or 32 ml.p4d.24xlarge,
  optimizer state sharding, checkpointing of each transformer layer, prescaled batch;
- sharded data parallelism page: GPT-NeoX-20B with SMDDP collectives, GPT-NeoX-65B with tensor
  parallelism and activation offloading.
The seeds give parameter counts, not shapes: GPT-2 30B is the official notebook's
``gpt2-30b`` and GPT-NeoX-20B the published checkpoint; the GPT-2 10B and 60B and GPT-NeoX-65B
shapes are assumptions with the right count (docs/plan.md). All four GPT-NeoX rows take
bf16, checkpointing of each layer and flash attention (the official example's defaults);
the 20B rows are without offloading, which their table does not list.
"""

from __future__ import annotations

from dataclasses import replace

from smpfix.job.instances import INSTANCE_TYPES, InstanceType
from smpfix.plan.checkpoints import CHECKPOINTS
from smpfix.plan.models import ModelShape
from smpfix.plan.setup import Setup

P4D = INSTANCE_TYPES["ml.p4d.24xlarge"]
V100_16GB = INSTANCE_TYPES["ml.p3.16xlarge"]
A10G = INSTANCE_TYPES["ml.g5.48xlarge"]

GPT2_10B = ModelShape("gpt2", 4096, 48, 32, 50257, 4 * 4096, 512)  # 9.87e9, assumed
GPT2_10B_OTHER = ModelShape("gpt2", 5120, 32, 40, 50257, 4 * 5120, 512)  # 10.33e9, also assumed
GPT2_30B = ModelShape(
    "gpt2", 7168, 48, 64, 50257, 4 * 7168, 512
)  # 29.96e9, the notebook's gpt2-30b
GPT2_60B = ModelShape(
    "gpt2", 8192, 74, 64, 50257, 4 * 8192, 512
)  # 60.02e9, assumed (74 layers split over pp 2)
NEOX_20B = CHECKPOINTS["EleutherAI/gpt-neox-20b"].shape  # 20.56e9
NEOX_65B = ModelShape(
    "gpt_neox", 8192, 80, 64, 50432, 4 * 8192, 2048, tied_embeddings=False
)  # 65.26e9, assumed

_NEOX = {"precision": "bf16", "activation_checkpointing": True, "flash_attention": True}

REFERENCES: dict[str, tuple[ModelShape, Setup, InstanceType]] = {
    # 16 x p4d, pp 1, tp 4, OSS, each layer checkpointed, prescaled, batch 40
    "GPT-2 10B": (
        GPT2_10B,
        Setup(
            world=128,
            seq_len=512,
            batch=40,
            tp=4,
            oss=True,
            prescaled_batch=True,
            activation_checkpointing=True,
        ),
        P4D,
    ),
    # 16 x p4d, pp 1, tp 8, OSS, checkpointing, prescaled, batch 32
    "GPT-2 30B": (
        GPT2_30B,
        Setup(
            world=128,
            seq_len=512,
            batch=32,
            tp=8,
            oss=True,
            prescaled_batch=True,
            activation_checkpointing=True,
        ),
        P4D,
    ),
    # 32 x p4d, pp 2, tp 8, OSS, checkpointing, prescaled, batch 56, microbatches 4,
    # active_microbatches 2
    "GPT-2 60B": (
        GPT2_60B,
        Setup(
            world=256,
            seq_len=512,
            batch=56,
            tp=8,
            pp=2,
            microbatches=4,
            active_microbatches=2,
            oss=True,
            prescaled_batch=True,
            activation_checkpointing=True,
        ),
        P4D,
    ),
    # 2 x p4d, sequence 2048, global batch 64, mini batch 4, sdp 16, SMDDP collectives
    "GPT-NeoX-20B on 2 instances": (
        NEOX_20B,
        Setup(world=16, seq_len=2048, batch=4, sdp=16, smddp_collectives=True, **_NEOX),
        P4D,
    ),
    # 8 x p4d, sequence 2048, global batch 768, mini batch 12, sdp 32, SMDDP collectives
    "GPT-NeoX-20B on 8 instances": (
        NEOX_20B,
        Setup(world=64, seq_len=2048, batch=12, sdp=32, smddp_collectives=True, **_NEOX),
        P4D,
    ),
    # 64 x p4d, sequence 2048, global batch 512, mini batch 8, sdp 16, tp 8, offloading, NCCL
    "GPT-NeoX-65B, tp 8": (
        NEOX_65B,
        Setup(
            world=512,
            seq_len=2048,
            batch=8,
            tp=8,
            sdp=16,
            prescaled_batch=True,
            offload_activations=True,
            **_NEOX,
        ),
        P4D,
    ),
    # 64 x p4d, sequence 4096, global batch 512, mini batch 2, sdp 64, tp 2, offloading, NCCL
    "GPT-NeoX-65B, tp 2": (
        NEOX_65B,
        Setup(
            world=512,
            seq_len=4096,
            batch=2,
            tp=2,
            sdp=64,
            prescaled_batch=True,
            offload_activations=True,
            **_NEOX,
        ),
        P4D,
    ),
}


def reference(name: str) -> Setup:
    return REFERENCES[name][1]


# The same models on clearly weaker configurations: no sharding or parallelism, too small a
# GPU, too few GPUs to shard over, or a memory saver removed.
WEAKER: dict[str, tuple[ModelShape, Setup, InstanceType]] = {
    "10B, plain data parallelism": (
        GPT2_10B,
        replace(reference("GPT-2 10B"), tp=1, oss=False, prescaled_batch=False, batch=10),
        P4D,
    ),
    "10B, tp 4 without OSS": (GPT2_10B, replace(reference("GPT-2 10B"), oss=False), P4D),
    "30B on V100 16GB": (GPT2_30B, reference("GPT-2 30B"), V100_16GB),
    "30B on 2 instances": (GPT2_30B, replace(reference("GPT-2 30B"), world=16), P4D),
    "60B, tp 8 without pipeline or OSS": (
        GPT2_60B,
        replace(reference("GPT-2 60B"), pp=1, oss=False, microbatches=1),
        P4D,
    ),
    "NeoX-20B, plain data parallelism": (
        NEOX_20B,
        replace(reference("GPT-NeoX-20B on 2 instances"), sdp=1),
        P4D,
    ),
    "NeoX-20B on A10G": (NEOX_20B, reference("GPT-NeoX-20B on 2 instances"), A10G),
    "NeoX-20B without checkpointing": (
        NEOX_20B,
        replace(reference("GPT-NeoX-20B on 2 instances"), activation_checkpointing=False),
        P4D,
    ),
    "NeoX-20B on 8 instances, batch doubled": (
        NEOX_20B,
        replace(reference("GPT-NeoX-20B on 8 instances"), batch=24),
        P4D,
    ),
    "NeoX-65B without tensor parallelism": (
        NEOX_65B,
        replace(reference("GPT-NeoX-65B, tp 8"), tp=1, prescaled_batch=False),
        P4D,
    ),
    "NeoX-65B, sequence 4096 without checkpointing": (
        NEOX_65B,
        replace(
            reference("GPT-NeoX-65B, tp 2"),
            activation_checkpointing=False,
            offload_activations=False,
        ),
        P4D,
    ),
}
