"""A generated SMP v1 project shaped like the official examples, to measure what real code costs.

Real SMP projects are not a folder of short independent scripts. An official example folder
holds training scripts of 1,000 to 1,500 lines (an argument parser with a hundred flags, the
model's classes, the data pipeline, ``@smp.step`` train and evaluation steps, a training
loop with logging, evaluation and checkpoints, rank guards, tensor parallelism, fp16), helper
modules that several scripts import (``from data_pipeline import ...``; the checkpoint and
memory helpers call the library themselves), and the launchers that start the scripts: a
Python file or, more often, a Jupyter notebook with markdown, ``%pip install`` magics and a
cell that builds a ``sagemaker.pytorch.PyTorch`` estimator with the library's
``distribution`` and the scripts' ``hyperparameters``.

This writes such a tree from templates, fresh for each seed (no real project's code is
copied): ``src/`` holds ``--scripts`` training scripts (1,000-1,500 lines each) and
``--helpers`` helper modules, and the folder holds one launcher per script, every other one
a notebook. As real code does, a few scripts and launchers carry a mistake the rules report
(a checkpoint guarded by ``dp_rank`` under tensor parallelism, a loader that keeps its last
short batch, a tensor-parallel degree that does not divide the GPUs, ...), so the
measurement includes locating and reporting findings.

    python benchmarks/project_tree.py OUT_DIR [--scripts 10] [--helpers 8] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from pathlib import Path
from string import Template

SCRIPT_LINES = (1000, 1500)
HELPER_LINES = (150, 700)

HELPER_NAMES = (
    "data_pipeline",
    "learning_rates",
    "memory_tracker",
    "checkpoints",
    "model_config",
    "sdp_utils",
    "metrics",
    "tokenization",
    "optim_utils",
    "distributed_utils",
    "logging_utils",
    "schedules",
)
# What each helper module offers the scripts, by the kind of template it is built from.
_HELPER_KIND = {
    "data_pipeline": "data",
    "learning_rates": "schedule",
    "memory_tracker": "memory",
    "checkpoints": "checkpoint",
    "model_config": "config",
    "sdp_utils": "distributed",
    "metrics": "metrics",
    "tokenization": "tokenizer",
    "optim_utils": "schedule",
    "distributed_utils": "distributed",
    "logging_utils": "metrics",
    "schedules": "schedule",
}
# Helpers that call the library (rank queries, smp.save), as the official memory and
# checkpoint helpers do.
_SMP_KINDS = frozenset({"memory", "checkpoint", "distributed"})

# Mistakes real scripts have, each one a rule's finding; a script gets none, one or two.
SCRIPT_PITFALLS = (
    "dp_rank_guard",  # SMP301: a checkpoint saved where dp_rank() == 0 under tensor parallelism
    "no_drop_last",  # SMP201: the evaluation loader keeps its last, shorter batch
    "global_rank_sampler",  # SMP202: the sampler shards by smp.rank() and smp.size()
    "tensor_backward",  # SMP402: loss.backward() inside the step
    "device_by_rank",  # SMP107: torch.cuda.set_device(smp.rank())
    "same_seed",  # SMP501: the model initialised with one seed on every tensor-parallel rank
)
# Mistakes of launchers: a degree that does not divide the GPUs, tensor parallelism
# without ddp, more processes than GPUs.
LAUNCHER_PITFALLS = ("odd_degree", "no_ddp", "too_many_processes")

_FAMILIES = (
    ("Gpt", "GPT-2"),
    ("NeoX", "GPT-NeoX"),
    ("Bloom", "BLOOM"),
    ("Falcon", "Falcon"),
    ("Llama", "LLaMA"),
    ("Opt", "OPT"),
    ("Mpt", "MPT"),
    ("Pythia", "Pythia"),
)


def _fill(template: str, **values: object) -> str:
    return Template(template).substitute({key: str(value) for key, value in values.items()})


@dataclass(frozen=True)
class _Script:
    """The choices one training script is built from."""

    number: int
    prefix: str
    title: str
    hidden: int
    heads: int
    layers: int
    vocab: int
    seq: int
    init_dict: bool
    model_creation: bool
    pitfalls: frozenset[str]
    # Helper module -> the kind of template it was built from, for the helpers it imports.
    imports: dict[str, str]


# -- the training script's parts ------------------------------------------------------------------

_HEADER = '''"""Pre-training and fine-tuning of $title-style language models with SageMaker model parallelism.

Script $number of this project. The launcher (a notebook or a Python file next to src/) sets
the parallel degrees; this script reads them through the command line and smp.init, builds
the model under the library's tensor parallelism, and trains it with a $schedule learning-rate
schedule, periodic evaluation and partial checkpoints.
"""

# Copyright the authors of this example project. Licensed under the Apache License 2.0.

import argparse
import collections
import json
import logging
import math
import os
import re
import time
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import smdistributed.modelparallel.torch as smp
from torch.utils.data import DataLoader, Dataset
$helper_imports

logging.basicConfig(
    format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    level=logging.INFO,
)
logger = logging.getLogger("train_$number")

_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
_PRESETS = {
$presets}
'''

_CONFIG = '''

class ${P}Config:
    """Hyper-parameters of the model, from a preset name or the command line."""

    def __init__(
        self,
        vocab_size=$vocab,
        hidden_width=$hidden,
        num_layers=$layers,
        num_heads=$heads,
        max_context_width=$seq,
        intermediate_factor=$factor,
        dropout=$dropout,
        layer_norm_epsilon=$eps,
        initializer_range=$init_range,
        tie_word_embeddings=$tie,
    ):
        self.vocab_size = vocab_size
        self.hidden_width = hidden_width
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.max_context_width = max_context_width
        self.intermediate_factor = intermediate_factor
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.tie_word_embeddings = tie_word_embeddings

    @classmethod
    def from_args(cls, args):
        preset = _PRESETS.get(args.model_preset, {})
        return cls(
            vocab_size=args.vocab_size,
            hidden_width=preset.get("hidden_width", args.hidden_width),
            num_layers=preset.get("num_layers", args.num_layers),
            num_heads=preset.get("num_heads", args.num_heads),
            max_context_width=args.max_context_width,
            dropout=args.dropout,
            initializer_range=args.initializer_range,
        )

    @property
    def head_dim(self):
        return self.hidden_width // self.num_heads

    @property
    def intermediate_width(self):
        return self.intermediate_factor * self.hidden_width

    def num_parameters(self):
        per_layer = 4 * self.hidden_width * self.hidden_width + 2 * self.hidden_width * self.intermediate_width
        embeddings = self.vocab_size * self.hidden_width + self.max_context_width * self.hidden_width
        head = 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_width
        return self.num_layers * per_layer + embeddings + head

    def to_dict(self):
        return dict(self.__dict__)

    def __repr__(self):
        fields = ", ".join(f"{key}={value}" for key, value in sorted(self.__dict__.items()))
        return f"${P}Config({fields})"
'''

_ATTENTION = '''

class ${P}Attention(nn.Module):
    """Causal self-attention; under smp.tensor_parallelism the library splits its heads."""

    def __init__(self, config, layer_index):
        super().__init__()
        self.num_heads = config.num_heads
        self.head_dim = config.head_dim
        self.layer_index = layer_index
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.query_key_value = nn.Linear(config.hidden_width, 3 * config.hidden_width, bias=$bias)
        self.dense = nn.Linear(config.hidden_width, config.hidden_width, bias=$bias)
        self.attention_dropout = nn.Dropout(config.dropout)
        self.output_dropout = nn.Dropout(config.dropout)
        width = config.max_context_width
        causal = torch.tril(torch.ones(width, width, dtype=torch.bool)).view(1, 1, width, width)
        self.register_buffer("causal_mask", causal, persistent=False)

    def _split_heads(self, tensor):
        batch, length, _ = tensor.size()
        return tensor.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

    def _merge_heads(self, tensor):
        batch, _, length, _ = tensor.size()
        return tensor.transpose(1, 2).contiguous().view(batch, length, self.num_heads * self.head_dim)

    def forward(self, hidden_states, attention_mask=None, rotary=None):
        length = hidden_states.size(1)
        query, key, value = self.query_key_value(hidden_states).chunk(3, dim=-1)
        query, key, value = self._split_heads(query), self._split_heads(key), self._split_heads(value)
        if rotary is not None:
            query, key = rotary(query, key)
        scores = torch.matmul(query, key.transpose(-1, -2)) * self.scale
        lowest = torch.finfo(scores.dtype).min
        scores = scores.masked_fill(~self.causal_mask[:, :, :length, :length], lowest)
        if attention_mask is not None:
            scores = scores + (1.0 - attention_mask[:, None, None, :].to(scores.dtype)) * lowest
        probabilities = F.softmax(scores.float(), dim=-1).to(value.dtype)
        probabilities = self.attention_dropout(probabilities)
        context = self._merge_heads(torch.matmul(probabilities, value))
        return self.output_dropout(self.dense(context))
'''

_ROTARY = '''

class ${P}RotaryEmbedding(nn.Module):
    """Rotary position embedding applied to queries and keys."""

    def __init__(self, head_dim, max_positions=$seq, base=$base):
        super().__init__()
        inverse = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.register_buffer("inverse_frequency", inverse, persistent=False)
        self.max_positions = max_positions
        self._cached_length = 0
        self._cos = None
        self._sin = None

    def _update(self, length, device, dtype):
        if length <= self._cached_length and self._cos is not None and self._cos.device == device:
            return
        positions = torch.arange(length, device=device, dtype=self.inverse_frequency.dtype)
        angles = torch.einsum("i,j->ij", positions, self.inverse_frequency)
        table = torch.cat((angles, angles), dim=-1)
        self._cos = table.cos()[None, None, :, :].to(dtype)
        self._sin = table.sin()[None, None, :, :].to(dtype)
        self._cached_length = length

    @staticmethod
    def _rotate_half(tensor):
        first, second = tensor.chunk(2, dim=-1)
        return torch.cat((-second, first), dim=-1)

    def forward(self, query, key):
        length = query.size(-2)
        self._update(length, query.device, query.dtype)
        cos, sin = self._cos[:, :, :length, :], self._sin[:, :, :length, :]
        return (
            query * cos + self._rotate_half(query) * sin,
            key * cos + self._rotate_half(key) * sin,
        )
'''

_MLP = '''

class ${P}MLP(nn.Module):
    """The feed-forward part of a block: widen, $activation, narrow."""

    def __init__(self, config):
        super().__init__()
        self.dense_in = nn.Linear(config.hidden_width, config.intermediate_width)
        self.dense_out = nn.Linear(config.intermediate_width, config.hidden_width)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, hidden_states):
        hidden_states = F.$activation(self.dense_in(hidden_states))
        return self.dropout(self.dense_out(hidden_states))
'''

_GATED_MLP = '''

class ${P}GatedMLP(nn.Module):
    """A gated feed-forward variant: the product of two projections, then narrowed."""

    def __init__(self, config):
        super().__init__()
        width = int(2 * config.intermediate_width / 3)
        width = $multiple * ((width + $multiple - 1) // $multiple)
        self.gate = nn.Linear(config.hidden_width, width, bias=False)
        self.up = nn.Linear(config.hidden_width, width, bias=False)
        self.down = nn.Linear(width, config.hidden_width, bias=False)

    def forward(self, hidden_states):
        return self.down(F.silu(self.gate(hidden_states)) * self.up(hidden_states))
'''

_RMS_NORM = '''

class ${P}RMSNorm(nn.Module):
    """Root-mean-square normalisation, without a mean or a bias."""

    def __init__(self, width, eps=$eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, hidden_states):
        variance = hidden_states.float().pow(2).mean(-1, keepdim=True)
        normalised = hidden_states.float() * torch.rsqrt(variance + self.eps)
        return self.weight * normalised.to(hidden_states.dtype)
'''

_BLOCK = '''

class ${P}Block(nn.Module):
    """One transformer layer, $layout."""

    def __init__(self, config, layer_index):
        super().__init__()
        self.input_norm = nn.LayerNorm(config.hidden_width, eps=config.layer_norm_epsilon)
        self.attention = ${P}Attention(config, layer_index)
        self.post_attention_norm = nn.LayerNorm(config.hidden_width, eps=config.layer_norm_epsilon)
        self.mlp = ${P}MLP(config)
        self.parallel_residual = $parallel

    def forward(self, hidden_states, attention_mask=None, rotary=None):
        residual = hidden_states
        attended = self.attention(self.input_norm(hidden_states), attention_mask, rotary)
        if self.parallel_residual:
            return residual + attended + self.mlp(self.post_attention_norm(hidden_states))
        hidden_states = residual + attended
        return hidden_states + self.mlp(self.post_attention_norm(hidden_states))
'''

_MODEL = '''

class ${P}Model(nn.Module):
    """Embeddings, $layers_word blocks and a final norm."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_width)
        self.position_embeddings = nn.Embedding(config.max_context_width, config.hidden_width)
        self.embedding_dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList([${P}Block(config, index) for index in range(config.num_layers)])
        self.final_norm = nn.LayerNorm(config.hidden_width, eps=config.layer_norm_epsilon)
        self.rotary = $rotary

    def forward(self, input_ids, attention_mask=None):
        length = input_ids.size(1)
        positions = torch.arange(length, device=input_ids.device).unsqueeze(0)
        hidden_states = self.word_embeddings(input_ids)
        if self.rotary is None:
            hidden_states = hidden_states + self.position_embeddings(positions)
        hidden_states = self.embedding_dropout(hidden_states)
        for block in self.blocks:
            hidden_states = block(hidden_states, attention_mask, self.rotary)
        return self.final_norm(hidden_states)


