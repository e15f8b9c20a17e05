"""Fine-tunes GPT-J 6B (or GPT-NeoX) from the Hugging Face weights with tensor parallelism.

The model is created from its configuration inside ``smp.tensor_parallelism()``, so that the
library builds the distributed transformer directly, and the pretrained weights are loaded
after ``smp.DistributedModel``: the Hugging Face state dict is translated to the
distributed layout by the library's translate functions. At the end the model is gathered
and translated back, so the result loads with ``from_pretrained``.
"""

import argparse
import json
import math
import os
import time

import smdistributed.modelparallel.torch as smp
import torch
from smdistributed.modelparallel.torch.nn.huggingface.gptj import (
    translate_hf_state_dict_to_smdistributed_gptj,
    translate_state_dict_to_hf_gptj,
)
from smdistributed.modelparallel.torch.nn.huggingface.gptneox import (
    translate_hf_state_dict_to_smdistributed_gptneox,
    translate_state_dict_to_hf_gptneox,
)
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, get_linear_schedule_with_warmup

import hf_data

TRANSLATIONS = {
    "gptj": (translate_hf_state_dict_to_smdistributed_gptj, translate_state_dict_to_hf_gptj),
    "gpt_neox": (translate_hf_state_dict_to_smdistributed_gptneox, translate_state_dict_to_hf_gptneox),
}


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_name_or_path", type=str, default="EleutherAI/gpt-j-6B")
    parser.add_argument("--pretrained_weights_dir", type=str, default="/opt/ml/input/data/weights")
    parser.add_argument("--warm_start_path", type=str, default="")
    parser.add_argument("--dataset_name", type=str, default="wikitext")
    parser.add_argument("--dataset_config_name", type=str, default="wikitext-103-raw-v1")
    parser.add_argument("--dataset_path", type=str, default="")
    parser.add_argument("--cache_dir", type=str, default="/tmp/hf_cache")
    parser.add_argument("--block_size", type=int, default=2048)
    parser.add_argument("--per_device_train_batch_size", type=int, default=4)
    parser.add_argument("--per_device_eval_batch_size", type=int, default=4)
    parser.add_argument("--learning_rate", type=float, default=2e-5)
    parser.add_argument("--weight_decay", type=float, default=0.0)
    parser.add_argument("--warmup_steps", type=int, default=100)
    parser.add_argument("--max_steps", type=int, default=1000)
    parser.add_argument("--eval_steps", type=int, default=200)
    parser.add_argument("--eval_batches", type=int, default=20)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--max_grad_norm", type=float, default=1.0)
    parser.add_argument("--bf16", type=int, default=0)
    parser.add_argument("--checkpoint_dir", type=str, default="/opt/ml/checkpoints")
    parser.add_argument("--save_steps", type=int, default=500)
    parser.add_argument("--output_dir", type=str, default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    parser.add_argument("--metrics_file", type=str, default="/opt/ml/output/data/metrics.jsonl")
    parser.add_argument("--activation_checkpointing", type=int, default=1)
    parser.add_argument("--early_stopping_patience", type=int, default=0)
    parser.add_argument("--log_steps", type=int, default=10)
    return parser.parse_args()


def validate_args(args):
    """Fail before the cluster does: the values that only break after the model is loaded."""
    problems = []
    if args.block_size % 128 != 0:
        problems.append(f"--block_size {args.block_size} is not a multiple of 128")
    if args.warmup_steps >= args.max_steps:
        problems.append(f"--warmup_steps {args.warmup_steps} leaves no steps after the warm-up (--max_steps {args.max_steps})")
    if args.save_steps <= 0 or args.eval_steps <= 0:
        problems.append("--save_steps and --eval_steps must be positive")
    if problems:
        raise SystemExit("invalid arguments:\n  " + "\n  ".join(problems))


class RunningStats:
    """Exponential moving averages of the loss and of the step time."""

    def __init__(self, decay=0.98):
        self.decay = decay
        self.loss = None
        self.seconds = None
        self.steps = 0

    def update(self, loss, seconds):
        self.steps += 1
        if self.loss is None:
            self.loss, self.seconds = loss, seconds
        else:
            self.loss = self.decay * self.loss + (1 - self.decay) * loss
            self.seconds = self.decay * self.seconds + (1 - self.decay) * seconds

    def tokens_per_second(self, tokens_per_step):
        return tokens_per_step / self.seconds if self.seconds else 0.0


class MetricsWriter:
    """JSON lines on the first rank only; the other ranks hold the same values."""

    def __init__(self, path):
        self.path = path
        self.handle = None
        if smp.rank() == 0:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            self.handle = open(path, "a")

    def write(self, **values):
        if self.handle is not None:
            self.handle.write(json.dumps(values) + "\n")
            self.handle.flush()

    def close(self):
        if self.handle is not None:
            self.handle.close()


class EarlyStopping:
    def __init__(self, patience):
        self.patience = patience
        self.best = float("inf")
        self.bad_evaluations = 0

    def should_stop(self, eval_loss):
        if self.patience <= 0:
            return False
        if eval_loss < self.best - 1e-4:
            self.best = eval_loss
            self.bad_evaluations = 0
            return False
        self.bad_evaluations += 1
        return self.bad_evaluations >= self.patience


def checkpoint_layers(model, family):
    """Activation checkpointing on every transformer block, after the wrap (the library
    requires the distributed model to exist)."""
    inner = model.get_module()
    blocks = inner.transformer.h if family == "gptj" else inner.gpt_neox.layers
    for block in blocks:
        smp.set_activation_checkpointing(block)


def model_family(config):
    family = config.model_type
    if family not in TRANSLATIONS:
        raise ValueError(f"no tensor-parallel translation for {family} models")
    return family


def check_layout():
    """Ranks per group, printed once; the data-parallel and tensor-parallel groups overlap."""
    assert smp.mp_size() * smp.dp_size() == smp.size(), "unexpected rank layout"  # expect: SMP502 error
    if smp.rank() == 0:
        print(f"world {smp.size()}: tp {smp.tp_size()} x pp {smp.pp_size()} x rdp {smp.rdp_size()}")


@smp.step
def train_step(model, batch):
    output = model(**batch)
    model.backward(output.loss)
    return output.loss


@smp.step
def eval_step(model, batch):
    return model(**batch).loss


def evaluate(model, loader, device, batches):
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for index, batch in enumerate(loader):
            if index >= batches:
                break
            total += eval_step(model, hf_data.to_device(batch, device)).reduce_mean().item()
            count += 1
    model.train()
    mean = total / max(count, 1)
    return mean, math.exp(min(mean, 20.0))


def save_partial(model, optimizer, scheduler, step, args):
    """A resumable checkpoint: every rank saves its partition and optimizer shard."""
    smp.save_checkpoint(
        args.checkpoint_dir,
        tag=f"step_{step}",
        partial=True,
        model=model,
        optimizer=optimizer,
        user_content={"step": step, "scheduler": scheduler.state_dict()},
        num_kept_partial_checkpoints=2,
    )


def save_hf_model(model, tokenizer, config, family, args):
    """Gathers the whole model on rank 0 of each replica group and writes it in the Hugging
    Face layout. ``state_dict()`` gathers across tensor- and pipeline-parallel peers, so every
    rank with ``rdp_rank() == 0`` must call it."""
    if smp.rdp_rank() == 0:
        state = model.state_dict()
        if smp.rank() == 0:
            to_hf = TRANSLATIONS[family][1]
            hf_state = to_hf(state, args.block_size)
            os.makedirs(args.output_dir, exist_ok=True)
            torch.save(hf_state, os.path.join(args.output_dir, "pytorch_model.bin"))
            config.save_pretrained(args.output_dir)
            tokenizer.save_pretrained(args.output_dir)
    smp.barrier()


def main():
    args = parse_args()
    validate_args(args)
    smp.init()
    check_layout()
    torch.cuda.set_device(smp.local_rank())
    device = torch.device("cuda")

    config = AutoConfig.from_pretrained(args.model_name_or_path, cache_dir=args.cache_dir)
    config.use_cache = False
    family = model_family(config)
    tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path, cache_dir=args.cache_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    raw = hf_data.load_texts(args)
    datasets = hf_data.tokenize_and_group(raw, tokenizer, args.block_size)
    train_loader = hf_data.loader(datasets["train"], args.per_device_train_batch_size, args.seed, shuffle=True)
    eval_loader = hf_data.loader(datasets["validation"], args.per_device_eval_batch_size, args.seed, shuffle=False)

    torch.manual_seed(args.seed)  # expect: SMP501 error
    dtype = torch.bfloat16 if args.bf16 else torch.float16
    with smp.tensor_parallelism(enabled=True):
        with smp.delay_param_initialization(enabled=True):
            model = AutoModelForCausalLM.from_config(config, torch_dtype=dtype)
    if args.warm_start_path:
        # Weights from an earlier fine-tuning run, saved with torch.save.
        model.load_state_dict(torch.load(args.warm_start_path, map_location="cpu"))  # expect: SMP102 hint
    model = smp.DistributedModel(model, trace_device="gpu")
    if args.activation_checkpointing:
        checkpoint_layers(model, family)

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)
    optimizer = smp.DistributedOptimizer(optimizer)  # expect: SMP114 hint
    scheduler = get_linear_schedule_with_warmup(optimizer, args.warmup_steps, args.max_steps)  # expect: SMP113 error

    newest = os.path.join(args.checkpoint_dir, "newest")
    step = 0
    if os.path.exists(newest):
        user_content = smp.resume_from_checkpoint(args.checkpoint_dir, tag=None, partial=True)
        step = user_content["step"]
        scheduler.load_state_dict(user_content["scheduler"])
    else:
        # The pretrained weights, in the Hugging Face layout: translated into the distributed
        # modules when the first step loads them.
        smp.resume_from_checkpoint(
            args.pretrained_weights_dir,
            tag="pytorch_model.bin",
            partial=False,
            load_optimizer=False,
            translate_function=TRANSLATIONS[family][0],
        )

    model.train()
    stats = RunningStats()
    metrics = MetricsWriter(args.metrics_file)
    stopper = EarlyStopping(args.early_stopping_patience)
    tokens_per_step = args.per_device_train_batch_size * args.block_size * smp.dp_size()
    stop = False
    while step < args.max_steps and not stop:
        for batch in train_loader:
            started = time.time()
            batch = hf_data.to_device(batch, device)
            optimizer.zero_grad(set_to_none=True)
            loss = train_step(model, batch).reduce_mean()
            optimizer.clip_master_grads(args.max_grad_norm)
            optimizer.step()
            scheduler.step()
            step += 1
            stats.update(loss.item(), time.time() - started)
            if step % args.log_steps == 0:
                metrics.write(step=step, loss=stats.loss, lr=scheduler.get_last_lr()[0],
                              tokens_per_second=stats.tokens_per_second(tokens_per_step))
                if smp.rank() == 0:
                    print(f"step {step}: loss {stats.loss:.4f}, {stats.seconds:.2f}s/step", flush=True)
            if step % args.eval_steps == 0:
                eval_loss, perplexity = evaluate(model, eval_loader, device, args.eval_batches)
                metrics.write(step=step, eval_loss=eval_loss, perplexity=perplexity)
                stop = stopper.should_stop(eval_loss)
            if step % args.save_steps == 0 or stop:
                save_partial(model, optimizer, scheduler, step, args)
            if step >= args.max_steps or stop:
                break
    metrics.close()

    save_hf_model(model, tokenizer, config, family, args)


if __name__ == "__main__":
    main()
