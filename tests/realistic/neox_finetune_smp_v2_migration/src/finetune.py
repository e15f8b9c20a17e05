"""Instruction fine-tuning of GPT-NeoX with SMP v2 (torch.sagemaker) and PyTorch FSDP.

Runs under torchrun: the launcher enables `torch_distributed`.
"""

import argparse
import logging
import math
import os
import time

import torch
import torch.distributed as dist
import torch.sagemaker as tsm
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import ShardingStrategy, StateDictType
from torch.utils.data import DataLoader, DistributedSampler

from data import InstructionDataset
from model_setup import load_base_model, mixed_precision, wrap_policy

logger = logging.getLogger(__name__)


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_name", type=str, default="EleutherAI/gpt-neox-20b")
    parser.add_argument("--max_context_width", type=int, default=2048)
    parser.add_argument("--train_batch_size", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--grad_clip", type=float, default=1.0)
    parser.add_argument("--activation_checkpointing", type=int, default=1)
    parser.add_argument("--bf16", type=int, default=1)
    parser.add_argument("--train_dir", type=str, default=os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    parser.add_argument("--model_dir", type=str, default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    return parser.parse_args()


def build_loader(args):
    dataset = InstructionDataset(args.train_dir, args.max_context_width)
    sampler = DistributedSampler(
        dataset,
        num_replicas=dist.get_world_size() // tsm.state.tp_size,
        rank=dist.get_rank() // tsm.state.tp_size,
        shuffle=True,
        seed=1234,
        drop_last=True,
    )
    return DataLoader(dataset, batch_size=args.train_batch_size, sampler=sampler, num_workers=2, pin_memory=True, drop_last=True)


def save_model(model, directory):
    """A full state dict gathered on rank 0, in Hugging Face layout for the inference team."""
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
        state = model.state_dict()
    if dist.get_rank() == 0:
        os.makedirs(directory, exist_ok=True)
        torch.save(state, os.path.join(directory, "pytorch_model.bin"))
    dist.barrier()


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO)
    dist.init_process_group("nccl")
    tsm.init()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)

    # Rank 0 holds the pretrained weights; transform converts them to the tensor-parallel layers.
    model = tsm.transform(load_base_model(args.model_name), load_state_dict_from_rank0=True)  # expect: SMP022 error
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)  # expect: SMP020 error
    model = FSDP(
        model,
        auto_wrap_policy=wrap_policy(),
        mixed_precision=mixed_precision(args.bf16),
        sharding_strategy=ShardingStrategy.HYBRID_SHARD,
        device_id=torch.cuda.current_device(),
        limit_all_gathers=True,
    )
    loader = build_loader(args)
    steps = args.epochs * len(loader)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)

    model.train()
    start = time.time()
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for step, batch in enumerate(loader):
            batch = {key: value.cuda(non_blocking=True) for key, value in batch.items()}
            loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)  # expect: SMP023 warning
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            if step % 10 == 0 and dist.get_rank() == 0:
                logger.info("epoch %d step %d loss %.4f ppl %.2f (%.1fs)", epoch, step, loss.item(), math.exp(loss.item()), time.time() - start)
    save_model(model, args.model_dir)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
