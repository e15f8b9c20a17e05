"""A generated SMP project: several training scripts importing the same local helper modules.

Real projects are not a folder of independent scripts: an official example keeps its model,
data pipeline, learning-rate schedules and checkpoint helpers in modules that every training
script of the folder imports (``from data_pipeline import create_pretraining_dataloader``),
and each file runs to 300-1,400 lines. This builds such a tree from templates, fresh for each
seed (no real project's code is copied): ``--scripts`` scripts sharing ``--helpers`` helper
modules, some of which use the library themselves (checkpoint and memory helpers do).

    python benchmarks/project_tree.py OUT_DIR [--scripts 10] [--helpers 8] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

HELPER_NAMES = (
    "model_utils",
    "data_pipeline",
    "learning_rates",
    "memory_tracker",
    "checkpoints",
    "metrics",
    "sdp_utils",
    "tokenization",
    "schedules",
    "optim_utils",
    "logging_utils",
    "distributed_utils",
)
# Helpers that call the library (rank queries and smp.save), as checkpoint helpers do.
_SMP_HELPERS = frozenset({"checkpoints", "memory_tracker", "sdp_utils", "distributed_utils"})

_LAYER = '''

class {name}(nn.Module):
    """Block {number}: attention-free mixing, {width} wide."""

    def __init__(self, hidden={hidden}, expansion={expansion}, dropout={dropout}):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, hidden * expansion)
        self.down = nn.Linear(hidden * expansion, hidden)
        self.dropout = nn.Dropout(dropout)
        self.scale = nn.Parameter(torch.ones(hidden) * {scale})

    def forward(self, hidden_states, mask=None):
        residual = hidden_states
        hidden_states = self.norm(hidden_states)
        hidden_states = F.gelu(self.up(hidden_states))
        if mask is not None:
            hidden_states = hidden_states.masked_fill(mask.unsqueeze(-1) == 0, 0.0)
        hidden_states = self.dropout(self.down(hidden_states))
        return residual + self.scale * hidden_states

    def extra_repr(self):
        return "hidden={{}}, expansion={{}}".format(self.norm.normalized_shape[0], {expansion})
'''

_DATASET = '''

class {name}(torch.utils.data.Dataset):
    """Samples {number}: fixed-length windows over a token file."""

    def __init__(self, path, seq_length={seq}, stride={stride}):
        self.path = path
        self.seq_length = seq_length
        self.stride = stride
        self.tokens = np.memmap(path, dtype=np.uint16, mode="r") if os.path.exists(path) else np.zeros({seq} * 4, dtype=np.uint16)

    def __len__(self):
        return max(0, (len(self.tokens) - self.seq_length - 1) // self.stride)

    def __getitem__(self, index):
        start = index * self.stride
        window = torch.from_numpy(self.tokens[start:start + self.seq_length + 1].astype(np.int64))
        return {{"input_ids": window[:-1], "labels": window[1:]}}


def create_{lower}_loader(path, batch_size, rank, world, seed={seed}, workers={workers}):
    dataset = {name}(path)
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=seed)
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                                       pin_memory=True, drop_last=True)
'''

_SCHEDULE = '''

class {name}:
    """Learning-rate schedule {number}: warm-up, then {kind} decay."""

    def __init__(self, optimizer, start_lr, warmup_iter, total_iters, min_lr={min_lr}):
        self.optimizer = optimizer
        self.start_lr = start_lr
        self.warmup_iter = warmup_iter
        self.total_iters = total_iters
        self.min_lr = min_lr
        self.num_iters = 0

    def get_lr(self):
        if self.warmup_iter > 0 and self.num_iters <= self.warmup_iter:
            return float(self.start_lr) * self.num_iters / self.warmup_iter
        progress = (self.num_iters - self.warmup_iter) / max(1, self.total_iters - self.warmup_iter)
        if "{kind}" == "cosine":
            return self.min_lr + (self.start_lr - self.min_lr) * 0.5 * (math.cos(math.pi * progress) + 1)
        return max(self.min_lr, self.start_lr * (1.0 - progress))

    def step(self, step_num=None):
        self.num_iters = step_num if step_num is not None else self.num_iters + 1
        for group in self.optimizer.param_groups:
            group["lr"] = self.get_lr()

    def state_dict(self):
        return {{"start_lr": self.start_lr, "num_iters": self.num_iters, "min_lr": self.min_lr}}

    def load_state_dict(self, state):
        self.start_lr, self.num_iters, self.min_lr = state["start_lr"], state["num_iters"], state["min_lr"]
'''

_UTILITY = '''

def {lower}_summary(values, prefix="{name}", precision={precision}):
    """Summary {number} of a list of floats, for the log."""
    if not values:
        return prefix + ": no values"
    ordered = sorted(values)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    mean = sum(ordered) / len(ordered)
    spread = math.sqrt(sum((value - mean) ** 2 for value in ordered) / len(ordered))
    return "{{}}: mean {{:.{precision}f}} median {{:.{precision}f}} std {{:.{precision}f}} over {{}}".format(
        prefix, mean, median, spread, len(ordered))
'''

_SMP_UTILITY = '''

def save_{lower}(model, optimizer, path, step, partial=True):
    """Checkpoint {number}: every rank of a data-parallel group holds the same shard."""
    if smp.rdp_rank() == 0:
        state = {{"model": model.local_state_dict(), "optimizer": optimizer.local_state_dict(), "step": step}}
        smp.save(state, os.path.join(path, "{lower}_" + str(step) + ".pt"), partial=partial)
    smp.barrier()


def report_{lower}(tag, values):
    if smp.rank() == 0:
        print(tag, smp.dp_size(), smp.tp_size(), sum(values) / max(1, len(values)))
'''

_HELPER_HEADER = '''"""{title}: shared by the training scripts of this project."""

import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
{smp_import}'''

_SCRIPT_HEADER = '''"""Pre-training script {number}: {title}."""

import argparse
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import smdistributed.modelparallel.torch as smp

{helper_imports}
'''

_ARGUMENT = '    parser.add_argument("--{flag}", type={kind}, default={default}, help="{flag} for run {number}")\n'

_SCRIPT_BODY = """

