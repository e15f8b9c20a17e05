"""GPT-2 pretraining and instruction fine-tuning with tensor parallelism (SMP v1).

The transformer layers are distributed across a tensor-parallel group of 4 GPUs; the other
GPUs replicate that group for data parallelism. Without prescaled batch each rank reads its
own part of the batch, so data is sharded by the data-parallel rank.
"""

import argparse
import json
import math
import os
import time
from collections import deque

import smdistributed.modelparallel.torch as smp
import torch
import torch.distributed as dist
from data_pipeline import create_pretraining_dataloader, shuffled_paths
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from tqdm import tqdm
from transformers import AutoConfig, AutoModelForCausalLM, set_seed


def parse_args():
    parser = argparse.ArgumentParser()
    # data
    parser.add_argument("--training_dir", type=str, default=os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    parser.add_argument("--test_dir", type=str, default=os.environ.get("SM_CHANNEL_TEST", "/opt/ml/input/data/test"))
    parser.add_argument("--finetune_dir", type=str, default=None, help="Prompt/completion pairs (jsonl) to fine-tune on.")
    parser.add_argument("--curriculum_dir", type=str, default=None, help="Short clean sequences for a warm-up phase.")
    parser.add_argument("--zipped_data", type=int, default=1)
    parser.add_argument("--max_context_width", type=int, default=1024)
    # model
    parser.add_argument("--model_type", type=str, default="gpt2")
    parser.add_argument("--hidden_width", type=int, default=768)
    parser.add_argument("--num_layers", type=int, default=12)
    parser.add_argument("--num_heads", type=int, default=12)
    parser.add_argument("--use_distributed_transformer", type=int, default=1)
    parser.add_argument("--fp16", type=int, default=0)
    # optimisation
    parser.add_argument("--train_batch_size", type=int, default=4)
    parser.add_argument("--val_batch_size", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--min_lr", type=float, default=1e-5)
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--warmup_steps", type=int, default=200)
    parser.add_argument("--max_steps", type=int, default=5000)
    parser.add_argument("--curriculum_steps", type=int, default=0)
    parser.add_argument("--finetune_epochs", type=int, default=0)
    parser.add_argument("--seed", type=int, default=12345)
    # distributed data
    parser.add_argument("--prescaled_batch", type=int, default=0)
    # bookkeeping
    parser.add_argument("--checkpoint_dir", type=str, default="/opt/ml/checkpoints")
    parser.add_argument("--checkpoint_freq", type=int, default=1000)
    parser.add_argument("--validation_freq", type=int, default=200)
    parser.add_argument("--validation_batches", type=int, default=10)
    parser.add_argument("--logging_freq", type=int, default=10)
    parser.add_argument("--model_dir", type=str, default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    return parser.parse_args()


# -- datasets local to this script ------------------------------------------------------------------
class InstructionDataset(Dataset):
    """Prompt/completion pairs, tokenized ahead of time into one sequence per example."""

    def __init__(self, path, max_length):
        self.examples = []
        with open(path, "r", encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                ids = (record["prompt_ids"] + record["completion_ids"])[:max_length]
                self.examples.append(ids)
        self.max_length = max_length

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, index):
        return self.examples[index]


class CurriculumDataset(Dataset):
    """Short, clean sequences used to warm the model up before the web corpus."""

    def __init__(self, folder, max_length):
        self.sequences = []
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name), "r", encoding="utf-8") as handle:
                self.sequences.extend(json.loads(line)["input_ids"][:max_length] for line in handle)

    def __len__(self):
        return len(self.sequences)

    def __getitem__(self, index):
        return self.sequences[index]


def pad_batch(sequences, pad_id=0):
    """Right-pads a list of token id lists into (input_ids, attention_mask)."""
    width = max(len(sequence) for sequence in sequences)
    input_ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        input_ids[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
        attention_mask[row, : len(sequence)] = 1
    return input_ids, attention_mask


# -- step functions -----------------------------------------------------------------------------------
@smp.step
def train_step(model, input_ids, attention_mask):
    loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=input_ids)["loss"]
    model.backward(loss)
    return loss


@smp.step
def eval_step(model, input_ids, attention_mask):
    return model(input_ids=input_ids, attention_mask=attention_mask, labels=input_ids)["loss"]


# -- helpers --------------------------------------------------------------------------------------------
def data_parallel_rank_and_size(args):
    """With prescaled batch a whole tensor-parallel group reads one batch."""
    dp_rank = smp.dp_rank() if not args.prescaled_batch else smp.rdp_rank()
    dp_size = smp.dp_size() if not args.prescaled_batch else smp.rdp_size()
    return dp_rank, dp_size


def learning_rate_schedule(args):
    def schedule(step):
        if step < args.warmup_steps:
            return (step + 1) / args.warmup_steps
        progress = min(1.0, (step - args.warmup_steps) / max(1, args.max_steps - args.warmup_steps))
        cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
        return max(args.min_lr / args.lr, cosine)

    return schedule


def replica_mean(value, device):
    tensor = torch.tensor([value], dtype=torch.float32, device=device)
    dist.all_reduce(tensor, group=smp.get_dp_process_group())
    return tensor.item() / smp.dp_size()


def log(message):
    if smp.rank() == 0:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def memory_report(tag):
    if smp.rdp_rank() == 0 and smp.local_rank() < smp.tp_size():
        allocated = torch.cuda.memory_allocated() / 2**30
        reserved = torch.cuda.memory_reserved() / 2**30
        print(f"[{tag}] tp_rank {smp.tp_rank()} pp_rank {smp.pp_rank()}: {allocated:.2f} GiB allocated, {reserved:.2f} GiB reserved")


# -- model ----------------------------------------------------------------------------------------------
def build_model(args):
    config = AutoConfig.from_pretrained(args.model_type)
    config.n_embd = args.hidden_width
    config.n_layer = args.num_layers
    config.n_head = args.num_heads
    config.n_positions = args.max_context_width
    config.use_cache = False
    dtype = torch.float16 if args.fp16 else torch.get_default_dtype()

    set_seed(args.seed)
    with smp.model_creation(tensor_parallelism=smp.tp_size() > 1 or args.use_distributed_transformer > 0, dtype=dtype):
        model = AutoModelForCausalLM.from_config(config)
    num_params = sum(parameter.numel() for parameter in model.parameters())
    log(f"model with {num_params / 1e6:.1f}M parameters")

    torch.cuda.set_device(smp.local_rank())
    device = torch.device("cuda")
    # Each tensor-parallel rank initialises its own slice of the distributed layers.
    set_seed(args.seed + smp.tp_rank())
    model = smp.DistributedModel(model, trace_device="gpu")

    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if name.endswith("bias") or "ln" in name else decay).append(parameter)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
        betas=(0.9, 0.95),
    )
    optimizer = smp.DistributedOptimizer(optimizer)
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, learning_rate_schedule(args))
    memory_report("after model creation")
    return model, optimizer, lr_scheduler, device


