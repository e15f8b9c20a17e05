"""BERT-large pre-training, with or without the SageMaker model parallelism library.

``--smp 1`` runs the model as a pipeline over two partitions (the launcher's configuration);
``--smp 0`` runs the same script as plain single-GPU PyTorch, which is how it is debugged on
a workstation. fp16 uses apex amp in both modes.
"""

import argparse
import logging
import math
import os
import random
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import smdistributed.modelparallel.torch as smp
import torch
from apex import amp

import bert_model
import data_utils
from schedulers import PolyWarmUpScheduler

logging.basicConfig(format="%(asctime)s %(levelname)s %(message)s", level=logging.INFO, stream=sys.stdout)
logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# arguments and set-up
# ---------------------------------------------------------------------------------------------
def parse_arguments():
    parser = argparse.ArgumentParser()
    parser.add_argument("--input_dir", type=str, default=os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    parser.add_argument("--output_dir", type=str, default="/opt/ml/checkpoints")
    parser.add_argument("--config_file", type=str, default="bert_config.json")
    parser.add_argument("--init_checkpoint", type=str, default=None)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--train_batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=6e-3)
    parser.add_argument("--num_train_epochs", type=int, default=3)
    parser.add_argument("--max_steps", type=int, default=1000)
    parser.add_argument("--steps_this_run", type=int, default=-1)
    parser.add_argument("--warmup_proportion", type=float, default=0.01)
    parser.add_argument("--local_rank", type=int, default=os.getenv("LOCAL_RANK", -1))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--fp16", type=int, default=0)
    parser.add_argument("--loss_scale", type=float, default=0.0)
    parser.add_argument("--log_freq", type=int, default=50)
    parser.add_argument("--checkpoint_activations", type=int, default=0)
    parser.add_argument("--resume_from_checkpoint", type=int, default=0)
    parser.add_argument("--resume_step", type=int, default=-1)
    parser.add_argument("--num_steps_per_checkpoint", type=int, default=100)
    parser.add_argument("--skip_checkpoint", type=int, default=0)
    parser.add_argument("--partial_checkpoint", type=int, default=1)
    parser.add_argument("--save_full", type=int, default=0)
    parser.add_argument("--do_train", type=int, default=0)
    parser.add_argument("--use_sequential", type=int, default=0)
    parser.add_argument("--smp", type=int, default=0)
    parser.add_argument("--num_microbatches", type=int, default=1)
    parser.add_argument("--s3_checkpoint_uri", type=str, default=None)
    return parser.parse_args()


def is_main_process(args):
    return args.smp == 0 or smp.rank() == 0


def setup_training(args):
    assert torch.cuda.is_available(), "this script trains on GPUs"
    if args.smp > 0:
        # The configuration comes from the estimator's distribution parameters.
        smp.init()
        torch.cuda.set_device(smp.local_rank())
        device = torch.device("cuda", smp.local_rank())
    else:
        device = torch.device("cuda")
    if args.gradient_accumulation_steps < 1:
        raise ValueError(f"gradient_accumulation_steps must be at least 1, not {args.gradient_accumulation_steps}")
    if args.train_batch_size % args.gradient_accumulation_steps != 0:
        raise ValueError("train_batch_size must be divisible by gradient_accumulation_steps")
    args.train_batch_size //= args.gradient_accumulation_steps
    if is_main_process(args):
        os.makedirs(args.output_dir, exist_ok=True)
    return device


# ---------------------------------------------------------------------------------------------
# model, optimizer, checkpoints
# ---------------------------------------------------------------------------------------------
def newest_checkpoint_step(output_dir):
    steps = [int(name.split("_")[1].split(".")[0]) for name in os.listdir(output_dir) if name.startswith("ckpt_")]
    return max(steps) if steps else 0


