"""BERT pretraining (masked LM + next sentence) with SageMaker model parallelism.

The model is split into pipeline stages by the library; every stage of one replica must see
the same batch, so the shard files are assigned per data-parallel replica. One shard is read
at a time; the next one is loaded by a background process while the current one trains.
"""

import argparse
import json
import math
import os
import random
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import smdistributed.modelparallel.torch as smp
import torch
import torch.distributed as dist
import torch.nn.functional as F
from pretraining_data import PretrainingShard, WorkerInit, list_shards
from torch.utils.data import DataLoader, RandomSampler
from tqdm import tqdm
from transformers import BertConfig, BertForPreTraining
from utils import format_step, get_rank, get_world_size, is_main_process, log_main, mkdir, setup_logging, Throughput


def parse_arguments():
    parser = argparse.ArgumentParser()
    parser.add_argument("--input_dir", type=str, required=True, help="Folder of HDF5 training shards.")
    parser.add_argument("--eval_dir", type=str, default=None, help="Folder of HDF5 validation shards.")
    parser.add_argument("--output_dir", type=str, required=True, help="Where checkpoints are written.")
    parser.add_argument("--config_file", type=str, required=True, help="The BERT model config (json).")
    parser.add_argument("--init_checkpoint", type=str, default=None)
    parser.add_argument("--max_seq_length", type=int, default=512)
    parser.add_argument("--max_predictions_per_seq", type=int, default=80)
    parser.add_argument("--train_batch_size", type=int, default=32, help="Batch size per data-parallel replica.")
    parser.add_argument("--eval_batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--warmup_proportion", type=float, default=0.01)
    parser.add_argument("--max_steps", type=int, default=1000)
    parser.add_argument("--steps_per_checkpoint", type=int, default=100)
    parser.add_argument("--eval_interval", type=int, default=500)
    parser.add_argument("--log_freq", type=int, default=10)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--resume_from_checkpoint", action="store_true")
    parser.add_argument("--disable_progress_bar", action="store_true")
    parser.add_argument("--keep_checkpoints", type=int, default=3)
    return parser.parse_args()


# -- the loss --------------------------------------------------------------------------------------
def pretraining_loss(prediction_scores, seq_relationship_score, masked_lm_labels, next_sentence_labels):
    """Masked-LM cross entropy over the masked positions plus the next-sentence loss."""
    vocab_size = prediction_scores.size(-1)
    masked_lm_loss = F.cross_entropy(prediction_scores.view(-1, vocab_size), masked_lm_labels.view(-1), ignore_index=-1)
    next_sentence_loss = F.cross_entropy(seq_relationship_score.view(-1, 2), next_sentence_labels.view(-1), ignore_index=-1)
    return masked_lm_loss + next_sentence_loss


# -- step functions: the library splits each batch into microbatches and pipelines them ---------------
@smp.step
def train_step(model, input_ids, segment_ids, input_mask, masked_lm_labels, next_sentence_labels):
    prediction_scores, seq_relationship_score = model(
        input_ids=input_ids, token_type_ids=segment_ids, attention_mask=input_mask, return_dict=False
    )
    loss = pretraining_loss(prediction_scores, seq_relationship_score, masked_lm_labels, next_sentence_labels)
    model.backward(loss)
    return loss


@smp.step
def eval_step(model, input_ids, segment_ids, input_mask, masked_lm_labels, next_sentence_labels):
    prediction_scores, seq_relationship_score = model(
        input_ids=input_ids, token_type_ids=segment_ids, attention_mask=input_mask, return_dict=False
    )
    return pretraining_loss(prediction_scores, seq_relationship_score, masked_lm_labels, next_sentence_labels)


# -- data -----------------------------------------------------------------------------------------------
def create_shard_loader(data_file, max_predictions_per_seq, batch_size, worker_init):
    """Loads one shard and wraps it in a loader; runs in a background process."""
    shard = PretrainingShard(data_file, max_predictions_per_seq)
    loader = DataLoader(  # expect: SMP201 error
        shard,
        sampler=RandomSampler(shard),
        batch_size=batch_size,
        num_workers=4,
        worker_init_fn=worker_init,
        pin_memory=True,
    )
    return loader, data_file


def data_parallel_layout():
    """This replica's index and the number of replicas."""
    if smp.is_initialized():
        dp_size = smp.dp_size()
        dp_rank = smp.dp_rank()
    elif dist.is_initialized():
        dp_size = get_world_size()
        dp_rank = get_rank()
    else:
        dp_size = 1
        dp_rank = 0
    return dp_size, dp_rank


