"""A small GPT whose blocks recompute their activations (written for single-GPU runs)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class CausalSelfAttention(nn.Module):
    def __init__(self, hidden, heads, dropout):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        batch, length, hidden = x.size()
        q, k, v = self.qkv(x).split(hidden, dim=2)
        q = q.view(batch, length, self.heads, hidden // self.heads).transpose(1, 2)
        k = k.view(batch, length, self.heads, hidden // self.heads).transpose(1, 2)
        v = v.view(batch, length, self.heads, hidden // self.heads).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        mask = torch.ones(length, length, device=x.device).tril().bool()
        scores = scores.masked_fill(~mask, float("-inf"))
        attention = self.dropout(F.softmax(scores, dim=-1))
        out = (attention @ v).transpose(1, 2).contiguous().view(batch, length, hidden)
        return self.proj(out)


class Block(nn.Module):
    def __init__(self, hidden, heads, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(hidden)
        self.attention = CausalSelfAttention(hidden, heads, dropout)
        self.ln2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, hidden, layers, heads, max_length, dropout=0.1):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_length, hidden)
        self.blocks = nn.Sequential(*[Block(hidden, heads, dropout) for _ in range(layers)])
        self.ln = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.current_step = 0

    def forward(self, input_ids, labels=None):
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        x = self.embed(input_ids) + self.position(positions)
        for block in self.blocks:
            x = checkpoint(block, x)  # expect: SMP408 warning
        logits = self.head(self.ln(x))
        if labels is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))