class ${P}ForCausalLM(nn.Module):
    """The language model: the transformer and a head over the vocabulary."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = ${P}Model(config)
        self.lm_head = nn.Linear(config.hidden_width, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.transformer.word_embeddings.weight
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=self.config.initializer_range)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=self.config.initializer_range)
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)

    def forward(self, input_ids, attention_mask=None):
        return self.lm_head(self.transformer(input_ids, attention_mask))
'''

_LOSS = '''

def language_model_loss(logits, input_ids, label_smoothing=0.0, ignore_index=$ignore):
    """Next-token cross entropy: the logits at position i predict the token at i + 1."""
    shifted = logits[..., :-1, :].contiguous()
    labels = input_ids[..., 1:].contiguous()
    return F.cross_entropy(
        shifted.view(-1, shifted.size(-1)).float(),
        labels.view(-1),
        ignore_index=ignore_index,
        label_smoothing=label_smoothing,
    )
'''

_UTILITIES = {
    "num_params": '''

def compute_num_params(model):
    """Parameters of the model, counted once even when tied."""
    seen = set()
    total = 0
    for parameter in model.parameters():
        if id(parameter) in seen:
            continue
        seen.add(id(parameter))
        total += np.prod(parameter.size())
    return int(total)
''',
    "tflops": '''

def compute_tflops(throughput, num_params, num_gpus, seq_len, checkpointing=$checkpointing):
    """Model TFLOPS per GPU: 6 (8 with recomputed activations) FLOPs per parameter and token."""
    factor = 8 if checkpointing else 6
    tflops = factor * throughput * num_params / num_gpus * seq_len * 1e-12
    if smp.rank() == 0:
        logger.info("Throughput %.2f samples/s, %.2f TFLOPS per GPU", throughput, tflops)
    return tflops
''',
    "param_groups": '''

def get_param_groups_by_weight_decay(module, no_decay=("bias", "norm", "embeddings")):
    """Two parameter groups: with weight decay, and without (biases, norms, embeddings)."""
    decay, skip = [], []
    for name, parameter in module.named_parameters():
        if not parameter.requires_grad:
            continue
        if any(part in name.lower() for part in no_decay) or parameter.dim() == 1:
            skip.append(parameter)
        else:
            decay.append(parameter)
    return [{"params": decay}, {"params": skip, "weight_decay": 0.0}]
''',
    "env": '''

def _show_env_vars(rank: Optional[int] = 0):
    """Log the environment the launcher gave this process (on one rank, or on every one)."""
    if rank is None or smp.rank() == rank:
        shown = {key: value for key, value in os.environ.items() if key.startswith(("SM_", "NCCL_", "OMPI_"))}
        for key in sorted(shown):
            logger.info("env %s=%s", key, shown[key])
''',
    "seed": '''

def set_seed(seed):
    """Seed every generator this process uses."""
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
''',
    "timer": '''

class StepTimer:
    """Wall time of the last $window steps, for throughput."""

    def __init__(self, window=$window):
        self.window = window
        self.durations = collections.deque(maxlen=window)
        self._started = None

    def start(self):
        torch.cuda.synchronize()
        self._started = time.time()

    def stop(self):
        torch.cuda.synchronize()
        if self._started is not None:
            self.durations.append(time.time() - self._started)
        self._started = None

    @property
    def mean(self):
        return sum(self.durations) / len(self.durations) if self.durations else 0.0

    def throughput(self, samples):
        return samples / self.mean if self.mean else 0.0
''',
    "format": '''

def format_seconds(seconds):
    """1h02m03s, for the log."""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{seconds:02d}s"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
''',
    "average": '''

class RunningAverage:
    """Exponential moving average of a logged value, bias-corrected."""

    def __init__(self, beta=$beta):
        self.beta = beta
        self.value = 0.0
        self.count = 0

    def update(self, observed):
        self.count += 1
        self.value = self.beta * self.value + (1.0 - self.beta) * float(observed)
        return self.corrected

    @property
    def corrected(self):
        return self.value / (1.0 - self.beta**self.count) if self.count else 0.0
''',
    "args_json": '''

def save_arguments(args, folder):
    """Write the arguments next to the checkpoints (on one rank), to resume with the same ones."""
    if smp.rank() != 0:
        return
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "arguments.json"), "w") as handle:
        json.dump(vars(args), handle, indent=2, sort_keys=True)
''',
    "grad_norm": '''

def gradient_norm(model, norm_type=2.0):
    """The norm of this rank's gradients, for the log (not for clipping)."""
    norms = [parameter.grad.detach().norm(norm_type) for parameter in model.parameters() if parameter.grad is not None]
    if not norms:
        return 0.0
    return torch.norm(torch.stack(norms), norm_type).item()
''',
    "partition": '''

def parse_partition_assignment(text, num_layers, pp_size):
    """A manual partition given as "2,2,3,3": the number of layers per pipeline stage."""
    if not text:
        base, extra = divmod(num_layers, pp_size)
        return [base + (1 if stage >= pp_size - extra else 0) for stage in range(pp_size)]
    counts = [int(part) for part in re.split(r"[,;\\s]+", text.strip()) if part]
    if len(counts) != pp_size or sum(counts) != num_layers:
        raise ValueError(f"partition {text!r} does not split {num_layers} layers into {pp_size} stages")
    return counts
''',
    "token_stats": '''

def count_tokens(batch, pad_token_id=$pad):
    """Tokens in a batch that are not padding."""
    input_ids = batch[0] if isinstance(batch, (list, tuple)) else batch["input_ids"]
    return int((input_ids != pad_token_id).sum().item())
''',
}

_LOCAL_DATA = '''

class ${P}TokenDataset(Dataset):
    """Windows of $seq tokens over a pre-tokenized shard (a .npy file of token ids)."""

    def __init__(self, path, max_context_width=$seq, stride=$stride):
        self.path = path
        self.max_context_width = max_context_width
        self.stride = stride
        self.tokens = np.load(path, mmap_mode="r") if os.path.exists(path) else np.zeros(4 * max_context_width, dtype=np.int64)

    def __len__(self):
        return max(0, (len(self.tokens) - self.max_context_width - 1) // self.stride)

    def __getitem__(self, index):
        start = index * self.stride
        window = np.asarray(self.tokens[start : start + self.max_context_width], dtype=np.int64)
        input_ids = torch.from_numpy(window)
        return input_ids, torch.ones_like(input_ids)


def list_shards(folder, pattern=r".*\\.npy$$"):
    """The shards of a channel folder, in a fixed order."""
    if not os.path.isdir(folder):
        return []
    return sorted(os.path.join(folder, name) for name in os.listdir(folder) if re.match(pattern, name))


def create_local_dataloader(path, batch_size, max_context_width, seed, dp_rank, dp_size, shuffle=True):
    """A loader over one shard, split between the data-parallel ranks."""
    dataset = ${P}TokenDataset(path, max_context_width)
    sampler = torch.utils.data.distributed.DistributedSampler(
        dataset, $sampler_ranks, shuffle=shuffle, seed=seed
    )
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=$workers,
        pin_memory=True,
        drop_last=True,
    )
