"""GPT pre-training with SageMaker model parallelism: pipeline and tensor parallelism, fp16.

Checkpoints go to /opt/ml/checkpoints (synced to S3 by SageMaker); a restarted job resumes from
the newest one. The final model is written in full to /opt/ml/model.
"""

import argparse
import logging
import os
import time

import smdistributed.modelparallel.torch as smp
import torch
import torch.distributed as dist
import torch.nn.functional as F

from data import make_loader, shard_paths
from model import GPT

logger = logging.getLogger(__name__)
logging.basicConfig(level=logging.INFO)


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train-batch-size", type=int, default=8)
    parser.add_argument("--val-batch-size", type=int, default=8)
    parser.add_argument("--max-steps", type=int, default=1000)
    parser.add_argument("--save-every", type=int, default=500)
    parser.add_argument("--log-every", type=int, default=20)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--grad-clip", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--vocab-size", type=int, default=50257)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--sequence-length", type=int, default=1024)
    parser.add_argument("--activation-checkpointing", type=int, default=1)
    parser.add_argument("--activation-strategy", type=str, default="each")
    parser.add_argument("--checkpoint-dir", type=str, default="/opt/ml/checkpoints")
    parser.add_argument("--model-dir", type=str, default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    parser.add_argument("--train-dir", type=str, default=os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    parser.add_argument("--val-dir", type=str, default=os.environ.get("SM_CHANNEL_TEST", "/opt/ml/input/data/test"))
    parser.add_argument("--save-final-full-model", type=int, default=1)
    return parser.parse_args()


@smp.step
def train_step(model, input_ids, labels, step):
    model.module.current_step = step  # expect: SMP404 warning
    loss = model(input_ids, labels=labels)
    model.backward(loss)
    logger.debug("microbatch loss %.4f", loss.item())  # expect: SMP404 hint
    return loss


@smp.step
def eval_step(model, input_ids, labels):
    logits = model(input_ids)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), reduction="sum")
    tokens = labels.numel()
    return loss, tokens


def evaluate(model, loader, max_batches=50):
    """Mean validation loss per token, over every data-parallel replica."""
    model.eval()
    total = torch.zeros(1, device=torch.device("cuda", smp.local_rank()))
    count = torch.zeros(1, device=total.device)
    with torch.no_grad():
        for index, (input_ids, labels) in enumerate(loader):
            if index >= max_batches:
                break
            loss, tokens = eval_step(model, input_ids.cuda(), labels.cuda())
            total += sum(loss.outputs)
            count += sum(tokens.outputs)
    # Every pipeline stage holds the step's outputs: reduce over the data-parallel group only.
    torch.distributed.all_reduce(total, group=smp.get_dp_process_group())
    torch.distributed.all_reduce(count, group=smp.get_dp_process_group())
    model.train()
    return (total / count).item()


def throughput_report(step_times, tokens_per_step):
    """Tokens per second on this replica, averaged over the replicas."""
    rate = torch.tensor([tokens_per_step / (sum(step_times) / len(step_times))], device="cuda")
    dist.all_reduce(rate)  # expect: SMP504 error
    rate /= smp.dp_size()
    return rate.item()


def save_partial(model, optimizer, lr_scheduler, total_steps, args):
    user_content = {"total_steps": total_steps, "lr_scheduler": lr_scheduler.state_dict(), "args": vars(args)}
    smp.save_checkpoint(
        args.checkpoint_dir,
        tag=f"total_steps{total_steps}",
        partial=True,
        model=model,
        optimizer=optimizer,
        user_content=user_content,
        num_kept_partial_checkpoints=3,
    )


def save_best(model, total_steps, args):
    """Keeps the best model by validation loss next to the regular checkpoints (model only)."""
    smp.save_checkpoint(os.path.join(args.checkpoint_dir, "best"), tag=f"best_{total_steps}", partial=True, model=model)


def save_optimizer_snapshot(optimizer, total_steps, args):
    """A small optimizer-only snapshot for debugging divergence, written by one replica."""
    if smp.rdp_rank() == 0:
        state = optimizer.local_state_dict()  # expect: SMP307 error
        smp.save({"optimizer": state, "step": total_steps}, os.path.join(args.checkpoint_dir, "opt_debug"), partial=True)