@smp.step
def train_step(model, batch):
    output = model(batch["input_ids"])
    loss = F.cross_entropy(output.view(-1, output.size(-1)), batch["labels"].view(-1))
    model.backward(loss)
    return loss


@smp.step
def eval_step(model, batch):
    output = model(batch["input_ids"])
    return F.cross_entropy(output.view(-1, output.size(-1)), batch["labels"].view(-1))


class {model}(nn.Module):
    def __init__(self, vocab={vocab}, hidden={hidden}, layers={layers}):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList([{layer}(hidden) for _ in range(layers)])
        self.head = nn.Linear(hidden, vocab)

    def forward(self, input_ids):
        hidden_states = self.embed(input_ids)
        for block in self.blocks:
            hidden_states = block(hidden_states)
        return self.head(hidden_states)


def main():
    args = parse_args()
    smp.init()
    torch.cuda.set_device(smp.local_rank())
    torch.manual_seed(args.seed + smp.dp_rank())
    model = {model}()
    model = smp.DistributedModel(model)
    optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=args.lr))
    scheduler = {schedule}(optimizer, args.lr, args.warmup, args.max_steps)
    loader = {loader}(args.train_path, args.train_batch_size, smp.dp_rank(), smp.dp_size())
    step = 0
    losses = []
    for epoch in range(args.epochs):
        for batch in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = train_step(model, batch).reduce_mean()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            step += 1
            if step % args.log_interval == 0 and smp.rank() == 0:
                print({summary}(losses[-args.log_interval:]))
            if step % args.save_interval == 0:
                {save}(model, optimizer, args.checkpoint_dir, step)
            if step >= args.max_steps:
                break
    if smp.dp_rank() == 0:
        smp.save(model.local_state_dict(), os.path.join(args.checkpoint_dir, "final.pt"), partial=True)


if __name__ == "__main__":
    main()