'''

_LOCAL_SCHEDULE = '''

class AnnealingLR:
    """Linear warm-up, then $style decay down to a floor."""

    def __init__(self, optimizer, start_lr, warmup_iter, plateau_iter, total_iters, decay_style="$style", min_lr=0.0):
        self.optimizer = optimizer
        self.start_lr = start_lr
        self.warmup_iter = warmup_iter
        self.plateau_iter = plateau_iter
        self.end_iter = total_iters
        self.decay_style = decay_style
        self.min_lr = min_lr
        self.num_iters = 0
        self.step(0)

    def get_lr(self):
        if self.num_iters <= self.warmup_iter:
            return float(self.start_lr) * self.num_iters / max(1, self.warmup_iter)
        if self.num_iters <= self.warmup_iter + self.plateau_iter:
            return float(self.start_lr)
        progress = (self.num_iters - self.warmup_iter - self.plateau_iter) / max(1, self.end_iter)
        progress = min(progress, 1.0)
        if self.decay_style == "linear":
            lr = self.start_lr * (1.0 - progress)
        elif self.decay_style == "cosine":
            lr = self.start_lr / 2.0 * (math.cos(math.pi * progress) + 1)
        elif self.decay_style == "exponential":
            lr = self.start_lr * math.exp(-0.693 * progress)
        else:
            lr = self.start_lr
        return max(lr, self.min_lr)

    def step(self, step_num=None):
        self.num_iters = self.num_iters + 1 if step_num is None else step_num
        new_lr = self.get_lr()
        for group in self.optimizer.param_groups:
            group["lr"] = new_lr

    def state_dict(self):
        return {
            "start_lr": self.start_lr,
            "warmup_iter": self.warmup_iter,
            "num_iters": self.num_iters,
            "decay_style": self.decay_style,
            "end_iter": self.end_iter,
            "min_lr": self.min_lr,
        }

    def load_state_dict(self, state):
        self.start_lr = state["start_lr"]
        self.warmup_iter = state["warmup_iter"]
        self.num_iters = state["num_iters"]
        self.end_iter = state["end_iter"]
        self.decay_style = state["decay_style"]
        self.min_lr = state.get("min_lr", 0.0)
        self.step(self.num_iters)
'''

_SCHEDULER = '''

def get_learning_rate_scheduler(optimizer, args):
    """The schedule the arguments ask for: warm-up as a fraction of the decay, then decay."""
    decay_iters = args.lr_decay_iters if args.lr_decay_iters is not None else args.max_steps
    warmup_iter = int(args.warmup * decay_iters)
    plateau_iter = warmup_iter if args.plateau > 0 else 0
    if smp.rank() == 0:
        logger.info("Learning rate: warm-up %d steps, %s decay over %d", warmup_iter, args.lr_decay_style, decay_iters)
    return AnnealingLR(
        optimizer,
        start_lr=args.lr,
        warmup_iter=warmup_iter,
        plateau_iter=plateau_iter,
        total_iters=decay_iters,
        decay_style=args.lr_decay_style,
        min_lr=args.min_lr,
    )
'''

_STEPS = """

# The library splits each batch into microbatches and pipelines them through the model's
# partitions; everything a step returns comes back as one value per microbatch.
@smp.step
def train_step(model, input_ids, attention_mask, args):
    logits = model(input_ids, attention_mask=attention_mask)
    loss = language_model_loss(logits, input_ids, args.label_smoothing)
    $backward
    return loss


@smp.step
def test_step(model, input_ids, attention_mask):
    logits = model(input_ids, attention_mask=attention_mask)
    return language_model_loss(logits, input_ids)
"""

_EVAL = '''

def eval_model(model, dataloader, num_batches):
    """Mean validation loss over at most num_batches batches, averaged over data-parallel ranks."""
    model.eval()
    total = torch.zeros(1, device=torch.device("cuda"))
    counted = 0
    with torch.no_grad():
        for batch_index, (input_ids, attention_mask) in enumerate(dataloader):
            if batch_index >= num_batches:
                break
            input_ids = input_ids.to(torch.device("cuda"))
            attention_mask = attention_mask.to(torch.device("cuda"))
            total += test_step(model, input_ids, attention_mask).reduce_mean()
            counted += 1
    if counted:
        total /= counted
    dist.all_reduce(total, group=smp.get_dp_process_group())
    total /= smp.dp_size()
    model.train()
    perplexity = math.exp(min(total.item(), 20.0))
    return total.item(), perplexity
'''

_CHECKPOINTS = '''

def save_partial_checkpoint(model, optimizer, lr_scheduler, args, total_steps, start_train_path_index, batch_index):
    """Every rank writes its own part; the user content lets training resume where it stopped."""
    user_content = {
        "cli_args": vars(args),
        "total_steps": total_steps,
        "start_train_path_index": start_train_path_index,
        "start_batch_index": batch_index,
        "lr_scheduler": lr_scheduler.state_dict(),
    }
    smp.save_checkpoint(
        args.checkpoint_dir,
        tag=f"total_steps{total_steps}",
        partial=True,
        model=model,
        optimizer=optimizer,
        user_content=user_content,
        num_kept_partial_checkpoints=args.num_kept_checkpoints,
    )
    if smp.rank() == 0:
        logger.info("Saved a partial checkpoint at step %d in %s", total_steps, args.checkpoint_dir)


def save_model_state(model, optimizer, args, step):
    """The model's and the optimizer's local state, one file per model-parallel rank."""
    path = os.path.join(args.checkpoint_dir, f"state_step{step}.pt")
    if $guard == 0:
        smp.save(
            {"model": model.local_state_dict(), "optimizer": optimizer.local_state_dict(), "step": step},
            path,
            partial=True,
        )
    smp.barrier()


def resume_training(args, lr_scheduler):
    """The step, shard and batch to resume from, and the schedule's state, from a checkpoint."""
    if not args.resume_from_checkpoint:
        return 0, 0, 0
    tag = args.resume_tag or None
    user_content = smp.resume_from_checkpoint(args.resume_from_checkpoint, tag=tag, partial=True)
    lr_scheduler.load_state_dict(user_content["lr_scheduler"])
    if smp.rank() == 0:
        logger.info("Resuming from step %d", user_content["total_steps"])
    return (
        user_content["total_steps"],
        user_content["start_train_path_index"],
        user_content["start_batch_index"],
    )
'''

_TRAIN = '''

def train(model, optimizer, lr_scheduler, config, start_train_path_index, start_batch_index, num_params, total_steps, args):
    """The training loop: shards in order, batches of each shard, evaluation and checkpoints."""
    model.train()
    dp_rank = smp.dp_rank() if not args.prescaled_batch else smp.rdp_rank()
    dp_size = smp.dp_size() if not args.prescaled_batch else smp.rdp_size()
    train_paths = $list_shards(args.training_dir)
    if not train_paths:
        raise ValueError(f"no training shards in {args.training_dir}")
    val_loader = None
    if args.validation_freq:
        val_dataset = ${P}TokenDataset(os.path.join(args.test_dir, "validation.npy"), args.max_context_width)
        val_loader = DataLoader(val_dataset, batch_size=args.val_batch_size, num_workers=$workers, pin_memory=True$val_drop)
    timer = StepTimer()
    throughputs = []
    loss_metric = 0.0
    start = time.time()
    for epoch in range(args.epochs):
        for shard_index in range(start_train_path_index, len(train_paths)):
            loader = $create_loader(
                train_paths[shard_index],
                args.train_batch_size,
                args.max_context_width,
                args.seed + epoch,
                $loader_ranks,
            )
            for batch_index, (input_ids, attention_mask) in enumerate(loader):
                if batch_index < start_batch_index:
                    continue
                start_batch_index = 0
                timer.start()
                input_ids = input_ids.to(torch.device("cuda"))
                attention_mask = attention_mask.to(torch.device("cuda"))
                optimizer.zero_grad(set_to_none=True)
                loss_mb = train_step(model, input_ids, attention_mask, args)
                loss = loss_mb.reduce_mean()
                if args.grad_clip > 0:
                    optimizer.clip_master_grads(args.grad_clip)
                optimizer.step()
                lr_scheduler.step()
                timer.stop()
                total_steps += 1
                throughputs.append(timer.throughput(args.train_batch_size * dp_size))
                if total_steps % args.logging_freq == 0:
                    loss_detached = loss.detach()
                    dist.all_reduce(loss_detached, group=smp.get_dp_process_group())
                    loss_metric = loss_detached.item() / smp.dp_size()
                    if smp.rank() == 0:
                        logger.info(
                            "epoch %d shard %d step %d loss %.4f lr %.3g throughput %.1f samples/s elapsed %s",
                            epoch,
                            shard_index,
                            total_steps,
                            loss_metric,
                            lr_scheduler.get_lr(),
                            throughputs[-1],
                            format_seconds(time.time() - start),
                        )$memory
                if val_loader is not None and total_steps % args.validation_freq == 0:
                    val_loss, val_ppl = eval_model(model, val_loader, args.validation_batches)
                    if smp.rank() == 0:
                        logger.info("step %d validation loss %.4f perplexity %.2f", total_steps, val_loss, val_ppl)
                if args.checkpoint_freq and total_steps % args.checkpoint_freq == 0:
                    $save_call
                if total_steps >= args.max_steps:
                    break
            if total_steps >= args.max_steps:
                break
        if total_steps >= args.max_steps:
            break
    throughput = sum(throughputs[-20:]) / max(1, len(throughputs[-20:]))
    compute_tflops(throughput, num_params, smp.size(), args.max_context_width)
    return total_steps, throughput, loss_metric