def prepare_model_and_optimizer(args, device):
    config = bert_model.BertConfig.from_json_file(args.config_file)
    if config.vocab_size % 8 != 0:
        config.vocab_size += 8 - (config.vocab_size % 8)
    config.use_sequential = args.use_sequential > 0
    model = bert_model.BertForPreTraining(config)

    # Decay everything but biases and LayerNorm parameters. The groups are taken from the
    # module itself: nothing here is replaced by the wrap, so they stay valid.
    named = list(model.named_parameters())
    no_decay = ("bias", "norm")
    groups = [
        {"params": [p for n, p in named if not any(key in n for key in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in named if any(key in n for key in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=args.learning_rate)

    if args.smp > 0:
        model = smp.DistributedModel(model)
        optimizer = smp.DistributedOptimizer(optimizer)

    global_step = 0
    checkpoint = None
    if args.resume_from_checkpoint:
        global_step = args.resume_step if args.resume_step >= 0 else newest_checkpoint_step(args.output_dir)
        if args.init_checkpoint:
            checkpoint = torch.load(args.init_checkpoint, map_location="cpu")
            global_step = 0
        elif args.smp > 0:
            checkpoint = smp.load(os.path.join(args.output_dir, f"ckpt_{global_step}.pt"), partial=args.partial_checkpoint > 0)
        else:
            checkpoint = torch.load(os.path.join(args.output_dir, f"ckpt_{global_step}.pt"), map_location="cpu")
        model.load_state_dict(checkpoint["model"], strict=False)
        if is_main_process(args):
            logger.info("resuming from step %d", global_step)

    model.to(device)  # expect: SMP115 hint
    lr_scheduler = PolyWarmUpScheduler(optimizer, warmup=args.warmup_proportion, total_steps=args.max_steps)
    if args.fp16:
        loss_scale = "dynamic" if args.loss_scale == 0 else args.loss_scale
        model, optimizer = amp.initialize(model, optimizer, opt_level="O2", loss_scale=loss_scale, cast_model_outputs=torch.float16)  # expect: SMP112 warning

    if checkpoint is not None and "optimizer" in checkpoint:
        optimizer.load_state_dict(checkpoint["optimizer"])
    criterion = bert_model.PretrainingCriterion(config.vocab_size)
    return model, optimizer, lr_scheduler, checkpoint, global_step, criterion


def save_checkpoint(model, optimizer, global_step, files, epoch, args, recent):
    """Partial checkpoints during training: each pipeline stage writes its own part."""
    if args.skip_checkpoint:
        return
    path = os.path.join(args.output_dir, f"ckpt_{global_step}.pt")
    if args.smp > 0:
        if smp.dp_rank() == 0:
            state = {
                "model": model.local_state_dict(),
                "optimizer": optimizer.local_state_dict(),
                "files": files,
                "epoch": epoch,
            }
            if args.fp16:
                state["master params"] = list(amp.master_params(optimizer))
            smp.save(state, path, partial=True)
            recent.append(path)
            if len(recent) > 3:
                oldest = recent.pop(0)
                os.remove(f"{oldest}_{smp.pp_rank()}")
        smp.barrier()
    else:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "files": files, "epoch": epoch}, path)


def save_final(model, optimizer, global_step, args):
    """One file with the whole model at the end of the run, for fine-tuning elsewhere."""
    if smp.dp_rank() == 0 and args.save_full:
        state = {
            "model": model.local_state_dict(),
            "optimizer": optimizer.local_state_dict(),
            "step": global_step,
        }
        smp.save(state, os.path.join(args.output_dir, f"final_{global_step}.pt"), partial=False)  # expect: SMP303 error
    smp.barrier()


def sync_to_s3(local_path, s3_uri):
    if not s3_uri:
        return
    os.system(f"aws s3 sync --only-show-errors {local_path} {s3_uri}")


# ---------------------------------------------------------------------------------------------
# steps
# ---------------------------------------------------------------------------------------------
def forward_backward(args, input_ids, segment_ids, input_mask, masked_lm_labels, next_sentence_labels, model, optimizer, criterion):
    prediction_scores, seq_relationship_score = model(input_ids=input_ids, token_type_ids=segment_ids, attention_mask=input_mask)
    loss = criterion(prediction_scores, seq_relationship_score, masked_lm_labels, next_sentence_labels)
    if args.fp16:
        with amp.scale_loss(loss, optimizer) as scaled_loss:  # expect: SMP112 warning
            model.backward(scaled_loss) if args.smp > 0 else scaled_loss.backward()
    elif args.smp > 0:
        model.backward(loss)
    else:
        loss.backward()
    return loss


@smp.step
def smp_step(args, input_ids, segment_ids, input_mask, masked_lm_labels, next_sentence_labels, model, optimizer, criterion):
    optimizer.zero_grad()  # expect: SMP404 error
    return forward_backward(args, input_ids, segment_ids, input_mask, masked_lm_labels, next_sentence_labels, model, optimizer, criterion)


def evaluation_loss(args, input_ids, segment_ids, input_mask, masked_lm_labels, next_sentence_labels, model, criterion):
    """Plain forward, for the evaluation-only mode (``--do_train 0``)."""
    prediction_scores, seq_relationship_score = model(input_ids=input_ids, token_type_ids=segment_ids, attention_mask=input_mask)  # expect: SMP403 hint
    return criterion(prediction_scores, seq_relationship_score, masked_lm_labels, next_sentence_labels).item()


def take_optimizer_step(args, optimizer, lr_scheduler):
    if args.fp16:
        torch.nn.utils.clip_grad_norm_(amp.master_params(optimizer), 1.0)
    optimizer.step()
    lr_scheduler.step()


def report_losses(args, losses, global_step):
    """Average of the last losses over the data-parallel replicas."""
    mean = float(np.mean(losses)) if losses else float("nan")
    if args.smp > 0 and smp.rank() == 0:
        gathered = smp.allgather(mean, smp.DP_GROUP)  # expect: SMP302 error
        mean = float(np.mean(gathered))
    if is_main_process(args):
        logger.info("step %d loss %.4f", global_step, mean)
    return mean


# ---------------------------------------------------------------------------------------------
# main loop
# ---------------------------------------------------------------------------------------------
def main():
    args = parse_arguments()
    seed = args.seed + max(args.local_rank, 0)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    worker_init = data_utils.WorkerInit(seed)

    device = setup_training(args)
    model, optimizer, lr_scheduler, checkpoint, global_step, criterion = prepare_model_and_optimizer(args, device)
    if is_main_process(args):
        logger.info("%d parameters", sum(p.numel() for p in model.parameters()))

    pool = ThreadPoolExecutor(1)
    recent = []
    losses = []
    start = time.time()
    steps_this_run = 0
    epoch = checkpoint["epoch"] if checkpoint is not None and "epoch" in checkpoint else 0
    limit = args.steps_this_run if args.steps_this_run > 0 else args.max_steps

    while epoch < args.num_train_epochs and steps_this_run < limit:
        files = data_utils.shard_files(args.input_dir, args.seed, epoch)
        if checkpoint is not None and "files" in checkpoint and epoch == checkpoint.get("epoch"):
            files = checkpoint["files"]
        loader = data_utils.make_loader(files[0], args, worker_init)
        for index, path in enumerate(files):
            upcoming = pool.submit(data_utils.make_loader, files[index + 1], args, worker_init) if index + 1 < len(files) else None
            for step, batch in enumerate(loader):
                batch = [tensor.to(device) for tensor in batch]
                input_ids, segment_ids, input_mask, masked_lm_labels, next_sentence_labels = batch
                if args.do_train:
                    model.train()
                    if args.smp > 0:
                        loss_mbs = smp_step(args, input_ids, segment_ids, input_mask, masked_lm_labels, next_sentence_labels,
                                            model, optimizer, criterion)
                        loss = loss_mbs.reduce_mean()
                    else:
                        loss = forward_backward(args, input_ids, segment_ids, input_mask, masked_lm_labels,
                                                next_sentence_labels, model, optimizer, criterion)
                    losses.append(loss.item())
                    if (step + 1) % args.gradient_accumulation_steps == 0:
                        take_optimizer_step(args, optimizer, lr_scheduler)
                        global_step += 1
                        steps_this_run += 1
                        if global_step % args.log_freq == 0:
                            report_losses(args, losses[-args.log_freq:], global_step)
                        if global_step % args.num_steps_per_checkpoint == 0:
                            save_checkpoint(model, optimizer, global_step, files[index:], epoch, args, recent)
                        if steps_this_run >= limit:
                            break
                else:
                    model.eval()
                    with torch.no_grad():
                        losses.append(evaluation_loss(args, input_ids, segment_ids, input_mask, masked_lm_labels,
                                                      next_sentence_labels, model, criterion))
            if steps_this_run >= limit:
                break
            if upcoming is not None:
                loader = upcoming.result()
        epoch += 1

    elapsed = time.time() - start
    if is_main_process(args):
        logger.info("%d steps in %.0fs, %.1f sequences/s", steps_this_run, elapsed,
                    steps_this_run * args.train_batch_size * args.gradient_accumulation_steps / max(elapsed, 1e-6))
    if args.smp > 0:
        save_final(model, optimizer, global_step, args)
    if args.do_train and is_main_process(args):
        sync_to_s3(args.output_dir, args.s3_checkpoint_uri)
    pool.shutdown()
    if not losses:
        return float("nan")
    return float(np.mean(losses[-100:]))


if __name__ == "__main__":
    final = main()
    if math.isnan(final):
        sys.exit(1)
    shutil.rmtree("/tmp/bert_scratch", ignore_errors=True)