"""


def _fill(rng: random.Random, template: str, name: str, number: int) -> str:
    return template.format(
        name=name,
        lower=name.lower(),
        number=number,
        width=rng.choice([256, 768, 1024]),
        hidden=rng.choice([256, 768, 1024]),
        expansion=rng.choice([2, 4]),
        dropout=rng.choice([0.0, 0.1]),
        scale=rng.choice([0.5, 1.0]),
        seq=rng.choice([512, 1024]),
        stride=rng.choice([256, 512]),
        seed=rng.randint(0, 99),
        workers=rng.choice([0, 2, 4]),
        kind=rng.choice(["cosine", "linear"]),
        min_lr=rng.choice(["0.0", "1e-6"]),
        precision=rng.choice([3, 4]),
    )


def _helper(rng: random.Random, name: str, lines: int) -> tuple[str, dict[str, list[str]]]:
    """A helper module of about ``lines`` lines, and the names it defines by kind."""
    uses_smp = name in _SMP_HELPERS
    text = _HELPER_HEADER.format(
        title=name.replace("_", " ").capitalize(),
        smp_import="import smdistributed.modelparallel.torch as smp\n" if uses_smp else "",
    )
    defined: dict[str, list[str]] = {
        "layer": [],
        "loader": [],
        "schedule": [],
        "summary": [],
        "save": [],
    }
    kinds = [
        ("layer", _LAYER),
        ("loader", _DATASET),
        ("schedule", _SCHEDULE),
        ("summary", _UTILITY),
    ]
    if uses_smp:
        kinds.append(("save", _SMP_UTILITY))
    number = 0
    while text.count("\n") < lines:
        kind, template = kinds[number % len(kinds)]
        stem = f"{name.title().replace('_', '')}{kind.title()}{number}"
        text += _fill(rng, template, stem, number)
        defined[kind].append(
            {
                "loader": f"create_{stem.lower()}_loader",
                "summary": f"{stem.lower()}_summary",
                "save": f"save_{stem.lower()}",
            }.get(kind, stem)
        )
        number += 1
    return text, defined


def _script(
    rng: random.Random, number: int, helpers: dict[str, dict[str, list[str]]], lines: int
) -> str:
    def pick(kind: str) -> tuple[str, str]:
        module = rng.choice([name for name, defined in helpers.items() if defined[kind]])
        return module, rng.choice(helpers[module][kind])

    chosen = {kind: pick(kind) for kind in ("layer", "loader", "schedule", "summary", "save")}
    imports = sorted({f"from {module} import {name}" for module, name in chosen.values()})
    imports += [
        f"import {module}" for module in sorted(rng.sample(sorted(helpers), k=min(3, len(helpers))))
    ]
    text = _SCRIPT_HEADER.format(
        number=number, title=rng.choice(["GPT-2", "BERT", "T5"]), helper_imports="\n".join(imports)
    )
    arguments = [
        ("seed", "int", "1234"),
        ("lr", "float", "1e-4"),
        ("warmup", "int", "100"),
        ("max_steps", "int", "1000"),
        ("train_path", "str", '"/opt/ml/input/data/train"'),
        ("train_batch_size", "int", "8"),
        ("epochs", "int", "1"),
        ("log_interval", "int", "10"),
        ("save_interval", "int", "500"),
        ("checkpoint_dir", "str", '"/opt/ml/checkpoints"'),
    ]
    body = _SCRIPT_BODY.format(
        model=f"Model{number}",
        vocab=rng.choice([32000, 50257]),
        hidden=rng.choice([768, 1024]),
        layers=rng.randint(4, 24),
        layer=chosen["layer"][1],
        schedule=chosen["schedule"][1],
        loader=chosen["loader"][1],
        summary=chosen["summary"][1],
        save=chosen["save"][1],
    )
    extra = max(0, lines - text.count("\n") - body.count("\n") - len(arguments) - 6)
    # Real scripts carry long argument lists (the official GPT-2 script has over 100 options)
    # and their own layers and utilities besides the imported ones.
    local = 0
    while extra > 200 and local < 20:
        template = (_LAYER, _UTILITY, _SCHEDULE)[local % 3]
        text += _fill(rng, template, f"Local{number}Part{local}", local)
        extra -= template.count("\n")
        local += 1
    arguments += [
        (f"option_{number}_{index}", rng.choice(["int", "float"]), str(rng.randint(0, 64)))
        for index in range(extra)
    ]
    text += "\n\ndef parse_args():\n    parser = argparse.ArgumentParser()\n"
    text += "".join(
        _ARGUMENT.format(flag=flag, kind=kind, default=default, number=number)
        for flag, kind, default in arguments
    )
    text += "    return parser.parse_args()\n"
    return text + body


def build(folder: Path, scripts: int = 10, helpers: int = 8, seed: int = 0) -> list[Path]:
    """Write the project into ``folder`` (created); returns every file written, helpers first."""
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    modules: dict[str, dict[str, list[str]]] = {}
    paths = []
    for name in HELPER_NAMES[:helpers]:
        text, defined = _helper(rng, name, rng.randint(300, 1400))
        modules[name] = defined
        paths.append(folder / f"{name}.py")
        paths[-1].write_text(text, encoding="utf-8")
    for number in range(scripts):
        paths.append(folder / f"train_{number:02d}.py")
        paths[-1].write_text(
            _script(rng, number, modules, rng.randint(300, 1400)), encoding="utf-8"
        )
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
