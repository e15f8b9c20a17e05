"""Pipeline-parallel language model training with the SageMaker model parallelism library (v1).

The launcher sets the pipeline degree, the microbatches and data parallelism; this script
builds the model, wraps it, and trains with one ``smp.step`` per batch.
"""

import argparse
import os
import time

import smdistributed.modelparallel.torch as smp
import torch
import torch.nn.functional as F

from data import make_loader
from model import LanguageModel, parameter_count, perplexity


def parse_args():
    parser = argparse.ArgumentParser(description="Pipeline-parallel language model")
    parser.add_argument("--train_batch_size", type=int, default=32)
    parser.add_argument("--val_batch_size", type=int, default=32)
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=50304)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--warmup_steps", type=int, default=500)
    parser.add_argument("--max_steps", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--log_freq", type=int, default=20)
    parser.add_argument("--val_freq", type=int, default=1000)
    parser.add_argument("--val_batches", type=int, default=50)
    parser.add_argument("--checkpoint_freq", type=int, default=2000)
    parser.add_argument("--checkpoint_dir", type=str, default="/opt/ml/checkpoints")
    parser.add_argument("--train_dir", type=str, default=os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    parser.add_argument("--val_dir", type=str, default=os.environ.get("SM_CHANNEL_VALIDATION", "/opt/ml/input/data/validation"))
    parser.add_argument("--model_dir", type=str, default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    return parser.parse_args()


def lr_lambda(args):
    def schedule(step: int) -> float:
        if step < args.warmup_steps:
            return (step + 1) / args.warmup_steps
        progress = (step - args.warmup_steps) / max(1, args.max_steps - args.warmup_steps)
        return max(0.1, 1.0 - progress)

    return schedule


@smp.step
def train_step(model, tokens, targets):
    logits = model(tokens)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
    model.backward(loss)
    return loss


@smp.step
def val_step(model, tokens, targets):
    logits = model(tokens)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def evaluate(model, loader, batches: int) -> float:
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for index, (tokens, targets) in enumerate(loader):
            if index >= batches:
                break
            tokens, targets = tokens.cuda(non_blocking=True), targets.cuda(non_blocking=True)
            losses = val_step(model, tokens, targets)
            total += losses.reduce_mean().item()
            count += 1
    model.train()
    # Every replica evaluated its own part: average over the data-parallel group.
    average = torch.tensor([total / max(count, 1)], device=torch.device("cuda"))
    torch.distributed.all_reduce(average, group=smp.get_dp_process_group())
    return average.item() / smp.dp_size()


def save(model, optimizer, scheduler, step: int, folder: str) -> None:
    """Every rank takes part: the library writes each partition's part."""
    smp.save_checkpoint(
        folder,
        tag=f"step_{step}",
        partial=True,
        model=model,
        optimizer=optimizer,
        user_content={"step": step, "scheduler": scheduler.state_dict()},
    )


def resume(model, optimizer, scheduler, folder: str) -> int:
    if not os.path.isfile(os.path.join(folder, "newest")):
        return 0
    user_content = smp.resume_from_checkpoint(folder, partial=True)
    scheduler.load_state_dict(user_content["scheduler"])
    return int(user_content["step"])


def main():
    args = parse_args()
    smp.init()
    torch.cuda.set_device(smp.local_rank())
    torch.manual_seed(args.seed)

    model = LanguageModel(args.vocab, args.hidden, args.layers, args.heads, args.context)
    if smp.rank() == 0:
        print(f"model with {parameter_count(model)} parameters, {smp.pp_size()} pipeline stages, {smp.dp_size()} replicas")
    model = smp.DistributedModel(model)

    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if name.endswith("bias") or "norm" in name else decay).append(parameter)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
        betas=(0.9, 0.95),
    )
    optimizer = smp.DistributedOptimizer(optimizer)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(args))

    train_loader = make_loader(args.train_dir, args.context, args.train_batch_size, args.seed, shuffle=True)
    val_loader = make_loader(args.val_dir, args.context, args.val_batch_size, args.seed, shuffle=False)

    step = resume(model, optimizer, scheduler, args.checkpoint_dir)
    model.train()
    start = time.time()
    epoch = 0
    while step < args.max_steps:
        train_loader.sampler.set_epoch(epoch)
        for tokens, targets in train_loader:
            tokens, targets = tokens.cuda(non_blocking=True), targets.cuda(non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            losses = train_step(model, tokens, targets)
            loss = losses.reduce_mean()
            optimizer.step()
            scheduler.step()
            step += 1

            if step % args.log_freq == 0 and smp.rank() == 0:
                elapsed = time.time() - start
                print(f"step {step}: loss {loss.item():.4f}, lr {scheduler.get_last_lr()[0]:.2e}, {elapsed / args.log_freq:.2f}s/step")
                start = time.time()
            if step % args.val_freq == 0:
                val_loss = evaluate(model, val_loader, args.val_batches)
                if smp.rank() == 0:
                    print(f"step {step}: validation loss {val_loss:.4f}, perplexity {perplexity(val_loss):.1f}")
            if step % args.checkpoint_freq == 0:
                save(model, optimizer, scheduler, step, args.checkpoint_dir)
            if step >= args.max_steps:
                break
        epoch += 1

    save(model, optimizer, scheduler, step, args.checkpoint_dir)
    # The whole model, gathered by the library, for deployment.
    smp.save_checkpoint(args.model_dir, tag="final", partial=False, model=model)


if __name__ == "__main__":
    main()
