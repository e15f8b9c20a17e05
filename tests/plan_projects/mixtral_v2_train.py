"""A Mixtral training script in the style of the official SMP v2 expert-parallel example:
SMP's MoE implementation through ``tsm.transform(..., config=MoEConfig(...))``, FSDP with
hybrid sharding and bf16 mixed precision, activation checkpointing of the decoder layers."""

import argparse
import functools

import torch
import torch.distributed as dist
import torch.sagemaker as tsm
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    apply_activation_checkpointing,
    offload_wrapper,
)
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision, ShardingStrategy
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
from torch.sagemaker.moe.moe_config import MoEConfig
from transformers import AutoModelForCausalLM, MixtralConfig
from transformers.models.mixtral.modeling_mixtral import MixtralDecoderLayer

parser = argparse.ArgumentParser()
parser.add_argument("--train_batch_size", type=int, default=1)
parser.add_argument("--max_context_width", type=int, default=2048)
parser.add_argument("--hidden_width", type=int, default=4096)
parser.add_argument("--num_layers", type=int, default=32)
parser.add_argument("--num_heads", type=int, default=32)
parser.add_argument("--num_key_value_heads", type=int, default=8)
parser.add_argument("--intermediate_size", type=int, default=14336)
parser.add_argument("--num_local_experts", type=int, default=8)
parser.add_argument("--moe_load_balancing", type=str, default="sinkhorn")
parser.add_argument("--activation_checkpointing", type=int, default=1)
args = parser.parse_args()

dist.init_process_group("nccl")
tsm.init()
config = MixtralConfig(
    hidden_size=args.hidden_width,
    num_hidden_layers=args.num_layers,
    num_attention_heads=args.num_heads,
    num_key_value_heads=args.num_key_value_heads,
    intermediate_size=args.intermediate_size,
    num_local_experts=args.num_local_experts,
    max_position_embeddings=args.max_context_width,
)
model = AutoModelForCausalLM.from_config(config)
moe_config = MoEConfig(smp_moe=True, moe_load_balancing=args.moe_load_balancing)
model = tsm.transform(model, config=moe_config)
model = FSDP(
    model,
    auto_wrap_policy=functools.partial(
        transformer_auto_wrap_policy, transformer_layer_cls={MixtralDecoderLayer}
    ),
    mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16),
    sharding_strategy=ShardingStrategy.HYBRID_SHARD,
    device_id=torch.cuda.current_device(),
)
if args.activation_checkpointing > 0:
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, MixtralDecoderLayer))
if tsm.state.sm_activation_offloading > 0:
    model = offload_wrapper(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
