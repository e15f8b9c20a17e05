"""Fine-tune a GPT-2 style decoder with tensor and pipeline parallelism in fp16.

Launched by ../launch.py on two ml.p4d.24xlarge instances (16 processes). Every process
reads the launcher's modelparallel parameters; the script only asks the library for its
ranks and sizes after smp.init().
"""

import argparse
import math
import os
import time

import numpy as np
import smdistributed.modelparallel.torch as smp
import torch
import torch.nn.functional as F
from smdistributed.modelparallel.torch.nn import FusedLayerNorm  # noqa: F401  (used by the TP layers)
from torch.nn.parallel.distributed import DistributedDataParallel  # noqa: F401  (kept for unwrapping helpers)
from transformers import GPT2Config, GPT2LMHeadModel

import data


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max_steps", type=int, default=1000)
    parser.add_argument("--train_batch_size", type=int, default=4)
    parser.add_argument("--val_batch_size", type=int, default=4)
    parser.add_argument("--val_batches", type=int, default=20)
    parser.add_argument("--seq_length", type=int, default=512)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--min_lr", type=float, default=1e-5)
    parser.add_argument("--warmup_steps", type=int, default=0)
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--grad_clip", type=float, default=1.0)
    parser.add_argument("--num_layers", type=int, default=12)
    parser.add_argument("--hidden_width", type=int, default=768)
    parser.add_argument("--num_heads", type=int, default=12)
    parser.add_argument("--vocab_size", type=int, default=50257)
    parser.add_argument("--fp16", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--logging_freq", type=int, default=10)
    parser.add_argument("--checkpoint_freq", type=int, default=1000)
    parser.add_argument("--checkpoint_dir", type=str, default="/opt/ml/checkpoints")
    parser.add_argument("--train_dir", type=str, default=os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    parser.add_argument("--model_dir", type=str, default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    return parser.parse_args()


class AnnealingLR:
    """Linear warm-up then cosine decay, written into the optimizer's param_groups directly.

    It takes the smp.DistributedOptimizer itself: it only touches ``param_groups``, which the
    fp16 wrapper forwards to the optimizer inside it.
    """

    def __init__(self, optimizer, max_lr, min_lr, warmup_steps, total_steps):
        self.optimizer = optimizer
        self.max_lr = max_lr
        self.min_lr = min_lr
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.num_steps = 0
        self.step()

    def get_lr(self):
        if self.warmup_steps > 0 and self.num_steps <= self.warmup_steps:
            return self.max_lr * self.num_steps / self.warmup_steps
        progress = (self.num_steps - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps)
        cosine = 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
        return self.min_lr + (self.max_lr - self.min_lr) * cosine

    def step(self):
        self.num_steps += 1
        lr = self.get_lr()
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def state_dict(self):
        return {"num_steps": self.num_steps}

    def load_state_dict(self, state):
        self.num_steps = state["num_steps"]


def param_groups_by_weight_decay(module, weight_decay):
    """Biases and norms get no weight decay."""
    decay, no_decay = [], []
    for name, param in module.named_parameters():
        if not param.requires_grad:
            continue
        if name.endswith("bias") or "ln" in name or "norm" in name:
            no_decay.append(param)
        else:
            decay.append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


@smp.step
def train_step(model, input_ids, labels):
    logits = model(input_ids=input_ids)["logits"]
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))
    model.backward(loss)
    return loss


@smp.step
def eval_step(model, input_ids, labels):
    logits = model(input_ids=input_ids)["logits"]
    return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))


def evaluate(model, loader, device, max_batches):
    model.eval()
    losses = []
    with torch.no_grad():
        for index, (input_ids, labels) in enumerate(loader):
            if index >= max_batches:
                break
            loss = eval_step(model, input_ids.to(device), labels.to(device))
            losses.append(loss.reduce_mean().item())
    model.train()
    return float(np.mean(losses)) if losses else float("nan")


def save(model, optimizer, scheduler, step, args):
    """A partial checkpoint: every rank writes its own shard, so every rank calls this."""
    user_content = {"step": step, "scheduler": scheduler.state_dict()}
    smp.save_checkpoint(
        args.checkpoint_dir,
        tag=f"step_{step}",
        partial=True,
        model=model,
        optimizer=optimizer,
        user_content=user_content,
        num_kept_partial_checkpoints=2,
    )