'''

_MAIN = """

def main():
    args = parse_args()
$init
    _show_env_vars(0)
    save_arguments(args, args.checkpoint_dir)
    torch.cuda.set_device($device)
    set_seed($seed)
    config = ${P}Config.from_args(args)
    dtype = _DTYPES["fp16" if args.fp16 else "bf16" if args.bf16 else "fp32"]
    if smp.rank() == 0:
        logger.info("Model configuration: %s", config)
        logger.info("Estimated parameters: %.2fB", config.num_parameters() / 1e9)
$creation
    num_params = compute_num_params(model)
    if smp.rank() == 0:
        logger.info("Built the model with %d parameters", num_params)

    model = smp.DistributedModel(model, trace_device="gpu")
    if args.activation_checkpointing:
        for block in model.get_module().transformer.blocks:
            smp.set_activation_checkpointing(block, strategy=args.activation_strategy)

    param_groups = get_param_groups_by_weight_decay(model)
    optimizer = torch.optim.AdamW(
        param_groups, betas=(args.beta1, args.beta2), lr=args.lr, weight_decay=args.weight_decay
    )
    optimizer = smp.DistributedOptimizer(
        optimizer,
        static_loss_scale=None,
        dynamic_loss_scale=True,
        dynamic_loss_args={"scale_window": $scale_window, "min_scale": 1, "delayed_shift": 2},
    )
    lr_scheduler = get_learning_rate_scheduler(optimizer, args)
    total_steps, start_train_path_index, start_batch_index = resume_training(args, lr_scheduler)

    start = time.time()
    total_steps, throughput, loss = train(
        model,
        optimizer,
        lr_scheduler,
        config,
        start_train_path_index,
        start_batch_index,
        num_params,
        total_steps,
        args,
    )
    if smp.rank() == 0:
        logger.info("Trained %d steps in %s, %.1f samples/s", total_steps, format_seconds(time.time() - start), throughput)
    if args.save_final_model:
        save_model_state(model, optimizer, args, total_steps)
    smp.barrier()
    if smp.rank() == 0:
        logger.info("SMP training finished successfully")


if __name__ == "__main__":
    main()
"""

# Flags the code above reads: (name, type, default). Type "bool" is an int flag used as one.
_USED_FLAGS = (
    ("train_batch_size", "int", "4"),
    ("val_batch_size", "int", "4"),
    ("max_steps", "int", "5000"),
    ("epochs", "int", "3"),
    ("seed", "int", "12345"),
    ("lr", "float", "0.0001"),
    ("lr_decay_style", "str", '"linear"'),
    ("lr_decay_iters", "int", "None"),
    ("warmup", "float", "0.01"),
    ("plateau", "float", "0.0"),
    ("min_lr", "float", "0.0"),
    ("weight_decay", "float", "0.01"),
    ("beta1", "float", "0.9"),
    ("beta2", "float", "0.95"),
    ("grad_clip", "float", "1.0"),
    ("label_smoothing", "float", "0.0"),
    ("logging_freq", "int", "10"),
    ("validation_freq", "int", "200"),
    ("validation_batches", "int", "10"),
    ("checkpoint_freq", "int", "1000"),
    ("num_kept_checkpoints", "int", "5"),
    ("checkpoint_dir", "str", '"/opt/ml/checkpoints"'),
    ("resume_from_checkpoint", "str", "None"),
    ("resume_tag", "str", '""'),
    ("save_final_model", "int", "1"),
    ("training_dir", "str", 'os.getenv("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train")'),
    ("test_dir", "str", 'os.getenv("SM_CHANNEL_TEST", "/opt/ml/input/data/test")'),
    ("model_dir", "str", 'os.getenv("SM_MODEL_DIR", "/opt/ml/model")'),
    ("model_preset", "str", '""'),
    ("vocab_size", "int", "50257"),
    ("hidden_width", "int", "768"),
    ("num_layers", "int", "12"),
    ("num_heads", "int", "12"),
    ("max_context_width", "int", "1024"),
    ("dropout", "float", "0.1"),
    ("initializer_range", "float", "0.02"),
    ("fp16", "int", "0"),
    ("bf16", "int", "0"),
    ("prescaled_batch", "int", "0"),
    ("activation_checkpointing", "int", "1"),
    ("activation_strategy", "str", '"each"'),
    ("attention_in_fp32", "int", "0"),
)
# Flags that only the smp.init dict reads.
_INIT_FLAGS = (
    ("tensor_parallel_degree", "int", "1"),
    ("pipeline_parallel_degree", "int", "1"),
    ("microbatches", "int", "1"),
    ("shard_optimizer_state", "int", "0"),
    ("offload_activations", "int", "0"),
    ("delayed_param", "int", "0"),
    ("optimize", "str", '"speed"'),
    ("placement_strategy", "str", '"cluster"'),
    ("ddp_dist_backend", "str", '"auto"'),
)
# Words the other flags of a real script are made of ("--attention_dropout_schedule").
_FLAG_HEADS = (
    "attention",
    "embedding",
    "activation",
    "gradient",
    "optimizer",
    "checkpoint",
    "logging",
    "validation",
    "tokenizer",
    "dataset",
    "shard",
    "memory",
    "profiler",
    "throughput",
    "sequence",
    "position",
    "residual",
    "norm",
    "loss",
    "pipeline",
    "partition",
    "offload",
    "fused",
    "flash",
    "rotary",
    "weight",
    "bias",
    "warmup",
    "decay",
    "sampler",
    "prefetch",
    "cache",
)
_FLAG_TAILS = (
    "dropout",
    "scale",
    "interval",
    "steps",
    "size",
    "factor",
    "threshold",
    "limit",
    "mode",
    "strategy",
    "ratio",
    "epsilon",
    "buckets",
    "horizon",
    "precision",
    "window",
    "enabled",
    "verbose",
    "workers",
    "seed",
    "style",
    "dtype",
    "frequency",
    "budget",
)
_GROUPS = ("training", "model", "data", "checkpointing", "parallelism", "precision", "logging")
# Flags a script has besides those its code reads (real scripts have dozens of them).
_MIN_EXTRA_FLAGS = 40


def _flag_line(name: str, kind: str, default: str, help_text: str) -> str:
    shown = "int" if kind == "bool" else kind
    return (
        f'    group.add_argument("--{name}", type={shown}, default={default}, help="{help_text}")\n'
    )


def _parse_args(r: random.Random, script: _Script, extra_flags: int, model_type: str) -> str:
    flags = [
        *_USED_FLAGS,
        ("model_type", "str", f'"{model_type}"'),
        *(_INIT_FLAGS if script.init_dict else ()),
    ]
    used = {name for name, _, _ in flags}
    pool = [f"{head}_{tail}" for head in _FLAG_HEADS for tail in _FLAG_TAILS]
    r.shuffle(pool)
    extra = []
    for name in pool:
        if len(extra) == extra_flags:
            break
        if name in used:
            continue
        kind = r.choice(["int", "float", "str", "bool"])
        default = {
            "int": str(r.choice([0, 1, 2, 4, 8, 16, 64, 128, 1000])),
            "float": r.choice(["0.0", "0.1", "0.5", "1.0", "1e-05", "0.02"]),
            "str": r.choice(['""', '"auto"', '"none"', '"default"', '"fp32"']),
            "bool": str(r.choice([0, 1])),
        }[kind]
        extra.append((name, kind, default))
    grouped: dict[str, list[tuple[str, str, str]]] = {group: [] for group in _GROUPS}
    for name, kind, default in [*flags, *extra]:
        grouped[r.choice(_GROUPS)].append((name, kind, default))
    text = "\n\ndef parse_args():  # pylint: disable=too-many-statements\n"
    text += '    parser = argparse.ArgumentParser(description="Train a language model with SMP.")\n'
    for group, members in grouped.items():
        if not members:
            continue
        r.shuffle(members)
        text += f'\n    group = parser.add_argument_group("{group}")\n'
        for name, kind, default in members:
            words = name.replace("_", " ")
            text += _flag_line(name, kind, default, f"{words} ({group})")
    text += "\n    args, _ = parser.parse_known_args()\n    return args\n"
    return text


def _init_block(script: _Script) -> str:
    if not script.init_dict:
        return "    smp.init()\n"
    return """    smp_config = {
        "ddp": True,
        "tensor_parallel_degree": args.tensor_parallel_degree,
        "pipeline_parallel_degree": args.pipeline_parallel_degree,
        "microbatches": args.microbatches,
        "shard_optimizer_state": args.shard_optimizer_state > 0,
        "prescaled_batch": args.prescaled_batch > 0,
        "fp16": args.fp16 > 0,
        "bf16": args.bf16 > 0,
        "offload_activations": args.offload_activations > 0,
        "delayed_parameter_initialization": args.delayed_param > 0,
        "optimize": args.optimize,
        "placement_strategy": args.placement_strategy,
        "ddp_dist_backend": args.ddp_dist_backend,
    }
    smp.init(smp_config)
"""


def _creation_block(script: _Script) -> str:
    if script.model_creation:
        return """    with smp.model_creation(
        tensor_parallelism=smp.tp_size() > 1,
        dtype=dtype,
        attention_in_fp32=args.attention_in_fp32 > 0,
    ):
        model = build_model(config, args.model_type)
"""
    return """    with smp.tensor_parallelism(enabled=smp.tp_size() > 1, attention_in_fp32=args.attention_in_fp32 > 0):
        model = build_model(config, args.model_type)
    if args.fp16:
        model = model.half()
    elif args.bf16:
        model = model.to(torch.bfloat16)
"""


_BUILD_MODEL = '''

def build_model(config, model_type):
    """The model ``--model_type`` names, built from the configuration."""
    classes = {
$classes    }
    if model_type not in classes:
        raise ValueError(f"unknown model type {model_type!r}; known: {', '.join(sorted(classes))}")
    if smp.rank() == 0:
        logger.info("Building a %s model", model_type)
    return classes[model_type](config)
'''

# More of what real scripts carry besides the training loop, added while a script has room.
_MORE_UTILITIES = {
    "collator": '''

class CausalLMCollator:
    """Pads a list of samples to the longest one (or to a multiple of $multiple) and masks the padding."""

    def __init__(self, pad_token_id=$pad, pad_to_multiple_of=$multiple):
        self.pad_token_id = pad_token_id
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, samples):
        longest = max(len(sample[0]) for sample in samples)
        if self.pad_to_multiple_of:
            longest = self.pad_to_multiple_of * math.ceil(longest / self.pad_to_multiple_of)
        input_ids = torch.full((len(samples), longest), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(samples), longest), dtype=torch.long)
        for row, (ids, _) in enumerate(samples):
            input_ids[row, : len(ids)] = ids
            attention_mask[row, : len(ids)] = 1
        return input_ids, attention_mask
''',
    "profiler": '''