def evaluate(model, args, device):
    """Average loss over the validation shards (every replica evaluates all of them)."""
    if not args.eval_dir:
        return None
    eval_kwargs = {"batch_size": args.eval_batch_size, "num_workers": 2, "pin_memory": True}
    eval_kwargs.update({"shuffle": False})
    model.eval()
    total, batches = 0.0, 0
    with torch.no_grad():
        for eval_file in list_shards(args.eval_dir, marker="eval"):
            eval_shard = PretrainingShard(eval_file, args.max_predictions_per_seq)
            eval_loader = DataLoader(eval_shard, **eval_kwargs)  # expect: SMP201 error
            for batch in eval_loader:
                batch = [tensor.to(device) for tensor in batch]
                loss_mb = eval_step(model, *batch)
                total += loss_mb.reduce_mean().item()
                batches += 1
    model.train()
    return total / max(batches, 1)


# -- optimizer and schedule ------------------------------------------------------------------------------
def parameter_groups(model, weight_decay):
    no_decay = ("bias", "LayerNorm.bias", "LayerNorm.weight")
    decay, skip = [], []
    for name, parameter in model.named_parameters():
        (skip if any(part in name for part in no_decay) else decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": skip, "weight_decay": 0.0}]


def linear_warmup(warmup_steps, total_steps):
    def schedule(step):
        if step < warmup_steps:
            return float(step) / float(max(1, warmup_steps))
        remaining = max(0.0, float(total_steps - step) / float(max(1, total_steps - warmup_steps)))
        return remaining

    return schedule


# -- checkpoints -----------------------------------------------------------------------------------------
def checkpoint_path(output_dir, step):
    return os.path.join(output_dir, f"ckpt_{step}.pt")


def save_checkpoint(model, optimizer, lr_scheduler, args, global_step, files, f_id, epoch):
    """Every pipeline stage of the first replica writes its own partition (partial=True)."""
    if smp.dp_rank() != 0:
        return None
    path = checkpoint_path(args.output_dir, global_step)
    state = {
        "model": model.local_state_dict(),
        "optimizer": optimizer.local_state_dict(),
        "lr_scheduler": lr_scheduler.state_dict(),
        "files": [f_id] + files,
        "epoch": epoch,
        "global_step": global_step,
    }
    smp.save(state, path, partial=True)
    return path


def load_checkpoint(args):
    """The latest partial checkpoint of this stage, or None."""
    if not args.resume_from_checkpoint or not os.path.isdir(args.output_dir):
        return None
    steps = []
    for name in os.listdir(args.output_dir):
        if name.startswith("ckpt_") and name.endswith(f".pt_{smp.mp_rank()}"):
            steps.append(int(name[len("ckpt_") : -len(f".pt_{smp.mp_rank()}")]))
    if not steps:
        return None
    return smp.load(checkpoint_path(args.output_dir, max(steps)), partial=True)


def prune_checkpoints(paths, keep):
    while len(paths) > keep:
        old = paths.pop(0)
        stage_file = f"{old}_{smp.mp_rank()}"
        if os.path.exists(stage_file):
            os.remove(stage_file)


# -- setup -----------------------------------------------------------------------------------------------
def setup(args):
    smp.init()
    torch.cuda.set_device(smp.local_rank())
    device = torch.device("cuda", smp.local_rank())
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    setup_logging()
    if smp.local_rank() == 0:
        mkdir(args.output_dir)
    smp.barrier()
    log_main(
        "ranks: %d, pipeline stages: %d, data-parallel replicas: %d, microbatches: %d",
        smp.size(),
        smp.pp_size(),
        smp.dp_size(),
        smp.num_microbatches(),
    )
    return device


def build_model(args):
    with open(args.config_file, "r", encoding="utf-8") as handle:
        config = BertConfig(**json.load(handle))
    if config.vocab_size % 8 != 0:
        config.vocab_size += 8 - (config.vocab_size % 8)
    model = BertForPreTraining(config)
    model = smp.DistributedModel(model)
    optimizer = torch.optim.AdamW(parameter_groups(model, args.weight_decay), lr=args.learning_rate)
    optimizer = smp.DistributedOptimizer(optimizer)
    warmup = int(args.warmup_proportion * args.max_steps)
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup(warmup, args.max_steps))
    return model, optimizer, lr_scheduler


