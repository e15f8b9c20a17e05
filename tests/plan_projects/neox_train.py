"""A GPT-NeoX training script in the style of the sharded data parallelism example."""
import argparse

import smdistributed.modelparallel.torch as smp
import torch
from transformers import AutoModelForCausalLM, GPTNeoXConfig

parser = argparse.ArgumentParser()
parser.add_argument("--train_batch_size", type=int, default=4)
parser.add_argument("--max_context_width", type=int, default=2048)
parser.add_argument("--hidden_width", type=int, default=6144)
parser.add_argument("--num_layers", type=int, default=44)
parser.add_argument("--num_heads", type=int, default=64)
parser.add_argument("--intermediate_size", type=int, default=24576)
parser.add_argument("--bf16", type=int, default=1)
parser.add_argument("--activation_checkpointing", type=int, default=1)
parser.add_argument("--flash_attention", type=int, default=1)
args = parser.parse_args()

smp.init({"ddp": True, "bf16": args.bf16 > 0})
config = GPTNeoXConfig(
    hidden_size=args.hidden_width,
    num_hidden_layers=args.num_layers,
    num_attention_heads=args.num_heads,
    intermediate_size=args.intermediate_size,
    max_position_embeddings=args.max_context_width,
)
with smp.model_creation(tensor_parallelism=True, dtype=torch.bfloat16, flash_attention=args.flash_attention > 0):
    model = AutoModelForCausalLM.from_config(config)
model = smp.DistributedModel(model)
if args.activation_checkpointing:
    for layer in model.get_module().gpt_neox.layers:
        smp.set_activation_checkpointing(layer)
optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-4))