class StepProfiler:
    """torch.profiler over a few steps of one rank, written for TensorBoard."""

    def __init__(self, folder, wait=$wait, warmup=2, active=3, rank=0):
        self.enabled = smp.rank() == rank
        self.profiler = None
        if self.enabled:
            schedule = torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=1)
            self.profiler = torch.profiler.profile(
                schedule=schedule,
                on_trace_ready=torch.profiler.tensorboard_trace_handler(folder),
                record_shapes=True,
                with_stack=False,
            )

    def __enter__(self):
        if self.profiler is not None:
            self.profiler.__enter__()
        return self

    def __exit__(self, *exc_info):
        if self.profiler is not None:
            self.profiler.__exit__(*exc_info)

    def step(self):
        if self.profiler is not None:
            self.profiler.step()
''',
    "summary": '''

def log_model_summary(model, depth=$depth):
    """Parameters per module type, down to ``depth`` levels, on the first rank."""
    if smp.rank() != 0:
        return
    counts = collections.Counter()
    for name, module in model.named_modules():
        if name.count(".") >= depth:
            continue
        own = sum(parameter.numel() for parameter in module.parameters(recurse=False))
        counts[type(module).__name__] += own
    for kind, total in counts.most_common():
        logger.info("%-32s %12d parameters", kind, total)
''',
    "save_config": '''

def save_model_config(config, folder, name="model_config.json"):
    """The model's configuration beside its checkpoints, written once."""
    if smp.rank() != 0:
        return None
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path, "w") as handle:
        json.dump(config.to_dict(), handle, indent=2, sort_keys=True)
    return path
''',
    "check_batch": '''

def check_batch(input_ids, attention_mask, max_context_width, vocab_size):
    """Fail early, with a message, on a batch the model cannot take."""
    if input_ids.dim() != 2:
        raise ValueError(f"expected a 2-D batch of token ids, got shape {tuple(input_ids.shape)}")
    if input_ids.size(1) > max_context_width:
        raise ValueError(f"sequence of {input_ids.size(1)} tokens exceeds {max_context_width}")
    if attention_mask is not None and attention_mask.shape != input_ids.shape:
        raise ValueError("attention mask and input ids differ in shape")
    largest = int(input_ids.max().item())
    if largest >= vocab_size:
        raise ValueError(f"token id {largest} is outside the vocabulary of {vocab_size}")
''',
    "lr_table": '''

def learning_rate_table(scheduler_class, steps, every=$every, **kwargs):
    """The learning rate every ``every`` steps, to check a schedule before a long job."""
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=kwargs.get("start_lr", 1.0))
    scheduler = scheduler_class(optimizer, **kwargs)
    table = []
    for step in range(0, steps + 1, every):
        scheduler.step(step)
        table.append((step, optimizer.param_groups[0]["lr"]))
    return table
''',
    "breakdown": '''

class WallClockBreakdown:
    """Time spent in named parts of a step (data, forward-backward, optimizer), averaged."""

    def __init__(self):
        self.totals = collections.defaultdict(float)
        self.counts = collections.defaultdict(int)
        self._started = {}

    def start(self, name):
        self._started[name] = time.time()

    def stop(self, name):
        started = self._started.pop(name, None)
        if started is not None:
            self.totals[name] += time.time() - started
            self.counts[name] += 1

    def report(self):
        parts = [f"{name} {self.totals[name] / self.counts[name] * 1000:.1f} ms" for name in sorted(self.totals)]
        return ", ".join(parts)
''',
}


def _helper_imports(script: _Script) -> tuple[str, dict[str, str]]:
    """The script's imports of the project's helpers, and what each part of the script is
    called: imported, or defined in the script itself."""
    lines = []
    names = {
        "create_loader": "create_local_dataloader",
        "list_shards": "list_shards",
        "save_call": "save_partial_checkpoint(model, optimizer, lr_scheduler, args, total_steps, shard_index, batch_index)",
        "memory": "",
    }
    seen: set[str] = set()
    for module, kind in sorted(script.imports.items()):
        if kind in seen:  # a second helper of the same kind: imported as a module
            lines.append(f"import {module}")
            continue
        seen.add(kind)
        if kind == "data":
            lines.append(
                f"from {module} import create_pretraining_dataloader, list_training_shards"
            )
            names["create_loader"] = "create_pretraining_dataloader"
            names["list_shards"] = "list_training_shards"
        elif kind == "schedule":
            lines.append(f"from {module} import warmup_fraction")
        elif kind == "memory":
            lines.append(f"from {module} import memory_status")
            names["memory"] = (
                "\n                    if args.logging_freq and total_steps % (10 * args.logging_freq) == 0:\n"
                '                        memory_status(msg="after step {}".format(total_steps))'
            )
        elif kind == "checkpoint":
            lines.append(f"import {module}")
            names["save_call"] = (
                f"{module}.save_training_checkpoint(model, optimizer, lr_scheduler, args, total_steps, shard_index, batch_index)"
            )
        elif kind == "config":
            lines.append(f"from {module} import preset_names")
        elif kind == "distributed":
            lines.append(f"from {module} import log_world")
        elif kind == "tokenizer":
            lines.append(f"from {module} import load_tokenizer")
        else:
            lines.append(f"import {module}")
    return "\n".join(lines), names


def _family(r: random.Random, prefix: str, script: _Script) -> str:
    """One model architecture: attention (with rotary embeddings or not), MLP, block, model."""
    rotary = r.random() < 0.5
    text = _fill(_ATTENTION, P=prefix, bias=r.choice(["True", "False"]))
    if rotary:
        text += _fill(_ROTARY, P=prefix, seq=script.seq, base=r.choice([10000, 500000]))
    text += _fill(_MLP, P=prefix, activation=r.choice(["gelu", "relu", "silu"]))
    text += _fill(
        _BLOCK,
        P=prefix,
        layout=r.choice(["pre-norm", "pre-norm with a parallel residual"]),
        parallel=r.choice(["True", "False"]),
    )
    text += _fill(
        _MODEL,
        P=prefix,
        layers_word=r.choice(["num_layers", "the configured"]),
        rotary=f"{prefix}RotaryEmbedding(config.head_dim)" if rotary else "None",
    )
    return text


def _script(r: random.Random, script: _Script, lines: int) -> str:
    """A training script of ``lines`` lines: the parts every script has, then, while there is
    room, more model architectures and utilities, and the argument parser takes the rest
    (at least 40 flags besides those the code reads, as real scripts have)."""
    imports, names = _helper_imports(script)
    presets = "".join(
        f'    "{script.prefix.lower()}-{size}": {{"hidden_width": {width}, "num_layers": {layers}, "num_heads": {heads}}},\n'
        for size, width, layers, heads in (
            ("small", 768, 12, 12),
            ("medium", 1024, 24, 16),
            ("large", 1536, 24, 16),
            ("xl", 2048, 24, 32),
            ("7b", 4096, 32, 32),
        )
        if r.random() < 0.8
    )
    workers = r.choice([0, 0, 2, 4])
    values = dict(
        P=script.prefix,
        vocab=script.vocab,
        hidden=script.hidden,
        layers=script.layers,
        heads=script.heads,
        seq=script.seq,
        factor=r.choice([4, 4, 8]),
        dropout=r.choice(["0.0", "0.1"]),
        eps=r.choice(["1e-05", "1e-06"]),
        init_range=r.choice(["0.02", "0.006"]),
        tie=r.choice(["True", "False"]),
    )
    utility_values = dict(
        checkpointing=r.choice(["True", "False"]),
        window=r.choice([20, 50, 100]),
        beta=r.choice(["0.9", "0.98"]),
        pad=r.choice([0, 1, 50256]),
        multiple=r.choice([8, 64]),
        wait=r.choice([1, 5]),
        depth=r.choice([2, 3]),
        every=r.choice([100, 1000]),
    )
    head = _fill(
        _HEADER,
        title=script.title,
        number=script.number,
        schedule=r.choice(["linear", "cosine"]),
        helper_imports=imports,
        presets=presets,
    )
    model = _fill(_CONFIG, **values) + _family(r, script.prefix, script)
    model += _fill(_LOSS, ignore=r.choice([-100, 0]))
    sampler_ranks = (
        "num_replicas=smp.size(), rank=smp.rank()"
        if "global_rank_sampler" in script.pitfalls
        else "num_replicas=dp_size, rank=dp_rank"
    )
    data = _fill(
        _LOCAL_DATA,
        P=script.prefix,
        seq=script.seq,
        stride=script.seq // r.choice([1, 2]),
        sampler_ranks=sampler_ranks,
        workers=workers,
    )
    schedule = (
        _fill(_LOCAL_SCHEDULE, style=r.choice(["linear", "cosine", "exponential"])) + _SCHEDULER
    )
    steps = _fill(
        _STEPS,
        backward="loss.backward()"
        if "tensor_backward" in script.pitfalls
        else "model.backward(loss)",
    )
    guard = "smp.dp_rank()" if "dp_rank_guard" in script.pitfalls else "smp.rdp_rank()"
    checkpoints = _fill(_CHECKPOINTS, guard=guard)
    loader_ranks = (
        "smp.rank(), smp.size()"
        if "global_rank_sampler" in script.pitfalls
        and names["create_loader"] != "create_local_dataloader"
        else "dp_rank, dp_size"
    )
    train = _fill(
        _TRAIN,
        P=script.prefix,
        list_shards=names["list_shards"],
        create_loader=names["create_loader"],
        loader_ranks=loader_ranks,
        workers=workers,
        val_drop="" if "no_drop_last" in script.pitfalls else ", drop_last=True",
        memory=names["memory"],
        save_call=names["save_call"],
    )
    main = _fill(
        _MAIN,
        P=script.prefix,
        init=_init_block(script).rstrip("\n"),
        device="smp.rank()" if "device_by_rank" in script.pitfalls else "smp.local_rank()",
        seed="args.seed" if "same_seed" in script.pitfalls else "args.seed + smp.tp_rank()",
        creation=_creation_block(script).rstrip("\n"),
        scale_window=r.choice([1000, 2000]),
    )
    required = (
        "num_params",
        "tflops",
        "param_groups",
        "env",
        "seed",
        "timer",
        "format",
        "args_json",
    )
    utilities = [_fill(_UTILITIES[key], **utility_values) for key in required]
    # What a script may carry besides: other architectures (``--model_type``), utilities.
    optional = [
        _fill(text, **utility_values)
        for key, text in [*_UTILITIES.items(), *_MORE_UTILITIES.items()]
        if key not in required
    ]
    families = [prefix for prefix, _ in _FAMILIES if prefix != script.prefix]
    r.shuffle(families)
    optional += [f"family:{prefix}" for prefix in families[: r.randint(2, 4)]]
    r.shuffle(optional)
    if r.random() < 0.5:
        optional.insert(0, _fill(_GATED_MLP, P=script.prefix, multiple=r.choice([64, 256])))
    if r.random() < 0.5:
        optional.insert(0, _fill(_RMS_NORM, P=script.prefix, eps=values["eps"]))

    flags = len(_USED_FLAGS) + 1 + (len(_INIT_FLAGS) if script.init_dict else 0)
    # parse_args: the def, the parser, a blank and a header per group, the return.
    parser_lines = 6 + 2 * len(_GROUPS) + flags
    architectures = [script.prefix]
    fixed = [head, model, data, schedule, steps, _EVAL, checkpoints, train, main]
    size = sum(part.count("\n") for part in [*fixed, *utilities]) + parser_lines
    build_lines = _BUILD_MODEL.count("\n") + 1
    for part in optional:
        text = _family(r, part[7:], script) if part.startswith("family:") else part
        added = text.count("\n") + (1 if part.startswith("family:") else 0)
        if size + build_lines + added + _MIN_EXTRA_FLAGS > lines:
            continue
        if part.startswith("family:"):
            architectures.append(part[7:])
            model += text
        else:
            utilities.append(text)
        size += added
    build = _fill(
        _BUILD_MODEL,
        classes="".join(
            f'        "{prefix.lower()}": {prefix}ForCausalLM,\n' for prefix in architectures
        ),
    )
    size += build.count("\n")
    r.shuffle(utilities)
    before = head + model + build + "".join(utilities) + data + schedule + steps + _EVAL
    before += checkpoints + train
    extra = max(_MIN_EXTRA_FLAGS, lines - size)
    return before + _parse_args(r, script, extra, script.prefix.lower()) + main


# -- helper modules ---------------------------------------------------------------------------------

_HELPER_HEAD = '''"""$title: shared by the training scripts of this project."""

