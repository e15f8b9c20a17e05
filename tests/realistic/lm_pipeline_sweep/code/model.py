"""A small decoder-only language model built from standard PyTorch layers.

The pipeline partitions it by module, so the layers are kept as a flat ``nn.ModuleList`` the
auto-partitioner can split evenly.
"""

import math

import torch
import torch.nn as nn


class CausalBlock(nn.Module):
    def __init__(self, hidden: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(hidden)
        self.attention = nn.MultiheadAttention(hidden, heads, dropout=dropout, batch_first=True)
        self.norm2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(
            nn.Linear(hidden, 4 * hidden),
            nn.GELU(),
            nn.Linear(4 * hidden, hidden),
            nn.Dropout(dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.size(1)
        mask = torch.triu(torch.ones(length, length, device=x.device, dtype=torch.bool), diagonal=1)
        h = self.norm1(x)
        attended, _ = self.attention(h, h, h, attn_mask=mask, need_weights=False)
        x = x + attended
        return x + self.mlp(self.norm2(x))


class LanguageModel(nn.Module):
    def __init__(self, vocab: int, hidden: int, layers: int, heads: int, context: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(context, hidden)
        self.blocks = nn.ModuleList(CausalBlock(hidden, heads, dropout) for _ in range(layers))
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.size(1), device=tokens.device).unsqueeze(0)
        x = self.embed(tokens) + self.position(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def parameter_count(model: nn.Module) -> str:
    total = sum(p.numel() for p in model.parameters())
    return f"{total / 1e6:.1f}M" if total < 1e9 else f"{total / 1e9:.2f}B"


def perplexity(loss: float) -> float:
    return math.exp(min(loss, 20.0))