def restore(model, optimizer, lr_scheduler, checkpoint):
    if checkpoint is None:
        return 0
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    lr_scheduler.load_state_dict(checkpoint["lr_scheduler"])
    return checkpoint["global_step"]


def average_across_replicas(value):
    tensor = torch.tensor([value], dtype=torch.float32, device=torch.device("cuda"))
    dist.all_reduce(tensor, group=smp.get_dp_process_group())
    return tensor.item() / smp.dp_size()


# -- training -----------------------------------------------------------------------------------------
def main():
    args = parse_arguments()
    device = setup(args)
    worker_init = WorkerInit(args.seed)
    model, optimizer, lr_scheduler = build_model(args)
    checkpoint = load_checkpoint(args)
    global_step = restore(model, optimizer, lr_scheduler, checkpoint)

    pool = ProcessPoolExecutor(1)
    throughput = Throughput()
    recent_checkpoints = []
    running_loss, logged_steps = 0.0, 0
    epoch = 0 if checkpoint is None else checkpoint["epoch"]
    model.train()

    while global_step < args.max_steps:
        if checkpoint is None or epoch > 0:
            files = list_shards(args.input_dir)
            random.Random(args.seed + epoch).shuffle(files)
            f_start_id = 0
        else:
            f_start_id = checkpoint["files"][0]
            files = checkpoint["files"][1:]
        num_files = len(files)

        # The first shard of the epoch: one per data-parallel replica, so that both pipeline
        # stages of a replica read the same file.
        dp_size, dp_rank = data_parallel_layout()
        data_file = files[(f_start_id * dp_size + dp_rank) % num_files]
        first_shard = PretrainingShard(data_file, args.max_predictions_per_seq)
        train_dataloader = DataLoader(
            first_shard,
            sampler=RandomSampler(first_shard),
            batch_size=args.train_batch_size,
            num_workers=4,
            worker_init_fn=worker_init,
            pin_memory=True,
            drop_last=True,
        )

        for f_id in range(f_start_id + 1, len(files)):
            # Start loading the next shard while this one trains.
            next_file = files[(f_id * get_world_size() + get_rank()) % num_files]  # expect: SMP202 error
            dataset_future = pool.submit(
                create_shard_loader, next_file, args.max_predictions_per_seq, args.train_batch_size, worker_init
            )

            train_iter = (
                tqdm(train_dataloader, desc=f"shard {f_id}", disable=args.disable_progress_bar)
                if is_main_process()
                else train_dataloader
            )
            for step, batch in enumerate(train_iter):
                batch = [tensor.to(device) for tensor in batch]
                optimizer.zero_grad(set_to_none=True)
                loss_mb = train_step(model, *batch)
                loss = loss_mb.reduce_mean()
                optimizer.step()
                lr_scheduler.step()
                global_step += 1

                running_loss += loss.item()
                logged_steps += 1
                rate = throughput.update(args.train_batch_size * smp.dp_size())
                if global_step % args.log_freq == 0:
                    average = average_across_replicas(running_loss / logged_steps)
                    log_main(
                        "%s: loss %.4f, lr %.3e, %s samples/s",
                        format_step((epoch, global_step)),
                        average,
                        lr_scheduler.get_last_lr()[0],
                        f"{rate:.1f}" if rate else "-",
                    )
                    running_loss, logged_steps = 0.0, 0

                if global_step % args.eval_interval == 0:
                    eval_loss = evaluate(model, args, device)
                    if eval_loss is not None:
                        log_main("%s: validation loss %.4f", format_step((epoch, global_step)), eval_loss)

                if global_step % args.steps_per_checkpoint == 0 or global_step >= args.max_steps:
                    path = save_checkpoint(model, optimizer, lr_scheduler, args, global_step, files, f_id, epoch)
                    if path is not None:
                        recent_checkpoints.append(path)
                        prune_checkpoints(recent_checkpoints, args.keep_checkpoints)
                    smp.barrier()

                if global_step >= args.max_steps:
                    break

            del train_dataloader
            if global_step >= args.max_steps:
                break
            train_dataloader, data_file = dataset_future.result(timeout=None)

        epoch += 1
        checkpoint = None

    pool.shutdown(wait=False)
    final_eval = evaluate(model, args, device)
    if final_eval is not None:
        log_main("final validation loss %.4f (perplexity %.2f)", final_eval, math.exp(min(final_eval, 20.0)))
    smp.barrier()
    log_main("training finished after %d steps", global_step)


if __name__ == "__main__":
    started = time.time()
    main()
    if is_main_process():
        print(f"total time {time.time() - started:.0f}s")
