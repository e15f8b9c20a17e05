"""GPT-2 with SageMaker model parallelism (SMP 1.7): tensor parallelism over the Hugging Face
model, optimizer state sharding, fp16 through the library's optimizer wrapper."""

import argparse
import math
import os
import time

import smdistributed.modelparallel.torch as smp
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from data import loader_for, training_files
from monitoring import Throughput, memory_report, write_metrics


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max_steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--fp16", type=int, default=0)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--lr_decay_iters", type=int, default=100000)
    parser.add_argument("--min_lr", type=float, default=1e-5)
    parser.add_argument("--warmup", type=float, default=0.01)
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--grad_clip", type=float, default=1.0)
    parser.add_argument("--logging_freq", type=int, default=10)
    parser.add_argument("--checkpoint_freq", type=int, default=500)
    parser.add_argument("--max_context_width", type=int, default=1024)
    parser.add_argument("--hidden_width", type=int, default=768)
    parser.add_argument("--num_layers", type=int, default=12)
    parser.add_argument("--num_heads", type=int, default=12)
    parser.add_argument("--train_batch_size", type=int, default=4)
    parser.add_argument("--val_batch_size", type=int, default=4)
    parser.add_argument("--tensor_parallel_degree", type=int, default=1)
    parser.add_argument("--pipeline_parallel_degree", type=int, default=1)
    parser.add_argument("--shard_optimizer_state", type=int, default=0)
    parser.add_argument("--prescaled_batch", type=int, default=0)
    parser.add_argument("--training_dir", type=str, default=os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    parser.add_argument("--test_dir", type=str, default=os.environ.get("SM_CHANNEL_TEST", "/opt/ml/input/data/test"))
    parser.add_argument("--checkpoint_dir", type=str, default="/opt/ml/checkpoints")
    parser.add_argument("--model_dir", type=str, default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    parser.add_argument("--output_data_dir", type=str, default=os.environ.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data"))
    parser.add_argument("--activation_checkpointing", type=int, default=1)
    parser.add_argument("--validation_batches", type=int, default=20)
    args = parser.parse_args()
    validate(args)
    return args


def validate(args):
    """Fail on the host, before the first collective, when the arguments cannot work together."""
    if args.hidden_width % args.num_heads:
        raise ValueError(f"hidden_width {args.hidden_width} is not divisible by num_heads {args.num_heads}")
    if args.tensor_parallel_degree > 1 and args.num_heads % args.tensor_parallel_degree:
        raise ValueError("the attention heads must split evenly across the tensor-parallel ranks")
    if args.max_context_width > 2048:
        raise ValueError("GPT-2 position embeddings stop at 2048 tokens")
    if args.warmup < 0 or args.warmup >= 1:
        raise ValueError("warmup is a fraction of lr_decay_iters")


def get_learning_rate(args, step):
    warmup_steps = int(args.warmup * args.lr_decay_iters)
    if step < warmup_steps:
        return args.lr * (step + 1) / warmup_steps
    if step > args.lr_decay_iters:
        return args.min_lr
    ratio = (step - warmup_steps) / max(1, args.lr_decay_iters - warmup_steps)
    return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1.0 + math.cos(math.pi * ratio))


def param_groups(model, weight_decay):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if "bias" in name or "ln" in name or "norm" in name:
            no_decay.append(param)
        else:
            decay.append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


@smp.step
def train_step(model, input_ids, labels):
    outputs = model(input_ids=input_ids, labels=labels)
    loss = outputs["loss"]
    model.backward(loss)
    return loss


@smp.step
def eval_step(model, input_ids, labels):
    return model(input_ids=input_ids, labels=labels)["loss"]


def evaluate(model, loader, batches):
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for index, (input_ids, labels) in enumerate(loader):
            if index >= batches:
                break
            input_ids = input_ids.to(torch.device("cuda", smp.local_rank()))
            labels = labels.to(torch.device("cuda", smp.local_rank()))
            total += eval_step(model, input_ids, labels).reduce_mean().item()
            count += 1
    model.train()
    return total / max(count, 1)


def save(model, optimizer, step, args):
    """Partial checkpoints: one file per model partition, written by every partition's owner."""
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    if smp.rdp_rank() == 0:
        smp.save(
            {"model": model.local_state_dict(), "optimizer": optimizer.local_state_dict(), "step": step},  # expect: SMP307 error
            os.path.join(args.checkpoint_dir, f"gpt2_{step}.pt"),
            partial=True,
        )
    smp.barrier()


def resume(model, optimizer, args):
    if not os.path.isdir(args.checkpoint_dir):
        return 0
    steps = sorted(int(name.split("_")[1].split(".")[0]) for name in os.listdir(args.checkpoint_dir) if name.startswith("gpt2_"))
    if not steps:
        return 0
    checkpoint = smp.load(os.path.join(args.checkpoint_dir, f"gpt2_{steps[-1]}.pt"), partial=True)
    model.load_state_dict(checkpoint["model"], same_partition_load=True)
    optimizer.load_state_dict(checkpoint["optimizer"])
    return checkpoint["step"]


def main():
    args = parse_args()
    smp.init()
    torch.cuda.set_device(smp.local_rank())
    device = torch.device("cuda", smp.local_rank())
    # Tensor-parallel ranks initialise different slices: seed them differently.
    torch.manual_seed(args.seed + smp.tp_rank())

    config = AutoConfig.from_pretrained("gpt2")
    config.n_positions = args.max_context_width
    config.n_embd = args.hidden_width
    config.n_layer = args.num_layers
    config.n_head = args.num_heads
    config.use_cache = False

    with smp.tensor_parallelism(enabled=args.tensor_parallel_degree > 1):
        model = AutoModelForCausalLM.from_config(config)
    if args.fp16:
        model = model.half()
    model = smp.DistributedModel(model)
    if args.activation_checkpointing:
        # Recompute each transformer block in the backward pass instead of keeping its activations.
        for block in model.get_module().transformer.h:
            smp.set_activation_checkpointing(block)
    optimizer = torch.optim.AdamW(param_groups(model, args.weight_decay), lr=args.lr, betas=(0.9, 0.95))
    optimizer = smp.DistributedOptimizer(optimizer, static_loss_scale=None, dynamic_loss_scale=True, dynamic_loss_args={"scale_window": 1000, "min_scale": 1, "delayed_shift": 2})

    start_step = resume(model, optimizer, args)

    # Without prescaled_batch every data-parallel rank, tensor-parallel peers included, reads its own batch.
    files = training_files(args.training_dir)
    val_files = training_files(args.test_dir)
    val_loader = loader_for(val_files[0], args.max_context_width, args.val_batch_size, args.seed, smp.dp_rank(), smp.dp_size())

    step = start_step
    start = time.time()
    epoch = 0
    throughput = Throughput(args.train_batch_size * args.max_context_width * smp.dp_size())
    if smp.rank() == 0:
        print(memory_report(device, "after wrap"))
    while step < args.max_steps:
        train_loader = loader_for(files[epoch % len(files)], args.max_context_width, args.train_batch_size, args.seed + epoch, smp.dp_rank(), smp.dp_size())
        for input_ids, labels in train_loader:
            for group in optimizer.param_groups:
                group["lr"] = get_learning_rate(args, step)
            input_ids = input_ids.to(device)
            labels = labels.to(device)
            loss = train_step(model, input_ids, labels).reduce_mean()
            if args.fp16:
                optimizer.clip_master_grads(args.grad_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            throughput.tick()
            if step % args.logging_freq == 0 and smp.rank() == 0:
                elapsed, start = time.time() - start, time.time()
                print(f"step {step} loss {loss.item():.4f} lr {get_learning_rate(args, step):.2e} ({elapsed:.1f}s)")
                print(f"step {step} {throughput.tokens_per_second():.0f} tokens/s; {memory_report(device, 'train')}")
                write_metrics(args.output_data_dir, step, {"loss": loss.item(), "tokens_per_second": throughput.tokens_per_second()})
            if step % args.checkpoint_freq == 0:
                save(model, optimizer, step, args)
                val_loss = evaluate(model, val_loader, args.validation_batches)
                if smp.rank() == 0:
                    print(f"step {step} validation loss {val_loss:.4f} perplexity {math.exp(min(val_loss, 20)):.2f}")
            if step >= args.max_steps:
                break
        epoch += 1

    # The final export: the full model, gathered on rank 0, plus the optimizer for later fine-tuning.
    model_state = model.state_dict()
    optimizer_state = optimizer.state_dict()  # expect: SMP303 error
    if smp.rank() == 0:
        os.makedirs(args.model_dir, exist_ok=True)
        smp.save({"model": model_state, "optimizer": optimizer_state}, os.path.join(args.model_dir, "gpt2_final.pt"), partial=False)
    smp.barrier()


if __name__ == "__main__":
    main()