import json
import logging
import math
import os
import re
import time

import numpy as np
import torch
import torch.distributed as dist
$smp_import
logger = logging.getLogger(__name__)
'''

_HELPER_PARTS = {
    "data": (
        '''

class PretrainingShardDataset(torch.utils.data.Dataset):
    """Windows of max_context_width tokens over one shard of the corpus."""

    def __init__(self, path, max_context_width=$seq, stride=None, dtype=np.$dtype):
        self.path = path
        self.max_context_width = max_context_width
        self.stride = stride or max_context_width
        self.tokens = np.memmap(path, dtype=dtype, mode="r") if os.path.exists(path) else np.zeros(4 * max_context_width, dtype=dtype)

    def __len__(self):
        return max(0, (len(self.tokens) - self.max_context_width) // self.stride)

    def __getitem__(self, index):
        start = index * self.stride
        window = torch.from_numpy(np.asarray(self.tokens[start : start + self.max_context_width], dtype=np.int64))
        return window, torch.ones_like(window)


def list_training_shards(folder, suffixes=(".npy", ".bin", ".json.gz")):
    """The shards of a channel folder, sorted, so that every rank sees the same order."""
    if not os.path.isdir(folder):
        return []
    return sorted(os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(suffixes))


def create_pretraining_dataloader(path, batch_size, max_context_width, seed, dp_rank, dp_size, shuffle=True, workers=$workers):
    """A loader over one shard, each data-parallel rank reading its own part."""
    dataset = PretrainingShardDataset(path, max_context_width)
    sampler = torch.utils.data.distributed.DistributedSampler(
        dataset, num_replicas=dp_size, rank=dp_rank, shuffle=shuffle, seed=seed, drop_last=True
    )
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=workers,
        pin_memory=True,
        drop_last=True,
    )
''',
        '''

def pack_documents_$n(documents, max_context_width=$seq, eos_token_id=$eos):
    """Concatenate tokenized documents with an end-of-text token and cut fixed windows."""
    buffer, windows = [], []
    for document in documents:
        buffer.extend(document)
        buffer.append(eos_token_id)
        while len(buffer) >= max_context_width:
            windows.append(buffer[:max_context_width])
            buffer = buffer[max_context_width:]
    return np.asarray(windows, dtype=np.int64)


def read_json_lines_$n(path, field="text", limit=None):
    """The given field of each record of a JSON-lines file."""
    values = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            if limit is not None and number >= limit:
                break
            line = line.strip()
            if line:
                values.append(json.loads(line)[field])
    return values
''',
    ),
    "tokenizer": (
        '''

class ByteTokenizer:
    """UTF-8 bytes as tokens after a few special ones: enough to pre-tokenize shards offline."""

    def __init__(self, eos_token_id=$eos, pad_token_id=0, offset=3):
        self.eos_token_id = eos_token_id
        self.pad_token_id = pad_token_id
        self.offset = offset

    def encode(self, text):
        return [byte + self.offset for byte in text.encode("utf-8")]

    def decode(self, ids):
        return bytes(i - self.offset for i in ids if i >= self.offset).decode("utf-8", errors="replace")

    def __len__(self):
        return 256 + self.offset


class VocabTokenizer:
    """Whole words from a saved vocabulary, unknown words as one id."""

    def __init__(self, vocab, unknown="<unk>", eos="<eos>"):
        self.vocab = vocab
        self.inverse = {index: word for word, index in vocab.items()}
        self.unknown_id = vocab.get(unknown, 0)
        self.eos_token_id = vocab.get(eos, 1)

    def encode(self, text):
        return [self.vocab.get(word, self.unknown_id) for word in re.findall(r"\\w+|[^\\w\\s]", text)]

    def decode(self, ids):
        return " ".join(self.inverse.get(i, "?") for i in ids)

    def __len__(self):
        return len(self.vocab)


def load_tokenizer(name_or_path, cache_dir=None):
    """The byte tokenizer, or the vocabulary saved under ``name_or_path``."""
    if name_or_path in ("bytes", "byte"):
        return ByteTokenizer()
    path = os.path.join(cache_dir or ".", name_or_path, "vocab.json")
    with open(path, encoding="utf-8") as handle:
        return VocabTokenizer(json.load(handle))
''',
        '''

def tokenize_file_$n(tokenizer, path, out_path, max_documents=None):
    """Token ids of a JSON-lines file as one array, documents separated by end-of-text."""
    ids = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            if max_documents is not None and number >= max_documents:
                break
            ids.extend(tokenizer.encode(json.loads(line).get("text", "")))
            ids.append(tokenizer.eos_token_id)
    array = np.asarray(ids, dtype=np.int32)
    np.save(out_path, array)
    return len(array)
''',
    ),
    "schedule": (
        '''

def warmup_fraction(step, warmup_steps, total_steps, style="$style", floor=$floor):
    """The learning-rate multiplier at ``step``: linear warm-up, then $style decay."""
    if step < warmup_steps:
        return step / max(1, warmup_steps)
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    if style == "cosine":
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
    if style == "linear":
        return floor + (1.0 - floor) * (1.0 - progress)
    return 1.0
''',
        '''

