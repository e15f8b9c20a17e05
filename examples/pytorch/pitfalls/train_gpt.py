"""Train a GPT-style language model with SageMaker model parallelism (SMP v1).

Tensor parallelism splits the transformer layers across the GPUs of a node; the launcher
sets the degrees. This script has the mistakes smpfix finds; ../correct/train_gpt.py is the
same script done right.
"""

import argparse
import math
import os
import time

import numpy as np
import smdistributed.modelparallel.torch as smp
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class TokenDataset(Dataset):
    """Fixed-length windows over a pre-tokenized corpus stored as a .npy array."""

    def __init__(self, path, seq_len):
        self.tokens = np.load(path, mmap_mode="r")
        self.seq_len = seq_len

    def __len__(self):
        return (len(self.tokens) - 1) // self.seq_len

    def __getitem__(self, index):
        start = index * self.seq_len
        window = torch.from_numpy(np.asarray(self.tokens[start : start + self.seq_len + 1], dtype=np.int64))
        return window[:-1], window[1:]


class Block(nn.Module):
    def __init__(self, hidden, heads, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(hidden)
        self.attn = nn.MultiheadAttention(hidden, heads, dropout=dropout, batch_first=True)
        self.ln2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))

    def forward(self, x, mask):
        h = self.ln1(x)
        attn_out, attn_weights = self.attn(h, h, h, attn_mask=mask, need_weights=True)
        x = x + attn_out
        x = x + self.mlp(self.ln2(x))
        return x, attn_weights


class GPT(nn.Module):
    def __init__(self, vocab, hidden, layers, heads, seq_len, dropout=0.1):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq_len, hidden)
        self.blocks = nn.ModuleList([Block(hidden, heads, dropout) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        mask = torch.triu(torch.full((seq_len, seq_len), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask)

    def forward(self, input_ids):
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        x = self.embed(input_ids) + self.pos(positions)
        attentions = []
        for block in self.blocks:
            x, attn = block(x, self.mask)
            attentions.append(attn)
        hidden_states = self.ln_f(x)
        logits = self.head(hidden_states)
        return logits, hidden_states, attentions


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train-data", default=os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    parser.add_argument("--checkpoint-dir", default="/opt/ml/checkpoints")
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--save-every", type=int, default=500)
    return parser.parse_args()


@smp.step
def train_step(model, input_ids, labels):
    logits, _, _ = model(input_ids)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))
    loss.backward()
    return loss


@smp.step
def eval_step(model, input_ids, labels):
    logits, _, _ = model(input_ids)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))


def save(model, optimizer, args, step):
    path = os.path.join(args.checkpoint_dir, f"step_{step}.pt")
    if smp.dp_rank() == 0:
        smp.save(
            {"model": model.local_state_dict(), "optimizer": optimizer.local_state_dict(), "step": step},
            path,
            partial=True,
        )
    smp.barrier()


def evaluate(model, loader):
    model.eval()
    total, batches = 0.0, 0
    with torch.no_grad():
        for input_ids, labels in loader:
            input_ids, labels = input_ids.cuda(), labels.cuda()
            total += eval_step(model, input_ids, labels).item()
            batches += 1
    model.train()
    return total / max(batches, 1)


def main():
    args = parse_args()
    smp.init()
    torch.cuda.set_device(smp.rank())
    torch.manual_seed(args.seed)

    with smp.tensor_parallelism():
        model = GPT(args.vocab, args.hidden, args.layers, args.heads, args.seq_len)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    model = smp.DistributedModel(model)
    optimizer = smp.DistributedOptimizer(optimizer)

    train_set = TokenDataset(os.path.join(args.train_data, "train.npy"), args.seq_len)
    valid_set = TokenDataset(os.path.join(args.train_data, "valid.npy"), args.seq_len)
    sampler = torch.utils.data.distributed.DistributedSampler(
        train_set, num_replicas=smp.dp_size(), rank=smp.dp_rank(), shuffle=True, seed=args.seed
    )
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, num_workers=0)
    valid_loader = DataLoader(valid_set, batch_size=args.batch_size, drop_last=True)

    step = 0
    start = time.time()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for input_ids, labels in train_loader:
            input_ids, labels = input_ids.cuda(), labels.cuda()
            optimizer.zero_grad(set_to_none=True)
            loss = train_step(model, input_ids, labels).reduce_mean()
            optimizer.step()
            step += 1
            if smp.rank() == 0 and step % 50 == 0:
                elapsed = time.time() - start
                print(f"epoch {epoch} step {step} loss {loss.item():.4f} ppl {math.exp(loss.item()):.1f} {elapsed:.0f}s")
            if step % args.save_every == 0:
                save(model, optimizer, args, step)
        valid_loss = evaluate(model, valid_loader)
        if smp.rank() == 0:
            print(f"epoch {epoch} validation loss {valid_loss:.4f}")
            smp.save_checkpoint(args.checkpoint_dir, tag=f"epoch_{epoch}", model=model, optimizer=optimizer)
    save(model, optimizer, args, step)


if __name__ == "__main__":
    main()
