"""GPT-2 pre-training with the SageMaker model parallelism library.

Tensor parallelism (distributed transformer layers), pipeline parallelism, optimizer state
sharding and fp16, all switched by command-line arguments that the launcher passes as
hyperparameters. Checkpoints are partial (one file per model partition) during training,
with an optional full model at the end.
"""

import argparse
import math
import os
import re
import time
from collections import OrderedDict

import numpy as np
import smdistributed.modelparallel.torch as smp
import torch
import torch.nn as nn
import torch.optim as optim
from transformers import AutoConfig, AutoModelForCausalLM, set_seed

import data_pipeline
from learning_rates import WarmupDecay
from memory_tracker import report, reset_peak


# ---------------------------------------------------------------------------------------------
# arguments
# ---------------------------------------------------------------------------------------------
def parse_args():
    parser = argparse.ArgumentParser(description="GPT-2 with tensor and pipeline parallelism")

    opt = parser.add_argument_group("optimization")
    opt.add_argument("--train_batch_size", type=int, default=4)
    opt.add_argument("--val_batch_size", type=int, default=4)
    opt.add_argument("--max_steps", type=int, default=5000)
    opt.add_argument("--seed", type=int, default=12345)
    opt.add_argument("--same_seed", type=int, default=0)
    opt.add_argument("--lr", type=float, default=0.0001)
    opt.add_argument("--min_lr", type=float, default=0.0)
    opt.add_argument("--lr_decay_style", type=str, default="cosine")
    opt.add_argument("--lr_decay_iters", type=int, default=None)
    opt.add_argument("--warmup", type=float, default=0.01)
    opt.add_argument("--weight_decay", type=float, default=0.01)
    opt.add_argument("--beta1", type=float, default=0.9)
    opt.add_argument("--beta2", type=float, default=0.95)
    opt.add_argument("--grad_clip", type=float, default=1.0)
    opt.add_argument("--gradient_accumulation", type=int, default=1)
    opt.add_argument("--logging_freq", type=int, default=10)
    opt.add_argument("--validation_freq", type=int, default=200)
    opt.add_argument("--validation_batches", type=int, default=10)
    opt.add_argument("--enable_memory_profiling", type=int, default=0)

    model_grp = parser.add_argument_group("model")
    model_grp.add_argument("--max_context_width", type=int, default=1024)
    model_grp.add_argument("--vocab_size", type=int, default=50264)
    model_grp.add_argument("--hidden_width", type=int, default=768)
    model_grp.add_argument("--num_layers", type=int, default=12)
    model_grp.add_argument("--num_heads", type=int, default=12)
    model_grp.add_argument("--resid_pdrop", type=float, default=0.1)
    model_grp.add_argument("--embd_pdrop", type=float, default=0.1)
    model_grp.add_argument("--attn_pdrop", type=float, default=0.1)
    model_grp.add_argument("--use_distributed_transformer", type=int, default=1)
    model_grp.add_argument("--init_from_hf", type=int, default=0)
    model_grp.add_argument("--hf_model_name", type=str, default="gpt2-xl")

    smp_grp = parser.add_argument_group("model parallelism")
    smp_grp.add_argument("--tensor_parallel_degree", type=int, default=1)
    smp_grp.add_argument("--pipeline_parallel_degree", type=int, default=1)
    smp_grp.add_argument("--microbatches", type=int, default=1)
    smp_grp.add_argument("--active_microbatches", type=int, default=None)
    smp_grp.add_argument("--optimize", type=str, default="speed")
    smp_grp.add_argument("--placement_strategy", type=str, default="cluster")
    smp_grp.add_argument("--fp16", type=int, default=0)
    smp_grp.add_argument("--shard_optimizer_state", type=int, default=0)
    smp_grp.add_argument("--prescaled_batch", type=int, default=0)
    smp_grp.add_argument("--activation_checkpointing", type=int, default=0)
    smp_grp.add_argument("--offload_activations", type=int, default=0)
    smp_grp.add_argument("--fused_softmax", type=int, default=1)
    smp_grp.add_argument("--fused_bias_gelu", type=int, default=1)
    smp_grp.add_argument("--attention_in_fp32", type=int, default=0)

    io_grp = parser.add_argument_group("io")
    io_grp.add_argument("--training_dir", type=str, default=os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    io_grp.add_argument("--test_dir", type=str, default=os.environ.get("SM_CHANNEL_TEST", "/opt/ml/input/data/test"))
    io_grp.add_argument("--checkpoint_dir", type=str, default="/opt/ml/checkpoints")
    io_grp.add_argument("--model_dir", type=str, default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    io_grp.add_argument("--zipped_data", type=int, default=1)
    io_grp.add_argument("--checkpoint_freq", type=int, default=10000)
    io_grp.add_argument("--num_kept_checkpoints", type=int, default=3)
    io_grp.add_argument("--load_partial", type=int, default=0)
    io_grp.add_argument("--save_final_full_model", type=int, default=0)
    io_grp.add_argument("--skip_full_optimizer", type=int, default=1)
    return parser.parse_args()


# ---------------------------------------------------------------------------------------------
# model and optimizer
# ---------------------------------------------------------------------------------------------
def model_config(args):
    return AutoConfig.from_pretrained(
        "gpt2",
        vocab_size=args.vocab_size,
        n_positions=args.max_context_width,
        n_embd=args.hidden_width,
        n_layer=args.num_layers,
        n_head=args.num_heads,
        resid_pdrop=args.resid_pdrop,
        embd_pdrop=args.embd_pdrop,
        attn_pdrop=args.attn_pdrop,
        use_cache=False,
        return_dict=True,
    )


def param_groups_by_weight_decay(module, weight_decay):
    """Biases and LayerNorm weights are not decayed; the distributed layers keep the same names."""
    decay, no_decay = [], []
    for name, param in module.named_parameters():
        if not param.requires_grad:
            continue
        if name.endswith("bias") or re.search(r"(ln|layernorm|layer_norm)", name, re.IGNORECASE):
            no_decay.append(param)
        else:
            decay.append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def count_parameters(model):
    seen, total = set(), 0
    for param in model.parameters():
        if id(param) not in seen:
            seen.add(id(param))
            total += param.numel()
    return total


# ---------------------------------------------------------------------------------------------
# steps
# ---------------------------------------------------------------------------------------------
@smp.step
def train_step(model, optimizer, input_ids, attention_mask, args):
    """Forward and backward of one microbatch. The fp16 optimizer scales the loss itself."""
    output = model(input_ids=input_ids, attention_mask=attention_mask, labels=input_ids)
    loss = output["loss"]
    if args.fp16:
        optimizer.backward(loss, update_master_grads=False)
    else:
        model.backward(loss)
    return loss


@smp.step
def eval_step(model, input_ids, attention_mask):
    output = model(input_ids=input_ids, attention_mask=attention_mask, labels=input_ids)
    return output["loss"]


def evaluate(model, loader, max_batches):
    model.eval()
    losses = []
    with torch.no_grad():
        for index, (input_ids, mask) in enumerate(loader):
            if index >= max_batches:
                break
            input_ids, mask = input_ids.to(torch.device("cuda")), mask.to(torch.device("cuda"))
            losses.append(eval_step(model, input_ids, mask).reduce_mean())
    model.train()
    if not losses:
        return float("nan"), float("nan")
    mean = torch.stack(losses).mean()
    # Every pipeline stage computed the same loss; average over the data-parallel replicas.
    gathered = smp.allgather(mean.item(), smp.DP_GROUP)
    loss = float(np.mean(gathered))
    return loss, math.exp(min(loss, 20.0))


def sanity_check(model, optimizer, shard, args):
    """One step on a few samples before the long run: the loss must be finite, and the
    partitions must fit. Gradients are dropped afterwards."""
    dataset = data_pipeline.TokenShardDataset(shard, args.max_context_width)
    probe = torch.utils.data.DataLoader(dataset, batch_size=args.train_batch_size, shuffle=False)  # expect: SMP201 error; SMP204 hint
    input_ids, mask = next(iter(probe))
    loss = train_step(model, optimizer, input_ids.cuda(), mask.cuda(), args)
    optimizer.zero_grad(set_to_none=True)
    if not math.isfinite(loss.item()):  # expect: SMP405 error
        raise RuntimeError("the first step produced a non-finite loss; check the data and the loss scale")
    report("after the sanity check", args.enable_memory_profiling > 0)


# ---------------------------------------------------------------------------------------------
# checkpoints
# ---------------------------------------------------------------------------------------------
def checkpoint_name(step):
    return f"gpt2_step{step}.pt"


def save_partial_checkpoint(model, optimizer, lr_scheduler, step, tokens, args):
    """One file per model partition; every rdp rank 0 writes its partition's file."""
    folder = os.path.join(args.checkpoint_dir, f"step_{step}")
    if smp.local_rank() == 0:
        os.makedirs(folder, exist_ok=True)
    smp.barrier()
    state = {
        "step": step,
        "tokens": tokens,
        "lr_scheduler": lr_scheduler.state_dict(),
        "model": model.local_state_dict(),
    }
    if args.shard_optimizer_state > 0:
        # Each data-parallel rank holds its own optimizer shard: all of them save.
        state["optimizer"] = optimizer.local_state_dict()
        smp.save(state, os.path.join(folder, checkpoint_name(step)), partial=True)
    elif smp.rdp_rank() == 0:
        state["optimizer"] = optimizer.local_state_dict()
        smp.save(state, os.path.join(folder, checkpoint_name(step)), partial=True)
    smp.barrier()
    if smp.rank() == 0:
        with open(os.path.join(args.checkpoint_dir, "newest"), "w") as handle:
            handle.write(f"step_{step}")
        prune_checkpoints(args.checkpoint_dir, args.num_kept_checkpoints)


def prune_checkpoints(folder, keep):
    steps = sorted(
        (int(match.group(1)), name)
        for name in os.listdir(folder)
        for match in [re.match(r"step_(\d+)$", name)]
        if match
    )
    for _, name in steps[:-keep]:
        for file in os.listdir(os.path.join(folder, name)):
            os.remove(os.path.join(folder, name, file))
        os.rmdir(os.path.join(folder, name))


def save_run_metadata(args, step, tokens, lr_scheduler):
    """A small record of where the run stopped, next to the partial checkpoints."""
    record = {"args": vars(args), "step": step, "tokens": tokens, "lr": lr_scheduler.state_dict()}
    if smp.dp_rank() == 0:  # expect: SMP301 error
        smp.save(record, os.path.join(args.checkpoint_dir, "run_metadata.pt"), partial=True)


def save_full_optimizer_state(optimizer, args):
    """The whole optimizer state in one file: impossible while it is sharded, and skipped
    unless the run asks for it."""
    if args.shard_optimizer_state > 0:
        print("The full optimizer state cannot be gathered with shard_optimizer_state; skipping it.")
    elif not args.skip_full_optimizer:
        state = optimizer.state_dict()  # expect: SMP303 hint
        if smp.rank() == 0:
            torch.save(state, os.path.join(args.model_dir, "optimizer.pt"))


def resume_if_possible(model, optimizer, lr_scheduler, args):
    """Loads the newest partial checkpoint on every rank; returns (step, tokens)."""
    newest = os.path.join(args.checkpoint_dir, "newest")
    if not args.load_partial or not os.path.exists(newest):
        return 0, 0
    with open(newest) as handle:
        folder = handle.read().strip()
    step = int(folder.split("_")[1])
    state = smp.load(os.path.join(args.checkpoint_dir, folder, checkpoint_name(step)), partial=True)
    model.load_state_dict(state["model"], same_partition_load=True)
    if "optimizer" in state:
        optimizer.load_state_dict(state["optimizer"])
    lr_scheduler.load_state_dict(state["lr_scheduler"])
    if smp.rank() == 0:
        print(f"Resumed from {folder}: step {state['step']}, {state['tokens']} tokens")
    return state["step"], state["tokens"]


# ---------------------------------------------------------------------------------------------
# training loop
# ---------------------------------------------------------------------------------------------
def train(model, optimizer, lr_scheduler, args, start_step, start_tokens):
    step, tokens = start_step, start_tokens
    epoch = 0
    throughputs = []
    val_shard = data_pipeline.list_shards(args.test_dir)[0]
    val_loader = data_pipeline.validation_loader(val_shard, args)
    while step < args.max_steps:
        for shard in data_pipeline.shards_for_epoch(args.training_dir, epoch, args.zipped_data > 0):
            loader = data_pipeline.train_loader(shard, args, epoch)
            for input_ids, mask in loader:
                start = time.time()
                input_ids = input_ids.to(torch.device("cuda"))
                mask = mask.to(torch.device("cuda"))
                if step % args.gradient_accumulation == 0:
                    optimizer.zero_grad(set_to_none=True)
                loss_mb = train_step(model, optimizer, input_ids, mask, args)
                loss = loss_mb.reduce_mean()
                if (step + 1) % args.gradient_accumulation == 0:
                    if args.fp16:
                        optimizer.update_master_grads()
                        optimizer.clip_master_grads(args.grad_clip)
                    elif args.grad_clip > 0:
                        torch.nn.utils.clip_grad_norm_(model.local_parameters(), args.grad_clip)  # expect: SMP604 hint
                    optimizer.step()
                    if not (args.fp16 and optimizer.overflow):
                        lr_scheduler.step()
                step += 1
                batch_tokens = input_ids.numel() * smp.dp_size()
                tokens += batch_tokens
                elapsed = time.time() - start
                throughputs.append(batch_tokens / elapsed)
                if step == 1:
                    report("after the first step", args.enable_memory_profiling > 0)
                    reset_peak()
                if smp.rank() == 0 and step % args.logging_freq == 0:
                    recent = np.mean(throughputs[-args.logging_freq:])
                    print(f"step {step} loss {loss.item():.4f} lr {lr_scheduler.get_lr():.3e} {recent:.0f} tokens/s", flush=True)
                if step % args.validation_freq == 0:
                    val_loss, val_ppl = evaluate(model, val_loader, args.validation_batches)
                    if smp.rank() == 0:
                        print(f"step {step} validation loss {val_loss:.4f} perplexity {val_ppl:.2f}", flush=True)
                if step % args.checkpoint_freq == 0:
                    save_partial_checkpoint(model, optimizer, lr_scheduler, step, tokens, args)
                    save_run_metadata(args, step, tokens, lr_scheduler)
                if step >= args.max_steps:
                    break
            if step >= args.max_steps:
                break
        epoch += 1
    return step, tokens, throughputs


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------
def smp_config(args):
    """The library configuration; under SageMaker the launcher's parameters take its place."""
    config = {
        "ddp": True,
        "tensor_parallel_degree": args.tensor_parallel_degree,
        "pipeline_parallel_degree": args.pipeline_parallel_degree,
        "microbatches": args.microbatches,
        "shard_optimizer_state": args.shard_optimizer_state > 0,
        "prescaled_batch": args.prescaled_batch > 0,
        "fp16": args.fp16 > 0,
        "offload_activations": args.offload_activations > 0,
        "optimize": args.optimize,
        "placement_strategy": args.placement_strategy,
    }
    if args.active_microbatches is not None:
        config["active_microbatches"] = args.active_microbatches
    return config


def main():
    args = parse_args()
    if args.shard_optimizer_state > 0 and not args.skip_full_optimizer:
        raise ValueError("With shard_optimizer_state, pass --skip_full_optimizer 1: the full optimizer state cannot be saved.")

    smp.init(smp_config(args))
    if smp.rank() == 0:
        print("Arguments:", vars(args))
        print(f"world {smp.size()}, tp {smp.tp_size()}, pp {smp.pp_size()}, dp {smp.dp_size()}, rdp {smp.rdp_size()}")

    torch.cuda.set_device(smp.local_rank())
    set_seed(args.seed)
    report("before model creation", args.enable_memory_profiling > 0)

    config = model_config(args)
    dtype = torch.float16 if args.fp16 else torch.get_default_dtype()
    with smp.model_creation(
        tensor_parallelism=smp.tp_size() > 1 or args.use_distributed_transformer > 0,
        dtype=dtype,
        attention_in_fp32=args.attention_in_fp32 > 0,
        fused_softmax=args.fused_softmax > 0,
        fused_bias_gelu=args.fused_bias_gelu > 0,
    ):
        if args.init_from_hf:
            model = AutoModelForCausalLM.from_pretrained(args.hf_model_name, config=config)  # expect: SMP102 error
        else:
            model = AutoModelForCausalLM.from_config(config)
    report("after model creation", args.enable_memory_profiling > 0)
    if smp.rank() == 0:
        print(f"{count_parameters(model) / 1e6:.1f}M parameters before partitioning")

    if not args.same_seed:
        # Distributed layers initialise their slices from torch's RNG: different on each tp rank.
        set_seed(args.seed + smp.tp_rank())

    model = smp.DistributedModel(model, trace_device="gpu", backward_passes_per_step=args.gradient_accumulation)
    report("after the wrap", args.enable_memory_profiling > 0)

    inner = model.get_module()
    if args.activation_checkpointing:
        if args.use_distributed_transformer or smp.tp_size() > 1:
            smp.set_activation_checkpointing(inner.transformer.seq_layers, pack_args_as_tuple=True, strategy="each")
        else:
            for block in inner.transformer.h:
                smp.set_activation_checkpointing(block)

    optimizer = optim.AdamW(
        param_groups_by_weight_decay(inner, args.weight_decay),
        lr=args.lr,
        betas=(args.beta1, args.beta2),
    )
    optimizer = smp.DistributedOptimizer(
        optimizer,
        static_loss_scale=None,
        dynamic_loss_scale=True,
        dynamic_loss_args={"scale_window": 1000, "min_scale": 1, "delayed_shift": 2},
    )
    total_iters = args.lr_decay_iters or args.max_steps
    lr_scheduler = WarmupDecay(
        optimizer,
        start_lr=args.lr,
        warmup_iters=int(args.warmup * total_iters),
        total_iters=total_iters,
        decay_style=args.lr_decay_style,
        min_lr=args.min_lr,
    )

    start_step, start_tokens = resume_if_possible(model, optimizer, lr_scheduler, args)
    if start_step == 0:
        sanity_check(model, optimizer, data_pipeline.list_shards(args.training_dir)[0], args)
    begin = time.time()
    step, tokens, throughputs = train(model, optimizer, lr_scheduler, args, start_step, start_tokens)
    elapsed = time.time() - begin
    if smp.rank() == 0:
        print(f"{step} steps, {tokens} tokens in {elapsed:.0f}s; median {np.median(throughputs):.0f} tokens/s")

    if args.save_final_full_model:
        # The final model only: a full checkpoint never holds the optimizer.
        smp.save_checkpoint(args.model_dir, tag="fullmodel.pt", partial=False, model=model)
        save_full_optimizer_state(optimizer, args)
    smp.barrier()
    if smp.rank() == 0:
        print("Training done")


if __name__ == "__main__":
    main()
