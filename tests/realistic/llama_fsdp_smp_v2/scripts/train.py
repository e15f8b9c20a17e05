"""Llama pre-training with SMP v2: FSDP with hybrid sharding, tensor parallelism through
torch.sagemaker.transform, activation checkpointing and offloading, bf16.

Runs under torchrun (the launcher's `torch_distributed`); every process finds its GPU from
LOCAL_RANK, which torchrun sets.
"""

import argparse
import functools
import logging
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
from torch.distributed.fsdp import BackwardPrefetch, MixedPrecision, ShardingStrategy, StateDictType
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
from torch.sagemaker.delayed_param import DelayedParamIniter
from torch.sagemaker.grad_norm import clip_grad_norm_
from transformers import AutoConfig, AutoModelForCausalLM
from transformers.models.llama.modeling_llama import LlamaDecoderLayer

from data import create_loader, global_rank

logger = logging.getLogger(__name__)

CONFIGS = {
    "llama-7b": {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32},
    "llama-13b": {"hidden_size": 5120, "intermediate_size": 13824, "num_hidden_layers": 40, "num_attention_heads": 40},
    "llama-tiny": {"hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 4, "num_attention_heads": 8},
}


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_type", type=str, default="llama_v2")
    parser.add_argument("--model_config", type=str, default="llama-tiny")
    parser.add_argument("--max_context_width", type=int, default=2048)
    parser.add_argument("--train_batch_size", type=int, default=2)
    parser.add_argument("--val_batch_size", type=int, default=4)
    parser.add_argument("--max_steps", type=int, default=100)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--weight_decay", type=float, default=0.1)
    parser.add_argument("--beta1", type=float, default=0.9)
    parser.add_argument("--beta2", type=float, default=0.95)
    parser.add_argument("--warmup", type=float, default=0.01)
    parser.add_argument("--grad_clip", type=float, default=1.0)
    parser.add_argument("--checkpoint_freq", type=int, default=1000)
    parser.add_argument("--validation_freq", type=int, default=200)
    parser.add_argument("--validation_batches", type=int, default=10)
    parser.add_argument("--bf16", type=int, default=1)
    parser.add_argument("--activation_checkpointing", type=int, default=1)
    parser.add_argument("--offload_activations", type=int, default=0)
    parser.add_argument("--delayed_param", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--train_dir", type=str, default=os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    parser.add_argument("--val_dir", type=str, default=os.environ.get("SM_CHANNEL_VAL", "/opt/ml/input/data/val"))
    parser.add_argument("--checkpoint_dir", type=str, default="/opt/ml/checkpoints")
    parser.add_argument("--model_dir", type=str, default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    return parser.parse_args()


def build_config(args):
    config = AutoConfig.from_pretrained("meta-llama/Llama-2-7b-hf")
    for key, value in CONFIGS[args.model_config].items():
        setattr(config, key, value)
    config.max_position_embeddings = args.max_context_width
    config.use_cache = False
    return config


def create_model(args, config):
    """Build on the meta device when parameters are initialised late, then transform for SMP v2."""
    if args.delayed_param:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    else:
        model = AutoModelForCausalLM.from_config(config)
    # tsm.transform swaps Hugging Face Llama layers for SMP v2's tensor-parallel ones.
    return tsm.transform(model, config=config)


def wrap_model(args, model, device):
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    mixed = MixedPrecision(param_dtype=dtype, reduce_dtype=torch.float32, buffer_dtype=dtype)
    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})  # expect: SMP026 error
    initer = None
    if args.delayed_param:
        initer = DelayedParamIniter(model)
    with initer.validate_params_and_buffers_inited() if initer is not None else _nothing():
        model = FSDP(
            model,
            auto_wrap_policy=policy,
            mixed_precision=mixed,
            sharding_strategy=ShardingStrategy.HYBRID_SHARD,
            backward_prefetch=BackwardPrefetch.BACKWARD_PRE,
            device_id=device,
            param_init_fn=initer.get_param_init_fn() if initer is not None else None,
            post_param_init_fn=initer.get_post_param_init_fn() if initer is not None else None,
            sync_module_states=initer is not None,
            limit_all_gathers=True,
            use_orig_params=False,
        )
    if args.activation_checkpointing:
        wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
        apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper, check_fn=lambda module: isinstance(module, LlamaDecoderLayer))
    if args.offload_activations:
        from torch.sagemaker.offload import ActivationOffloading

        model = ActivationOffloading(model)
    return model


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def create_optimizer(args, model):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (no_decay if param.ndim < 2 or "norm" in name or name.endswith("bias") else decay).append(param)
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(args.beta1, args.beta2))


