"""A Llama fine-tuning script on SMP v2 that offloads FSDP's parameters to the CPU, as a
user who cannot add instances does: ``FSDP(..., cpu_offload=CPUOffload(offload_params=...))``
with the switch a hyperparameter."""

import argparse

import torch
import torch.distributed as dist
import torch.sagemaker as tsm
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    apply_activation_checkpointing,
)
from torch.distributed.fsdp import CPUOffload, MixedPrecision
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from transformers import AutoModelForCausalLM

parser = argparse.ArgumentParser()
parser.add_argument("--train_batch_size", type=int, default=1)
parser.add_argument("--max_seq_length", type=int, default=2048)
parser.add_argument("--offload_params", type=int, default=1)
args = parser.parse_args()

dist.init_process_group("nccl")
tsm.init()
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-70b-hf")
model = tsm.transform(model)
model = FSDP(
    model,
    mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16),
    cpu_offload=CPUOffload(offload_params=args.offload_params > 0),
    device_id=torch.cuda.current_device(),
)
apply_activation_checkpointing(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
for batch in range(10):
    inputs = torch.randint(0, 32000, (args.train_batch_size, args.max_seq_length))
    loss = model(input_ids=inputs, labels=inputs).loss
    loss.backward()
    optimizer.step()