def latest_checkpoint(folder):
    newest = os.path.join(folder, "newest")
    return os.path.exists(newest)


def build_model(args):
    config = GPT2Config(
        vocab_size=args.vocab_size,
        n_positions=args.seq_length,
        n_embd=args.hidden_width,
        n_layer=args.num_layers,
        n_head=args.num_heads,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        use_cache=False,
    )
    dtype = torch.float16 if args.fp16 else torch.get_default_dtype()
    with smp.model_creation(tensor_parallelism=smp.tp_size() > 1, dtype=dtype):
        model = GPT2LMHeadModel(config)
    return model


def log(message):
    if smp.rank() == 0:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def train(args):
    smp.init()
    torch.cuda.set_device(smp.local_rank())
    device = torch.device("cuda")
    # Same data order on the tensor-parallel peers of one replica, different slices of
    # distributed weights on them.
    torch.manual_seed(args.seed + smp.tp_rank())
    np.random.seed(args.seed)

    model = build_model(args)
    log(f"{sum(p.numel() for p in model.parameters()) / 1e9:.2f}B parameters before partitioning")
    model = smp.DistributedModel(model, trace_device="gpu")

    optimizer = torch.optim.AdamW(
        param_groups_by_weight_decay(model.get_module(), args.weight_decay), lr=args.lr, betas=(0.9, 0.95)
    )
    optimizer = smp.DistributedOptimizer(
        optimizer,
        static_loss_scale=None,
        dynamic_loss_scale=True,
        dynamic_loss_args={"scale_window": 1000, "min_scale": 1, "delayed_shift": 2},
    )
    scheduler = AnnealingLR(optimizer, args.lr, args.min_lr, args.warmup_steps, args.max_steps)
    # Short linear ramp of the first epoch, stacked on the cosine schedule above.
    ramp = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 50))  # expect: SMP113 error

    step = 0
    if latest_checkpoint(args.checkpoint_dir):
        user_content = smp.resume_from_checkpoint(args.checkpoint_dir, tag=None, partial=True)
        step = user_content["step"]
        scheduler.load_state_dict(user_content["scheduler"])
        log(f"resumed from step {step}")

    shards = data.shard_paths(args.train_dir)
    if not shards:
        raise ValueError(f"no token shards in {args.train_dir}")
    train_loader = data.make_loader(shards[0], args.seq_length, args.train_batch_size, smp.dp_rank(), smp.dp_size(), args.seed)
    val_set = data.TokenShard(shards[-1], args.seq_length)
    val_loader = torch.utils.data.DataLoader(val_set, batch_size=args.val_batch_size, num_workers=2, drop_last=True)  # expect: SMP205 warning

    model.train()
    start = time.time()
    epoch = 0
    while step < args.max_steps:
        train_loader.sampler.set_epoch(epoch)
        for input_ids, labels in train_loader:
            input_ids, labels = input_ids.to(device), labels.to(device)
            optimizer.zero_grad(set_to_none=True)
            loss = train_step(model, input_ids, labels)
            if args.fp16:
                optimizer.clip_master_grads(args.grad_clip)
            optimizer.step()
            if not (args.fp16 and optimizer.overflow):
                scheduler.step()
                ramp.step()
            step += 1

            if step % args.logging_freq == 0:
                mean_loss = loss.reduce_mean().item()
                throughput = args.logging_freq * args.train_batch_size * smp.dp_size() / (time.time() - start)
                log(f"step {step} loss {mean_loss:.4f} samples/s {throughput:.1f}")
                start = time.time()
            if step % args.checkpoint_freq == 0:
                save(model, optimizer, scheduler, step, args)
                val_loss = evaluate(model, val_loader, device, args.val_batches)
                log(f"step {step} validation loss {val_loss:.4f} perplexity {math.exp(min(val_loss, 20)):.2f}")
            if step >= args.max_steps:
                break
        epoch += 1

    save(model, optimizer, scheduler, step, args)
    smp.barrier()
    log("done")


if __name__ == "__main__":
    train(parse_args())
