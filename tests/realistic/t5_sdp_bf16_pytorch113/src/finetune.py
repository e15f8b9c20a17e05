"""FLAN-T5 fine-tuning with SageMaker model parallelism: sharded data parallelism, bf16,
delayed parameter initialisation, activation checkpointing and offloading.

The job's configuration is the launcher's. Under the SageMaker launcher the library (1.12 and
later) initialises itself on import from that configuration, and the `smp.init(...)` call
below returns at once: its dict only matters when the script is run by hand.
"""

import argparse
import logging
import math
import os
import time

import smdistributed.modelparallel.torch as smp
import torch
from dataset import Pairs, make_loader
from torch.utils.data import DataLoader, DistributedSampler
from transformers import AutoConfig, T5ForConditionalGeneration

logger = logging.getLogger("finetune")

# For runs outside SageMaker (a single node, mpirun by hand); the launcher's values win there too.
LOCAL_CONFIG = {
    "ddp": True,
    "sharded_data_parallel_degree": 8,
    "microbatches": 3,
    "bf16": True,
    "offload_activation": True,
    "delayed_parameter_initialization": True,
}


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_name", type=str, default="google/flan-t5-base")
    parser.add_argument("--max_source_length", type=int, default=512)
    parser.add_argument("--max_target_length", type=int, default=128)
    parser.add_argument("--train_batch_size", type=int, default=4)
    parser.add_argument("--val_batch_size", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--weight_decay", type=float, default=0.0)
    parser.add_argument("--warmup_steps", type=int, default=100)
    parser.add_argument("--max_grad_norm", type=float, default=1.0)
    parser.add_argument("--checkpoint_freq", type=int, default=1000)
    parser.add_argument("--logging_freq", type=int, default=20)
    parser.add_argument("--activation_checkpointing", type=int, default=1)
    parser.add_argument("--resume_from", type=str, default="")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--train_dir", type=str, default=os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    parser.add_argument("--val_dir", type=str, default=os.environ.get("SM_CHANNEL_VAL", "/opt/ml/input/data/val"))
    parser.add_argument("--checkpoint_dir", type=str, default="/opt/ml/checkpoints")
    parser.add_argument("--model_dir", type=str, default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    return parser.parse_args()


def build_model(args):
    config = AutoConfig.from_pretrained(args.model_name)
    config.use_cache = False
    # Parameters are created when the wrapped model moves to the GPUs (delayed initialisation).
    with smp.model_creation(tensor_parallelism=False, dtype=torch.bfloat16):
        model = T5ForConditionalGeneration(config)
    return model


def checkpoint_blocks(model):
    """Recompute every encoder and decoder block in the backward pass."""
    module = model.get_module()
    for stack in (module.encoder, module.decoder):
        for block in stack.block:
            smp.set_activation_checkpointing(block)


def schedule(args, total_steps):
    def factor(step):
        if step < args.warmup_steps:
            return (step + 1) / args.warmup_steps
        progress = (step - args.warmup_steps) / max(1, total_steps - args.warmup_steps)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    return factor


@smp.step
def train_step(model, input_ids, attention_mask, labels):
    loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
    model.backward(loss)
    return loss


@smp.step
def eval_step(model, input_ids, attention_mask, labels):
    return model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss


def evaluate(model, loader, device):
    model.eval()
    losses = []
    with torch.no_grad():
        for input_ids, attention_mask, labels in loader:
            loss = eval_step(model, input_ids.to(device), attention_mask.to(device), labels.to(device))
            losses.append(loss.reduce_mean().item())
    model.train()
    return sum(losses) / max(len(losses), 1)


def save(model, optimizer, scheduler, step, args, partial=True):
    """A collective: every rank calls it and writes its own shard."""
    smp.save_checkpoint(
        args.checkpoint_dir,
        tag=f"step_{step}",
        partial=partial,
        model=model,
        optimizer=optimizer if partial else None,
        user_content={"step": step, "scheduler": scheduler.state_dict()},
    )


def latest_tag(directory):
    newest = os.path.join(directory, "newest")
    if not os.path.exists(newest):
        return None
    with open(newest, encoding="utf-8") as handle:
        return handle.read().strip()


def main():
    args = parse_args()
    smp.init(LOCAL_CONFIG)
    torch.cuda.set_device(smp.local_rank())
    device = torch.device("cuda", smp.local_rank())
    torch.manual_seed(args.seed)
    logging.basicConfig(level=logging.INFO if smp.rank() == 0 else logging.WARNING)

    model = smp.DistributedModel(build_model(args), trace_device="gpu")
    if args.activation_checkpointing:
        checkpoint_blocks(model)
    optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay))

    train_set = Pairs(args.train_dir, "train")
    sampler = DistributedSampler(train_set, num_replicas=smp.dp_size(), rank=smp.dp_rank(), shuffle=True, seed=args.seed, drop_last=True)
    train_loader = DataLoader(train_set, batch_size=args.train_batch_size, sampler=sampler, drop_last=True, pin_memory=True, num_workers=2)  # expect: SMP205 warning
    val_loader = make_loader(args.val_dir, "val", args.val_batch_size, smp.dp_rank(), smp.dp_size(), args.seed, False)
    total_steps = args.epochs * len(train_loader)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer.optimizer, schedule(args, total_steps))

    step = 0
    tag = latest_tag(args.checkpoint_dir)
    if tag is not None:
        # Resuming an interrupted run: the partial checkpoint of every rank, optimizer included.
        user_content = smp.resume_from_checkpoint(args.checkpoint_dir, tag=tag, partial=True)
        step = user_content["step"]
        scheduler.load_state_dict(user_content["scheduler"])
    elif args.resume_from:
        # Fine-tuning starts from a full model saved once; the optimizer starts fresh.
        smp.resume_from_checkpoint(args.resume_from, tag="fullmodel.pt", partial=False, load_optimizer=False)

    start = time.time()
    for epoch in range(args.epochs):
        train_loader.sampler.set_epoch(epoch)
        for input_ids, attention_mask, labels in train_loader:
            loss = train_step(model, input_ids.to(device), attention_mask.to(device), labels.to(device)).reduce_mean()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)  # expect: SMP601 error
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
            step += 1
            if step % args.logging_freq == 0:
                elapsed, start = time.time() - start, time.time()
                logger.info("epoch %d step %d loss %.4f lr %.2e (%.1fs)", epoch, step, loss.item(), scheduler.get_last_lr()[0], elapsed)
            if step % args.checkpoint_freq == 0:
                save(model, optimizer, scheduler, step, args)
        val_loss = evaluate(model, val_loader, device)
        logger.info("epoch %d validation loss %.4f", epoch, val_loss)

    # The model to deploy: one full checkpoint, written by the library from every rank's shard.
    save(model, optimizer, scheduler, step, args, partial=False)
    smp.barrier()


if __name__ == "__main__":
    main()