def optimizer_update(model, optimizer, lr_scheduler, args):
    """One update after the step function returns (every microbatch's gradient is in)."""
    optimizer.step()
    lr_scheduler.step()


# -- evaluation -------------------------------------------------------------------------------------------
def evaluate(model, loader, device, max_batches):
    model.eval()
    losses = deque()
    with torch.no_grad():
        for index, (input_ids, attention_mask) in enumerate(loader):
            if index >= max_batches:
                break
            loss_mb = eval_step(model, input_ids.to(device), attention_mask.to(device))
            losses.append(loss_mb.reduce_mean().item())
    model.train()
    mean = sum(losses) / max(len(losses), 1)
    return replica_mean(mean, device)


# -- phases ---------------------------------------------------------------------------------------------
def warm_up_on_curriculum(args, model, optimizer, lr_scheduler, device):
    """A few hundred steps on short, clean sequences before the web corpus."""
    curriculum = CurriculumDataset(args.curriculum_dir, args.max_context_width)
    warmup_kwargs = {"batch_size": args.train_batch_size, "shuffle": True, "collate_fn": pad_batch}
    warmup_kwargs.update(drop_last=True, num_workers=2, pin_memory=True)  # expect: SMP205 warning
    loader = DataLoader(curriculum, **warmup_kwargs)  # expect: SMP204 hint
    step = 0
    while step < args.curriculum_steps:
        for input_ids, attention_mask in loader:
            optimizer.zero_grad(set_to_none=True)
            loss_mb = train_step(model, input_ids.to(device), attention_mask.to(device))
            loss = loss_mb.reduce_mean()
            optimizer_update(model, optimizer, lr_scheduler, args)
            step += 1
            if step % args.logging_freq == 0:
                log(f"curriculum step {step}: loss {loss.item():.4f}")
            if step >= args.curriculum_steps:
                break
    return step