class WarmupSchedule$n:
    """A schedule object with the optimizer's lr updated at each step."""

    def __init__(self, optimizer, base_lr, warmup_steps=$warmup, total_steps=$total):
        self.optimizer = optimizer
        self.base_lr = base_lr
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.step_count = 0

    def step(self):
        self.step_count += 1
        lr = self.base_lr * warmup_fraction(self.step_count, self.warmup_steps, self.total_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def state_dict(self):
        return {"step_count": self.step_count, "base_lr": self.base_lr}

    def load_state_dict(self, state):
        self.step_count = state["step_count"]
        self.base_lr = state["base_lr"]
''',
    ),
    "memory": (
        '''

def memory_status(msg="", reset_max=True, sync=True):
    """GPU memory of this rank's device, logged by the first data-parallel replica."""
    rank = smp.rank()
    local_rank = smp.local_rank()
    if sync:
        torch.cuda.synchronize()
    if smp.rdp_rank() != 0:
        return
    allocated = torch.cuda.memory_allocated(device=local_rank) / 1024**3
    reserved = torch.cuda.memory_reserved(device=local_rank) / 1024**3
    peak = torch.cuda.max_memory_allocated(device=local_rank) / 1024**3
    logger.info("%s rank %d: allocated %.2f GB, reserved %.2f GB, peak %.2f GB", msg, rank, allocated, reserved, peak)
    if reset_max:
        torch.cuda.reset_peak_memory_stats()
''',
        '''

def memory_status_cpu_$n(msg=""):
    """Resident memory of this process, on the first local rank only."""
    if smp.local_rank() != 0:
        return
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            fields = dict(line.split(":", 1) for line in handle if ":" in line)
    except OSError:
        return
    resident = fields.get("VmRSS", "0 kB").strip()
    logger.info("%s: resident %s (rank %d of %d)", msg, resident, smp.rank(), smp.size())
''',
    ),
    "checkpoint": (
        '''

def save_training_checkpoint(model, optimizer, lr_scheduler, args, total_steps, shard_index, batch_index):
    """A partial checkpoint of every rank, with what resuming needs in the user content."""
    user_content = {
        "cli_args": vars(args),
        "total_steps": total_steps,
        "start_train_path_index": shard_index,
        "start_batch_index": batch_index,
        "lr_scheduler": lr_scheduler.state_dict(),
    }
    smp.save_checkpoint(
        args.checkpoint_dir,
        tag=f"total_steps{total_steps}",
        partial=True,
        model=model,
        optimizer=optimizer,
        user_content=user_content,
        num_kept_partial_checkpoints=$kept,
    )
    smp.barrier()
''',
        '''

def save_local_states_$n(model, optimizer, folder, step):
    """The local state of this model-parallel rank, written by one replica of each."""
    if smp.rdp_rank() == 0:
        state = {"model": model.local_state_dict(), "optimizer": optimizer.local_state_dict(), "step": step}
        smp.save(state, os.path.join(folder, f"local_${n}_{step}.pt"), partial=True)
    smp.barrier()


def latest_tag_$n(folder, prefix="total_steps"):
    """The tag of the newest checkpoint in ``folder`` (the highest step), or None."""
    if not os.path.isdir(folder):
        return None
    steps = [int(match.group(1)) for match in (re.match(prefix + r"(\\d+)", name) for name in os.listdir(folder)) if match]
    return f"{prefix}{max(steps)}" if steps else None
''',
    ),
    "config": (
        '''

_PRESETS_$n = {
    "small": {"hidden_width": 768, "num_layers": 12, "num_heads": 12},
    "medium": {"hidden_width": 1024, "num_layers": 24, "num_heads": 16},
    "large": {"hidden_width": 1280, "num_layers": 36, "num_heads": 20},
    "xl": {"hidden_width": 1600, "num_layers": 48, "num_heads": 25},
    "$size": {"hidden_width": $hidden, "num_layers": $layers, "num_heads": $heads},
}


def preset_names():
    """The names of the model sizes this project knows."""
    return sorted(_PRESETS_$n)


def preset_$n(name, **overrides):
    """A preset's sizes, with some overridden."""
    if name not in _PRESETS_$n:
        raise KeyError(f"unknown model size {name!r}; known: {', '.join(sorted(_PRESETS_$n))}")
    values = dict(_PRESETS_$n[name])
    values.update({key: value for key, value in overrides.items() if value is not None})
    return values
''',
        '''

def parameters_of_$n(hidden_width, num_layers, vocab_size=$vocab, max_context_width=$seq):
    """Parameters of a decoder-only transformer of this shape (biases left out)."""
    per_layer = 12 * hidden_width * hidden_width
    return num_layers * per_layer + (vocab_size + max_context_width) * hidden_width
''',
    ),
    "distributed": (
        '''

def log_world(prefix=""):
    """The parallel layout, logged once."""
    if smp.rank() == 0:
        logger.info(
            "%sworld %d: dp %d, tp %d, pp %d, rdp %d",
            prefix,
            smp.size(),
            smp.dp_size(),
            smp.tp_size(),
            smp.pp_size(),
            smp.rdp_size(),
        )
''',
        '''

def average_over_dp_$n(value, device=None):
    """The mean of a float over the data-parallel ranks."""
    tensor = torch.tensor([float(value)], device=device or torch.device("cuda"))
    dist.all_reduce(tensor, group=smp.get_dp_process_group())
    return tensor.item() / smp.dp_size()


def is_first_replica_$n():
    """Whether this rank writes what one copy of the model writes."""
    return smp.rdp_rank() == 0
''',
    ),
    "metrics": (
        '''

def tflops_per_gpu_$n(samples_per_second, num_params, num_gpus, seq_len, recompute=True):
    """Model FLOPs per GPU, in TFLOPS."""
    factor = 8 if recompute else 6
    return factor * samples_per_second * num_params * seq_len / num_gpus / 1e12
''',
        '''

class MetricLog$n:
    """Values logged as JSON lines, flushed every $every records."""

    def __init__(self, path, every=$every):
        self.path = path
        self.every = every
        self.pending = []

    def add(self, step, **values):
        self.pending.append({"step": step, "time": time.time(), **values})
        if len(self.pending) >= self.every:
            self.flush()

    def flush(self):
        if not self.pending:
            return
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            for record in self.pending:
                handle.write(json.dumps(record) + "\\n")
        self.pending = []
''',
    ),
}


# Parts any helper module may carry besides its own (``$n`` numbers the names).
_GENERIC_PARTS = (
    '''

def require_keys_$n(config, required=("model_type", "hidden_width", "num_layers"), where="config"):
    """Raise with every missing key named, rather than failing on the first."""
    missing = [key for key in required if key not in config]
    if missing:
        raise KeyError(f"{where} lacks {', '.join(missing)}")
    return {key: config[key] for key in required}
''',
    '''

class FileCache$n:
    """Small JSON results kept on the local disk between steps, keyed by name."""

    def __init__(self, folder="/tmp/cache_$n"):
        self.folder = folder
        self.hits = 0
        self.misses = 0

    def _path(self, key):
        return os.path.join(self.folder, re.sub(r"[^A-Za-z0-9_.-]", "_", key) + ".json")

    def get(self, key, default=None):
        try:
            with open(self._path(key), encoding="utf-8") as handle:
                self.hits += 1
                return json.load(handle)
        except (OSError, ValueError):
            self.misses += 1
            return default

    def put(self, key, value):
        os.makedirs(self.folder, exist_ok=True)
        with open(self._path(key), "w", encoding="utf-8") as handle:
            json.dump(value, handle)
''',
    '''

def retry_$n(action, attempts=$attempts, pause=2.0, exceptions=(OSError,)):
    """Call ``action`` until it succeeds (S3 and FSx reads fail now and then), then give up."""
    for attempt in range(attempts):
        try:
            return action()
        except exceptions as error:
            if attempt == attempts - 1:
                raise
            logger.warning("attempt %d of %d failed: %s", attempt + 1, attempts, error)
            time.sleep(pause * (2**attempt))
    return None
''',
    '''

def tensor_summary_$n(tensor, name="tensor"):
    """Shape, dtype and a few statistics of a tensor, for debugging divergence."""
    values = tensor.detach().float()
    finite = torch.isfinite(values)
    if not finite.all():
        logger.warning("%s has %d non-finite values", name, int((~finite).sum().item()))
    values = values[finite]
    if values.numel() == 0:
        return f"{name}: {tuple(tensor.shape)} {tensor.dtype}, empty"
    return "{}: {} {} mean {:.4g} std {:.4g} min {:.4g} max {:.4g}".format(
        name, tuple(tensor.shape), tensor.dtype, values.mean().item(), values.std().item(),
        values.min().item(), values.max().item(),
    )
''',
)


def _helper(r: random.Random, name: str, lines: int) -> str:
    kind = _HELPER_KIND[name]
    uses_smp = kind in _SMP_KINDS
    text = _fill(
        _HELPER_HEAD,
        title=name.replace("_", " ").capitalize(),
        smp_import="import smdistributed.modelparallel.torch as smp\n" if uses_smp else "",
    )
    first, other = _HELPER_PARTS[kind]
    values = dict(
        seq=r.choice([512, 1024, 2048]),
        dtype=r.choice(["uint16", "int32"]),
        workers=r.choice([0, 2, 4]),
        eos=r.choice([0, 2, 50256]),
        style=r.choice(["cosine", "linear"]),
        floor=r.choice(["0.0", "0.1"]),
        warmup=r.choice([100, 2000]),
        total=r.choice([10000, 143000]),
        kept=r.choice([2, 5]),
        size=r.choice(["2.7b", "6.7b", "13b"]),
        hidden=r.choice([2560, 4096, 5120]),
        layers=r.choice([32, 40]),
        heads=r.choice([32, 40]),
        vocab=r.choice([50257, 32000]),
        every=r.choice([10, 50]),
        attempts=r.choice([3, 5]),
    )
    text += _fill(first, n=0, **values)
    number = 1
    parts = [other, *_GENERIC_PARTS]
    while text.count("\n") < lines:
        text += _fill(parts[number % len(parts)] if number % 2 else other, n=number, **values)
        number += 1
    return text


# -- launchers ------------------------------------------------------------------------------------


def _launch_settings(r: random.Random, script: _Script, pitfall: str) -> dict[str, object]:
    count = r.choice([1, 2, 4])
    tp = r.choice([2, 4, 8])
    pp = 1 if tp == 8 else r.choice([1, 2])
    if pitfall == "odd_degree":
        tp = 6
    settings: dict[str, object] = {
        "instance_type": r.choice(["ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p3dn.24xlarge"]),
        "instance_count": count,
        "processes_per_host": 16 if pitfall == "too_many_processes" else 8,
        "parameters": {
            "ddp": pitfall != "no_ddp",
            "tensor_parallel_degree": tp,
            "pipeline_parallel_degree": pp,
            "microbatches": r.choice([1, 2, 4]) if pp > 1 else 1,
            "optimize": "speed",
            "placement_strategy": "cluster",
            **({"partitions": pp} if pp > 1 else {}),
        },
        "hyperparameters": {
            "max_steps": r.choice([100, 5000, 143000]),
            "seed": 12345,
            "fp16": 0,
            "bf16": 1,
            "lr": r.choice([0.0002, 6e-05]),
            "lr_decay_style": r.choice(["linear", "cosine"]),
            "warmup": 0.01,
            "train_batch_size": r.choice([2, 4, 8]),
            "val_batch_size": 4,
            "max_context_width": script.seq,
            "hidden_width": script.hidden,
            "num_layers": script.layers,
            "num_heads": script.heads,
            "vocab_size": script.vocab,
            "activation_checkpointing": 1,
            "checkpoint_freq": 1000,
            "logging_freq": 10,
            "validation_freq": 200,
            "epochs": 1,
        },
    }
    if script.init_dict:
        hyper = settings["hyperparameters"]
        assert isinstance(hyper, dict)
        hyper["tensor_parallel_degree"] = tp
        hyper["pipeline_parallel_degree"] = pp
    return settings


def _py_literal(value: object, indent: int = 0) -> str:
    """A dict as Python source, one key a line (``True``, not ``true``)."""
    if isinstance(value, dict):
        pad = " " * (indent + 4)
        items = "".join(
            f"{pad}{json.dumps(k)}: {_py_literal(v, indent + 4)},\n" for k, v in value.items()
        )
        return "{\n" + items + " " * indent + "}"
    return json.dumps(value) if isinstance(value, str) else repr(value)


_PY_LAUNCHER = '''"""Launch src/$script on $count $instance instance(s) with SageMaker model parallelism."""

import os

import sagemaker
from sagemaker.pytorch import PyTorch

role = os.environ.get("SAGEMAKER_ROLE") or sagemaker.get_execution_role()
session = sagemaker.Session()
bucket = session.default_bucket()

hyperparameters = $hyperparameters

smp_parameters = $parameters

mpi_options = {
    "enabled": True,
    "processes_per_host": $processes,
    "custom_mpi_options": "-verbose -x NCCL_DEBUG=WARN",
}

estimator = PyTorch(
    entry_point="$script",
    source_dir="src",
    role=role,
    sagemaker_session=session,
    instance_type="$instance",
    instance_count=$count,
    framework_version="1.13.1",
    py_version="py39",
    volume_size=500,
    max_run=86400,
    hyperparameters=hyperparameters,
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp_parameters}},
        "mpi": mpi_options,
    },
    checkpoint_s3_uri=f"s3://{bucket}/checkpoints/$job",
    base_job_name="$job",
    debugger_hook_config=False,
    disable_profiler=True,
)

if __name__ == "__main__":
    estimator.fit(
        inputs={"train": f"s3://{bucket}/data/train", "test": f"s3://{bucket}/data/test"},
        logs=True,
    )