def lr_lambda(args):
    warmup_steps = max(1, int(args.warmup * args.max_steps))

    def schedule(step):
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, args.max_steps - warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))

    return schedule


def train_step(model, optimizer, batch, device, grad_clip):
    input_ids = batch["input_ids"].to(device, non_blocking=True)
    labels = batch["labels"].to(device, non_blocking=True)
    loss = model(input_ids=input_ids, labels=labels).loss
    loss.backward()
    grad_norm = clip_grad_norm_(model, grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach(), grad_norm


@torch.no_grad()
def evaluate(model, loader, device, batches):
    model.eval()
    losses = []
    for index, batch in enumerate(loader):
        if index >= batches:
            break
        input_ids = batch["input_ids"].to(device)
        labels = batch["labels"].to(device)
        losses.append(model(input_ids=input_ids, labels=labels).loss.detach())
    model.train()
    total = torch.stack(losses).mean() if losses else torch.zeros((), device=device)
    dist.all_reduce(total, op=dist.ReduceOp.AVG)
    return total.item(), math.exp(min(total.item(), 20.0))


def save_checkpoint(model, optimizer, scheduler, step, directory):
    """Sharded state: every rank writes its own part, so every rank calls this."""
    path = os.path.join(directory, f"step_{step}")
    os.makedirs(path, exist_ok=True)
    with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
        state = {"model": model.state_dict(), "optimizer": FSDP.optim_state_dict(model, optimizer)}
        torch.save(state, os.path.join(path, f"shard_{global_rank()}.pt"))
    if global_rank() == 0:
        torch.save({"scheduler": scheduler.state_dict(), "step": step}, os.path.join(path, "meta.pt"))
    dist.barrier()


def load_checkpoint(model, optimizer, scheduler, directory):
    steps = sorted(int(name.split("_")[1]) for name in os.listdir(directory) if name.startswith("step_")) if os.path.isdir(directory) else []
    if not steps:
        return 0
    path = os.path.join(directory, f"step_{steps[-1]}")
    with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
        state = torch.load(os.path.join(path, f"shard_{global_rank()}.pt"), map_location="cpu")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(FSDP.optim_state_dict_to_load(model, optimizer, state["optimizer"]))
    meta = torch.load(os.path.join(path, "meta.pt"), map_location="cpu")
    scheduler.load_state_dict(meta["scheduler"])
    return meta["step"]


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    dist.init_process_group("nccl")
    tsm.init()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    torch.manual_seed(args.seed)

    config = build_config(args)
    model = wrap_model(args, create_model(args, config), device)
    optimizer = create_optimizer(args, model)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(args))

    # With hybrid sharding and tensor parallelism the data-parallel group is smaller than the world.
    dp_rank, dp_size = tsm.state.dp_rank, tsm.state.dp_size
    train_loader = create_loader(args.train_dir, args.max_context_width, args.train_batch_size, dp_rank, dp_size, args.seed)
    val_loader = create_loader(args.val_dir, args.max_context_width, args.val_batch_size, dp_rank, dp_size, args.seed, shuffle=False, max_blocks=2000)

    step = load_checkpoint(model, optimizer, scheduler, args.checkpoint_dir)
    epoch = 0
    start = time.time()
    while step < args.max_steps:
        train_loader.sampler.set_epoch(epoch)
        for batch in train_loader:
            loss, grad_norm = train_step(model, optimizer, batch, device, args.grad_clip)
            scheduler.step()
            step += 1
            if step % 10 == 0 and global_rank() == 0:
                elapsed, start = time.time() - start, time.time()
                logger.info("step %d loss %.4f grad norm %.3f lr %.2e (%.2fs/10 steps)", step, loss.item(), grad_norm, scheduler.get_last_lr()[0], elapsed)
            if step % args.validation_freq == 0:
                val_loss, ppl = evaluate(model, val_loader, device, args.validation_batches)
                if global_rank() == 0:
                    logger.info("step %d validation loss %.4f perplexity %.2f", step, val_loss, ppl)
            if step % args.checkpoint_freq == 0:
                save_checkpoint(model, optimizer, scheduler, step, args.checkpoint_dir)
            if step >= args.max_steps:
                break
        epoch += 1

    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
        state = model.state_dict()
    if global_rank() == 0:
        os.makedirs(args.model_dir, exist_ok=True)
        torch.save(state, os.path.join(args.model_dir, "model.pt"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