def pretrain(args, model, optimizer, lr_scheduler, device, total_steps):
    dp_rank, dp_size = data_parallel_rank_and_size(args)
    extension = ".json.gz" if args.zipped_data > 0 else ".json"
    train_paths = [os.path.join(args.training_dir, p) for p in os.listdir(args.training_dir) if p.endswith(extension)]
    val_paths = sorted(os.path.join(args.test_dir, p) for p in os.listdir(args.test_dir) if p.endswith(extension))
    val_loader = create_pretraining_dataloader(
        val_paths[:1], args.val_batch_size, args.max_context_width, seed=args.seed, dp_rank=dp_rank, dp_size=dp_size,
        shuffle=False, zipped=args.zipped_data > 0,
    )
    epoch = 0
    started = time.time()
    while total_steps < args.max_steps:
        for path in shuffled_paths(train_paths, args.seed, epoch):
            train_loader = create_pretraining_dataloader(
                [path], args.train_batch_size, args.max_context_width, seed=args.seed, dp_rank=dp_rank, dp_size=dp_size,
                shuffle=True, zipped=args.zipped_data > 0,
            )
            for input_ids, attention_mask in train_loader:
                optimizer.zero_grad(set_to_none=True)
                loss_mb = train_step(model, input_ids.to(device), attention_mask.to(device))
                loss = loss_mb.reduce_mean()
                optimizer_update(model, optimizer, lr_scheduler, args)
                total_steps += 1
                if total_steps % args.logging_freq == 0:
                    elapsed = time.time() - started
                    tokens = args.train_batch_size * dp_size * args.max_context_width * args.logging_freq
                    log(f"step {total_steps}: loss {loss.item():.4f}, {tokens / elapsed:.0f} tokens/s")
                    started = time.time()
                if total_steps % args.validation_freq == 0:
                    val_loss = evaluate(model, val_loader, device, args.validation_batches)
                    log(f"step {total_steps}: validation loss {val_loss:.4f}, perplexity {math.exp(min(val_loss, 20)):.2f}")
                if total_steps % args.checkpoint_freq == 0:
                    save(args, model, optimizer, total_steps)
                if total_steps >= args.max_steps:
                    break
            if total_steps >= args.max_steps:
                break
        epoch += 1
    return total_steps


def make_finetune_loaders(args, dp_rank, dp_size):
    """The instruction-tuning split and a held-out tenth of it."""
    full = InstructionDataset(os.path.join(args.finetune_dir, "train.jsonl"), args.max_context_width)
    held_out = max(1, len(full) // 10)
    generator = torch.Generator().manual_seed(args.seed)
    train_set, val_set = torch.utils.data.random_split(full, [len(full) - held_out, held_out], generator=generator)
    sampler = DistributedSampler(train_set, num_replicas=dp_size, rank=dp_rank, shuffle=True, seed=args.seed)  # expect: SMP206 error
    train_dl = DataLoader(train_set, batch_size=args.train_batch_size, shuffle=True, drop_last=True, collate_fn=pad_batch)
    val_dl = DataLoader(val_set, batch_size=args.val_batch_size, collate_fn=pad_batch)
    return train_dl, val_dl


def finetune(args, model, optimizer, lr_scheduler, device, total_steps):
    dp_rank, dp_size = data_parallel_rank_and_size(args)
    train_dl, val_dl = make_finetune_loaders(args, dp_rank, dp_size)
    for epoch in range(args.finetune_epochs):
        progress = tqdm(train_dl, desc=f"fine-tune epoch {epoch}") if smp.rank() == 0 else train_dl
        for step, (input_ids, attention_mask) in enumerate(progress):
            optimizer.zero_grad(set_to_none=True)
            loss_mb = train_step(model, input_ids.to(device), attention_mask.to(device))
            loss = loss_mb.reduce_mean()
            optimizer_update(model, optimizer, lr_scheduler, args)
            total_steps += 1
            if step % args.logging_freq == 0:
                log(f"fine-tune epoch {epoch} step {step}: loss {loss.item():.4f}")
        val_loss = evaluate(model, val_dl, device, len(val_dl))
        log(f"fine-tune epoch {epoch}: validation loss {val_loss:.4f}")
    return total_steps


# -- checkpoints ------------------------------------------------------------------------------------------
def save(args, model, optimizer, total_steps):
    """Every rank takes part; the library picks who writes what."""
    smp.save_checkpoint(
        args.checkpoint_dir,
        tag=f"total_steps{total_steps}",
        partial=True,
        model=model,
        optimizer=optimizer,
        user_content={"total_steps": total_steps},
    )


def resume(args, model, optimizer):
    marker = os.path.join(args.checkpoint_dir, "newest")
    if not os.path.exists(marker):
        return 0
    with open(marker, "r", encoding="utf-8") as handle:
        tag = handle.read().strip()
    user_content = smp.resume_from_checkpoint(args.checkpoint_dir, tag=tag, partial=True)
    return user_content["total_steps"] if user_content else 0


def main():
    args = parse_args()
    smp.init()
    log(f"{smp.size()} ranks: tensor parallel {smp.tp_size()}, data parallel {smp.dp_size()}")
    model, optimizer, lr_scheduler, device = build_model(args)
    total_steps = resume(args, model, optimizer)

    if args.curriculum_dir and total_steps == 0:
        total_steps = warm_up_on_curriculum(args, model, optimizer, lr_scheduler, device)
    if args.finetune_dir:
        total_steps = finetune(args, model, optimizer, lr_scheduler, device, total_steps)
    else:
        total_steps = pretrain(args, model, optimizer, lr_scheduler, device, total_steps)

    save(args, model, optimizer, total_steps)
    smp.barrier()
    log(f"done after {total_steps} steps")


if __name__ == "__main__":
    main()