'''


def _py_launcher(script_name: str, settings: dict[str, object], job: str) -> str:
    return _fill(
        _PY_LAUNCHER,
        script=script_name,
        count=settings["instance_count"],
        instance=settings["instance_type"],
        hyperparameters=_py_literal(settings["hyperparameters"]),
        parameters=_py_literal(settings["parameters"]),
        processes=settings["processes_per_host"],
        job=job,
    )


def _cell(kind: str, text: str, outputs: tuple[str, ...] = ()) -> dict[str, object]:
    cell: dict[str, object] = {
        "cell_type": kind,
        "metadata": {},
        "source": text.splitlines(keepends=True),
    }
    if kind == "code":
        cell["execution_count"] = None
        cell["outputs"] = [
            {"name": "stdout", "output_type": "stream", "text": output.splitlines(keepends=True)}
            for output in outputs
        ]
    return cell


def _notebook(
    r: random.Random, script: _Script, script_name: str, settings: dict[str, object], job: str
) -> str:
    """A launcher notebook as the official examples write them: markdown explaining each
    step, ``%pip`` and ``!`` lines, the session, the data channels, the hyperparameters, the
    model size, the estimator, and ``fit``."""
    title = (
        f"Train {script.title} with tensor parallelism in the SageMaker model parallelism library"
    )
    pip_output = "".join(
        f"Requirement already satisfied: {package} in /opt/conda/lib/python3.9/site-packages\n"
        for package in ("sagemaker", "boto3", "botocore", "s3transfer", "jmespath", "numpy")
    )
    sizes = "".join(
        f'{"if" if index == 0 else "elif"} model_size == "{name}":\n'
        f'    model_params = {{"hidden_width": {hidden}, "num_layers": {layers}, "num_heads": {heads}}}\n'
        for index, (name, hidden, layers, heads) in enumerate(
            [
                ("small", 768, 12, 12),
                ("xl", 1600, 48, 25),
                ("custom", script.hidden, script.layers, script.heads),
            ]
        )
    )
    sizes += 'else:\n    raise RuntimeError(f"unknown model size {model_size}")\n\nhyperparameters.update(model_params)\n'
    cells = [
        _cell("markdown", f"# {title}\n"),
        _cell(
            "markdown",
            "This notebook starts a training job of `src/" + script_name + "` on "
            f"{settings['instance_count']} `{settings['instance_type']}` instance(s). The training script "
            "splits the transformer layers between the GPUs of each instance with tensor parallelism, "
            "and replicates the result with data parallelism.\n\n"
            "Run the cells in order; the estimator cell near the end starts the job.\n",
        ),
        _cell(
            "markdown",
            "## Amazon SageMaker initialization\n\nUpgrade the SageMaker Python SDK first.\n",
        ),
        _cell(
            "code",
            "%pip install --upgrade sagemaker\n# %pip install sagemaker-experiments",
            (pip_output,),
        ),
        _cell(
            "code",
            "%%time\nimport os\n\nimport boto3\nimport sagemaker\nfrom sagemaker import get_execution_role\n"
            "from sagemaker.pytorch import PyTorch\n\nrole = get_execution_role()\n"
            'print(f"SageMaker execution role: {role}")\n\nclient = boto3.client("sts")\n'
            'account = client.get_caller_identity()["Account"]\nsession = boto3.session.Session()\n'
            "region = session.region_name\nsagemaker_session = sagemaker.session.Session(boto_session=session)\n"
            "bucket = sagemaker_session.default_bucket()\n",
            ("CPU times: user 1.2 s, sys: 180 ms, total: 1.38 s\nWall time: 2.1 s\n",),
        ),
        _cell(
            "markdown", "## Data\n\nThe tokenized shards are in S3; set the paths to your own.\n"
        ),
        _cell("code", "! pip install -q datasets transformers"),
        _cell(
            "code",
            's3_train_bucket = f"s3://sagemaker-{region}-{account}/' + job + '/train/"\n'
            's3_test_bucket = f"s3://sagemaker-{region}-{account}/' + job + '/test/"\n'
            's3_output_bucket = f"s3://sagemaker-{region}-{account}/' + job + '/output/"\n'
            "data_channels = {\n"
            '    "train": sagemaker.inputs.TrainingInput(s3_train_bucket, distribution="FullyReplicated", s3_data_type="S3Prefix"),\n'
            '    "test": sagemaker.inputs.TrainingInput(s3_test_bucket, distribution="FullyReplicated", s3_data_type="S3Prefix"),\n'
            "}\n",
        ),
        _cell("code", "%store s3_train_bucket\n%store s3_test_bucket"),
        _cell(
            "markdown",
            "## Hyperparameters and the model size\n\nThe `hyperparameters` are passed to the training "
            "script as command-line flags; the model size sets the width and depth.\n",
        ),
        _cell("code", "hyperparameters = " + _py_literal(settings["hyperparameters"]) + "\n"),
        _cell("code", f'model_size = "{r.choice(["small", "xl", "custom"])}"\n\n' + sizes),
        _cell(
            "markdown",
            "## The training job\n\nSet the instance type and count, and the library's parameters. "
            "`processes_per_host` is the number of GPUs of one instance.\n",
        ),
        _cell(
            "code",
            f'instance_type = "{settings["instance_type"]}"\ninstance_count = {settings["instance_count"]}\n\n'
            f"# set to the number of GPUs on that instance\nprocesses_per_host = {settings['processes_per_host']}\n",
        ),
        _cell("code", "smp_parameters = " + _py_literal(settings["parameters"]) + "\n"),
        _cell(
            "code",
            f'machine = instance_type.split(".")[1] + instance_type.split(".")[2][:3]\n'
            f"base_job_name = f\"{job}-{{machine}}-tp{{smp_parameters['tensor_parallel_degree']}}\"\n"
            'checkpoint_s3_uri = f"s3://{bucket}/checkpoints/{base_job_name}"\n'
            'print(f"base_job_name: {base_job_name} checkpoint_s3_uri: {checkpoint_s3_uri}")\n',
        ),
        _cell(
            "markdown",
            "### Create the estimator\n\nThe `distribution` argument turns the library on; `mpi` "
            "starts one process per GPU.\n",
        ),
        _cell(
            "code",
            "kwargs = {}\n\nsmp_estimator = PyTorch(\n"
            f'    entry_point="{script_name}",\n    source_dir="src",\n    role=role,\n'
            "    instance_type=instance_type,\n    instance_count=instance_count,\n"
            "    sagemaker_session=sagemaker_session,\n    volume_size=500,\n"
            '    distribution={\n        "mpi": {\n            "enabled": True,\n'
            '            "processes_per_host": processes_per_host,\n'
            '            "custom_mpi_options": "-verbose --mca orte_base_help_aggregate 0 -x NCCL_DEBUG=WARN",\n'
            "        },\n"
            '        "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp_parameters}},\n'
            "    },\n"
            '    framework_version="1.13.1",\n    py_version="py39",\n'
            "    output_path=s3_output_bucket,\n    checkpoint_s3_uri=checkpoint_s3_uri,\n"
            "    max_run=86400,\n    debugger_hook_config=False,\n"
            "    hyperparameters=hyperparameters,\n    base_job_name=base_job_name,\n    **kwargs,\n)\n",
        ),
        _cell("markdown", "Start the job; its logs stream below.\n"),
        _cell("code", "smp_estimator.fit(inputs=data_channels, logs=True)"),
        _cell(
            "markdown",
            "## Logs\n\nThe training logs are also in Amazon CloudWatch, under the job's name, and "
            "the checkpoints in `checkpoint_s3_uri`.\n",
        ),
    ]
    book = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python", "version": "3.9.16"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(book, indent=1) + "\n"


# -- the project ------------------------------------------------------------------------------------


def _plan_scripts(r: random.Random, count: int, helpers: list[str]) -> list[_Script]:
    scripts = []
    pitfalls = list(SCRIPT_PITFALLS)
    for number in range(count):
        prefix, title = r.choice(_FAMILIES)
        heads = r.choice([12, 16, 32])
        chosen = r.sample(helpers, k=min(len(helpers), r.randint(3, 6)))
        scripts.append(
            _Script(
                number=number,
                prefix=prefix,
                title=title,
                hidden=heads * r.choice([64, 128]),
                heads=heads,
                layers=r.choice([12, 24, 32, 40]),
                vocab=r.choice([32000, 50257, 50432]),
                seq=r.choice([1024, 2048]),
                init_dict=r.random() < 0.5,
                model_creation=r.random() < 0.5,
                # Every other script is clean; the others have one or two mistakes.
                pitfalls=frozenset(r.sample(pitfalls, k=r.choice([1, 2])) if number % 2 else ()),
                imports={name: _HELPER_KIND[name] for name in sorted(chosen)},
            )
        )
    return scripts


def build(folder: Path, scripts: int = 10, helpers: int = 8, seed: int = 0) -> list[Path]:
    """Write the project into ``folder`` (created); returns every file written."""
    r = random.Random(seed)
    source = folder / "src"
    source.mkdir(parents=True)
    paths = []
    names = list(HELPER_NAMES[:helpers])
    for name in names:
        paths.append(source / f"{name}.py")
        paths[-1].write_text(_helper(r, name, r.randint(*HELPER_LINES)), encoding="utf-8")
    for script in _plan_scripts(r, scripts, names):
        script_name = f"train_{script.prefix.lower()}_{script.number:02d}.py"
        paths.append(source / script_name)
        paths[-1].write_text(_script(r, script, r.randint(*SCRIPT_LINES)), encoding="utf-8")
        pitfall = r.choice(LAUNCHER_PITFALLS) if r.random() < 0.2 else ""
        settings = _launch_settings(r, script, pitfall)
        job = f"smp-{script.prefix.lower()}-{script.number:02d}"
        if script.number % 2 == 0:
            paths.append(folder / f"smp-train-{script.prefix.lower()}-{script.number:02d}.ipynb")
            paths[-1].write_text(_notebook(r, script, script_name, settings, job), encoding="utf-8")
        else:
            paths.append(folder / f"launch_{script.prefix.lower()}_{script.number:02d}.py")
            paths[-1].write_text(_py_launcher(script_name, settings, job), encoding="utf-8")
    return paths


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--scripts", type=int, default=10)
    parser.add_argument("--helpers", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    for path in build(options.out, options.scripts, options.helpers, options.seed):
        print(path)
