"""A Llama training script in the style of the official SMP v2 example (shared-scripts/train_lib.py)."""
import argparse
import functools

import torch
import torch.distributed as dist
import torch.sagemaker as tsm
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    apply_activation_checkpointing,
    checkpoint_wrapper,
    offload_wrapper,
)
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision, ShardingStrategy
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
from transformers import AutoModelForCausalLM, LlamaConfig
from transformers.models.llama.modeling_llama import LlamaDecoderLayer

parser = argparse.ArgumentParser()
parser.add_argument("--train_batch_size", type=int, default=2)
parser.add_argument("--max_context_width", type=int, default=4096)
parser.add_argument("--hidden_width", type=int, default=4096)
parser.add_argument("--num_layers", type=int, default=32)
parser.add_argument("--num_heads", type=int, default=32)
parser.add_argument("--num_key_value_heads", type=int, default=32)
parser.add_argument("--llama_intermediate_size", type=int, default=11008)
parser.add_argument("--bf16", type=int, default=1)
parser.add_argument("--activation_checkpointing", type=int, default=1)
parser.add_argument("--sharding_strategy", type=str, default="hybrid_shard")
args = parser.parse_args()


def get_sharding_strategy(name):
    return {"full_shard": ShardingStrategy.FULL_SHARD, "hybrid_shard": ShardingStrategy.HYBRID_SHARD}[name]


dist.init_process_group("nccl")
tsm.init()
config = LlamaConfig(
    hidden_size=args.hidden_width,
    num_hidden_layers=args.num_layers,
    num_attention_heads=args.num_heads,
    num_key_value_heads=args.num_key_value_heads,
    intermediate_size=args.llama_intermediate_size,
    max_position_embeddings=args.max_context_width,
)
model = tsm.transform(AutoModelForCausalLM.from_config(config))
mixed_precision = None
if args.bf16:
    mixed_precision = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
model = FSDP(
    model,
    auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer}),
    mixed_precision=mixed_precision,
    sharding_strategy=get_sharding_strategy(args.sharding_strategy),
    device_id=torch.cuda.current_device(),
)
if args.activation_checkpointing > 0:
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=checkpoint_wrapper)
if tsm.state.sm_activation_offloading > 0:
    model = offload_wrapper(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
