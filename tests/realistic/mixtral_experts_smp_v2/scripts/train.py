"""Mixtral pre-training on SMP v2: SMP's MoE layers through tsm.transform, experts split by
expert_parallel_degree, FSDP hybrid sharding in bf16, checkpointed decoder layers."""

import argparse
import functools
import math
import os
import time

import torch
import torch.distributed as dist
import torch.sagemaker as tsm
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    apply_activation_checkpointing,
    checkpoint_wrapper,
)
from torch.distributed.fsdp import BackwardPrefetch, MixedPrecision, ShardingStrategy
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
from torch.sagemaker.moe.moe_config import MoEConfig
from torch.sagemaker.tensor_parallel.transformer import TransformerLayer
from torch.utils.data import DataLoader, DistributedSampler
from transformers import AutoModelForCausalLM, MixtralConfig

import checkpointing
from data import TokenShards


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden_width", type=int, default=4096)
    parser.add_argument("--num_layers", type=int, default=32)
    parser.add_argument("--num_heads", type=int, default=32)
    parser.add_argument("--num_key_value_heads", type=int, default=8)
    parser.add_argument("--intermediate_size", type=int, default=14336)
    parser.add_argument("--num_local_experts", type=int, default=8)
    parser.add_argument("--max_context_width", type=int, default=2048)
    parser.add_argument("--train_batch_size", type=int, default=1)
    parser.add_argument("--max_steps", type=int, default=1000)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--checkpoint_freq", type=int, default=500)
    parser.add_argument("--checkpoint_dir", type=str, default="/opt/ml/checkpoints")
    parser.add_argument("--distributed_backend", type=str, default="nccl", choices=["smddp", "nccl"])
    parser.add_argument("--moe_load_balancing", type=str, default="sinkhorn")
    parser.add_argument("--activation_checkpointing", type=int, default=1)
    parser.add_argument("--train_dir", type=str, default=os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    return parser.parse_args()


def build_model(args):
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
    moe = MoEConfig(
        smp_moe=True,
        random_seed=12345,
        moe_load_balancing=args.moe_load_balancing,
        global_token_shuffle=False,
        moe_all_to_all_dispatcher=True,
    )
    return tsm.transform(model, config=moe)


def lr_at(step, args):
    warmup = max(1, args.max_steps // 100)
    if step < warmup:
        return args.lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, args.max_steps - warmup)
    return args.lr * 0.5 * (1 + math.cos(math.pi * progress))


def main():
    args = parse_args()
    if args.distributed_backend == "smddp":
        import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401
    dist.init_process_group(args.distributed_backend)
    tsm.init()
    rank = dist.get_rank()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)

    model = build_model(args)
    model = FSDP(
        model,
        auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={TransformerLayer}),
        mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16, buffer_dtype=torch.float32),
        sharding_strategy=ShardingStrategy.HYBRID_SHARD,
        backward_prefetch=BackwardPrefetch.BACKWARD_PRE,
        limit_all_gathers=True,
        device_id=torch.cuda.current_device(),
    )
    if args.activation_checkpointing:
        wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
        apply_activation_checkpointing(
            model, checkpoint_wrapper_fn=wrapper, check_fn=lambda module: isinstance(module, TransformerLayer)
        )

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    step = 0
    resume = checkpointing.latest(args.checkpoint_dir)
    if resume is not None:
        step = checkpointing.load(model, optimizer, resume)

    dataset = TokenShards(args.train_dir, args.max_context_width)
    sampler = DistributedSampler(dataset, num_replicas=dist.get_world_size(), rank=rank, seed=step)
    loader = DataLoader(dataset, batch_size=args.train_batch_size, sampler=sampler, num_workers=2, drop_last=True)

    model.train()
    started = time.time()
    while step < args.max_steps:
        for batch in loader:
            input_ids = batch.cuda(non_blocking=True)
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, args)
            loss = model(input_ids=input_ids, labels=input_ids).loss
            loss.backward()
            model.clip_grad_norm_(1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if rank == 0 and step % 10 == 0:
                print(f"step {step} loss {loss.item():.4f} {(time.time() - started) / step:.2f}s/step")
            if step % args.checkpoint_freq == 0:
                checkpointing.save(model, optimizer, step, args.checkpoint_dir)
            if step >= args.max_steps:
                break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