def build_model(args):
    with smp.model_creation(tensor_parallelism=True, dtype=torch.float16):
        net = GPT(args.vocab_size, args.hidden, args.layers, args.heads, args.sequence_length)
    return net


def build_optimizer(model, args):
    decay, no_decay = [], []
    for name, parameter in model.get_module().named_parameters():
        (no_decay if name.endswith("bias") or "ln" in name else decay).append(parameter)
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95))


def main():
    args = parse_args()
    smp.init()
    torch.cuda.set_device(smp.local_rank())
    torch.manual_seed(args.seed + smp.tp_rank())

    net = build_model(args)
    model = smp.DistributedModel(net, trace_device="gpu")
    torch.manual_seed(args.seed)

    if args.activation_checkpointing:
        smp.set_activation_checkpointing(model.get_module().blocks, strategy=args.activation_strategy)

    base_optimizer = build_optimizer(model, args)
    optimizer = smp.DistributedOptimizer(
        base_optimizer,
        static_loss_scale=None,
        dynamic_loss_scale=True,
        dynamic_loss_args={"scale_window": 1000, "min_scale": 1, "delayed_shift": 2},
    )
    lr_scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer.optimizer, max_lr=args.lr, total_steps=args.max_steps)

    # Resume after wrapping the model and the optimizer, as the library asks.
    total_steps = 0
    if os.path.exists(os.path.join(args.checkpoint_dir, "newest")):
        user_content = smp.resume_from_checkpoint(args.checkpoint_dir, tag=None, partial=True)
        total_steps = user_content["total_steps"]
        lr_scheduler.load_state_dict(user_content["lr_scheduler"])

    train_files = shard_paths(args.train_dir)
    val_loader = make_loader(shard_paths(args.val_dir)[0], args.sequence_length, args.val_batch_size,
                             smp.dp_rank(), smp.dp_size(), args.seed)
    best_loss, best_step = float("inf"), 0
    step_times = []
    model.train()

    while total_steps < args.max_steps:
        for file_index, path in enumerate(train_files):
            loader = make_loader(path, args.sequence_length, args.train_batch_size, smp.dp_rank(), smp.dp_size(),
                                 args.seed + file_index)
            for input_ids, labels in loader:
                start = time.time()
                optimizer.zero_grad(set_to_none=True)
                loss_mb = train_step(model, input_ids.cuda(), labels.cuda(), total_steps)
                loss = loss_mb.reduce_mean()
                optimizer.clip_master_grads(args.grad_clip)
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)  # expect: SMP604 error
                optimizer.step()
                if not optimizer.overflow:
                    lr_scheduler.step()
                total_steps += 1
                step_times.append(time.time() - start)

                if total_steps % args.log_every == 0 and smp.rank() == 0:
                    logger.info("step %d loss %.4f lr %.2e", total_steps, loss.item(), lr_scheduler.get_last_lr()[0])
                if total_steps % args.save_every == 0:
                    save_partial(model, optimizer, lr_scheduler, total_steps, args)
                    save_optimizer_snapshot(optimizer, total_steps, args)
                    val_loss = evaluate(model, val_loader)
                    rate = throughput_report(step_times[-args.log_every :], args.train_batch_size * args.sequence_length)
                    if smp.rank() == 0:
                        logger.info("step %d val loss %.4f, %.0f tokens/s", total_steps, val_loss, rate)
                    if val_loss < best_loss:
                        best_loss, best_step = val_loss, total_steps
                        save_best(model, total_steps, args)
                if total_steps >= args.max_steps:
                    break
            # A checkpoint at every shard boundary, so a restarted job can skip finished shards.
            smp.save_checkpoint(  # expect: SMP304 error
                os.path.join(args.checkpoint_dir, "shards"),
                tag=file_index,
                partial=True,
                model=model,
                optimizer=base_optimizer,  # expect: SMP305 error
            )
            if total_steps >= args.max_steps:
                break

    if args.save_final_full_model:
        smp.save_checkpoint(args.model_dir, tag="fullmodel.pt", partial=False, model=model,
                            user_content={"total_steps": total_steps})
    smp.barrier()
    if smp.rank() == 0:
        logger.info("training finished after %d steps, best validation loss %.4f at step %d", total_steps, best_loss,
                    best_step)


if __name__ == "__main__":
    main()
