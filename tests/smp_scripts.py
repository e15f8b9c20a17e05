"""Generated SMP v1 training scripts: realistic files mixing documented pitfalls and correct code.

Used by the property tests (through hypothesis' ``randoms()``) and by the benchmark (with a
seeded ``random.Random``), so both exercise the same kind of file. Every choice goes through
the ``Random`` it is given: the same seed gives the same script.

A script is a list of *parts*; each part is a small template where ``{smp}`` stands for the
library's local name and ``{I}`` for one indentation level. The pitfall parts record which
rule they should trigger, so a test can check the findings appear. The support parts (a
dataset, metrics, a learning-rate schedule, configuration and logging helpers) make a script
as long as a real one (150 to 250 lines); they never touch the library, and every name they
bind is too long or too capitalized for the alias the property tests generate
(``[a-z][a-z_]{0,8}``), so they cannot shadow it.
"""

from __future__ import annotations

import keyword
import random
import string
from dataclasses import dataclass

ALIAS_STYLES = ("smp", "mp", "smp_torch", "modelparallel")

_HEADER = '''"""Training script for {title}."""
import argparse
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
{import_line}

'''

_MODEL = '''
class {cls}(nn.Module):
{I}"""A small transformer-ish model."""

{I}def __init__(self, vocab={vocab}, hidden={hidden}, layers={layers}):
{I}{I}super().__init__()
{I}{I}self.embed = nn.Embedding(vocab, hidden)
{I}{I}self.blocks = nn.ModuleList([nn.Linear(hidden, hidden) for _ in range(layers)])
{I}{I}self.head = nn.Linear(hidden, vocab)

{I}def forward(self, x):
{I}{I}h = self.embed(x)
{I}{I}for block in self.blocks:
{I}{I}{I}h = F.gelu(block(h))  {comment}
{I}{I}return self.head(h)
'''

_ARGS = """
def parse_args():
{I}parser = argparse.ArgumentParser()
{I}parser.add_argument("--lr", type=float, default={lr})
{I}parser.add_argument("--epochs", type=int, default={epochs})
{I}parser.add_argument("--batch-size", type=int, default={batch})
{I}return parser.parse_args()
"""

_SUPPORT_IMPORTS = """from json import load as load_json_file
from logging import basicConfig as configure_logging, getLogger
from time import perf_counter

from torch.utils.data import Dataset

"""

_SUPPORT_PARTS = (
    '''

class SyntheticTokens(Dataset):
{I}"""Deterministic token sequences standing in for a tokenized corpus."""

{I}def __init__(self, sample_count, sequence_length={seq}, vocabulary_size={vocab}):
{I}{I}self.sample_count = sample_count
{I}{I}self.sequence_length = sequence_length
{I}{I}self.vocabulary_size = vocabulary_size

{I}def __len__(self):
{I}{I}return self.sample_count

{I}def __getitem__(self, item_index):
{I}{I}first_token = item_index % self.vocabulary_size
{I}{I}tokens_here = torch.arange(first_token, first_token + self.sequence_length + 1) % self.vocabulary_size
{I}{I}return tokens_here[:-1], tokens_here[1:]


def make_dataset(args):
{I}"""The training set: {samples} samples unless the configuration says otherwise."""
{I}return SyntheticTokens(getattr(args, "sample_count", {samples}))
''',  # noqa: E501
    '''

class AverageMeter:
{I}"""A running average of a scalar (loss, tokens per second) over a window."""

{I}def __init__(self, window_length=100):
{I}{I}self.window_length = window_length
{I}{I}self.window_values = []
{I}{I}self.running_total = 0.0
{I}{I}self.value_count = 0

{I}def record_value(self, observed_value):
{I}{I}self.window_values.append(float(observed_value))
{I}{I}if len(self.window_values) > self.window_length:
{I}{I}{I}self.window_values.pop(0)
{I}{I}self.running_total += float(observed_value)
{I}{I}self.value_count += 1

{I}@property
{I}def window_average(self):
{I}{I}if not self.window_values:
{I}{I}{I}return 0.0
{I}{I}return math.fsum(self.window_values) / len(self.window_values)

{I}@property
{I}def overall_average(self):
{I}{I}return self.running_total / max(self.value_count, 1)
''',
    '''

def cosine_learning_rate(step_number, warmup_steps, total_steps, peak_learning_rate, floor_ratio=0.1):
{I}"""Linear warm-up, then cosine decay to ``floor_ratio`` of the peak."""
{I}if step_number < warmup_steps:
{I}{I}return peak_learning_rate * (step_number + 1) / warmup_steps
{I}progress_ratio = min(1.0, (step_number - warmup_steps) / max(1, total_steps - warmup_steps))
{I}cosine_factor = 0.5 * (1.0 + math.cos(math.pi * progress_ratio))
{I}return peak_learning_rate * (floor_ratio + (1.0 - floor_ratio) * cosine_factor)
''',  # noqa: E501
    '''

def perplexity_of(loss_values):
{I}"""Perplexity from per-batch losses, capped so that a diverged run still prints."""
{I}if not loss_values:
{I}{I}return float("inf")
{I}average_loss = math.fsum(float(item_value) for item_value in loss_values) / len(loss_values)
{I}return math.exp(min(average_loss, 50.0))


def format_duration(total_seconds):
{I}whole_minutes, remaining_seconds = divmod(int(total_seconds), 60)
{I}whole_hours, whole_minutes = divmod(whole_minutes, 60)
{I}return f"{{whole_hours:d}}:{{whole_minutes:02d}}:{{remaining_seconds:02d}}"
''',
    '''

def read_run_config(config_path, defaults_mapping=None):
{I}"""Options from a JSON file over ``defaults_mapping``; a missing file gives the defaults."""
{I}merged_options = dict(defaults_mapping or {{}})
{I}if config_path and os.path.exists(config_path):
{I}{I}with open(config_path, encoding="utf-8") as config_handle:
{I}{I}{I}merged_options.update(load_json_file(config_handle))
{I}return merged_options


def setup_run_logging(verbose_output=False):
{I}configure_logging(level="DEBUG" if verbose_output else "INFO", format="%(asctime)s %(levelname)s %(message)s")
{I}return getLogger("training")
''',  # noqa: E501
)

_STEP = """
@{smp}.step
def train_step(model, data, target):
{I}output = model(data)
{I}loss = F.cross_entropy(output, target)
{I}model.backward(loss)
{I}return loss
"""


@dataclass(frozen=True)
class Part:
    """A piece of ``main()``; ``rule`` is the rule it should trigger (None: correct code)."""

    template: str
    rule: str | None = None


# Optimizer-first order (SMP101) and the correct order: both define `model` and `optimizer`.
# The model is marked for tensor parallelism: only then does the wrap replace modules.
_WRAP_BAD = Part(
    "{I}with {smp}.tensor_parallelism():\n{I}{I}model = {cls}()\n{I}optimizer ="
    " torch.optim.AdamW(model.parameters(), lr=args.lr)\n{I}model ="
    " {smp}.DistributedModel(model)\n{I}optimizer = {smp}.DistributedOptimizer(optimizer)\n",
    "SMP101",
)
_WRAP_GOOD = Part(
    "{I}with {smp}.tensor_parallelism():\n{I}{I}model = {cls}()\n{I}model ="
    " {smp}.DistributedModel(model)\n{I}optimizer ="
    " {smp}.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=args.lr))\n"
)
_SAVE_BAD = Part(
    "{I}if {smp}.dp_rank() == 0:  {comment}\n"
    '{I}{I}{smp}.save(model.local_state_dict(), os.path.join(args.out, "model.pt"),'
    " partial=True)\n",
    "SMP301",
)
_SAVE_GOOD = Part(
    "{I}if {smp}.rdp_rank() == 0:\n"
    '{I}{I}{smp}.save(model.local_state_dict(), os.path.join(args.out, "model.pt"), partial=True)\n'
)
_LOG = Part('{I}if {smp}.dp_rank() == 0:\n{I}{I}print("epoch", epoch, "lr", args.lr)  {comment}\n')
_LOOP = Part(
    "{I}for epoch in range(args.epochs):\n"
    "{I}{I}for data, target in loader:\n"
    "{I}{I}{I}optimizer.zero_grad()\n"
    "{I}{I}{I}loss = train_step(model, data, target).reduce_mean()\n"
    "{I}{I}{I}optimizer.step()\n"
)
# Sharded by data-parallel rank, as the library recommends under tensor parallelism (SMP204).
_DATA = Part(
    "{I}dataset = make_dataset(args)\n{I}sampler ="
    " torch.utils.data.distributed.DistributedSampler(dataset, num_replicas={smp}.dp_size(),"
    " rank={smp}.dp_rank())\n{I}loader = DataLoader(dataset, batch_size=args.batch_size,"
    " sampler=sampler, drop_last=True)\n"
)

PITFALL_PARTS = {"SMP101": (_WRAP_BAD, _WRAP_GOOD), "SMP301": (_SAVE_BAD, _SAVE_GOOD)}


@dataclass(frozen=True)
class Script:
    text: str
    alias: str
    expected_rules: frozenset[str]
    newline: str


def _identifier(rng: random.Random) -> str:
    """A lowercase name that is not a keyword (``as``, ``if``: the script would not parse);
    a keyword is drawn again, so every other draw is the one it always was."""
    while True:
        head = rng.choice(string.ascii_lowercase)
        name = head + "".join(
            rng.choice(string.ascii_lowercase + "_") for _ in range(rng.randint(1, 8))
        )
        if not keyword.iskeyword(name):
            return name


def _comment(rng: random.Random) -> str:
    return rng.choice(["", "# noted", "# TODO: tune", "# keep in sync with the launcher", ""])


def render(
    rng: random.Random,
    alias: str | None = None,
    pitfalls: dict[str, bool] | None = None,
    newline: str | None = None,
    indent: str | None = None,
) -> Script:
    """A whole script; ``pitfalls`` says per rule whether its bad variant is used."""
    alias = alias or rng.choice([*ALIAS_STYLES, _identifier(rng)])
    choose = (
        pitfalls if pitfalls is not None else {rule: rng.random() < 0.5 for rule in PITFALL_PARTS}
    )
    newline = newline or rng.choice(["\n", "\n", "\r\n"])
    indent = indent or rng.choice(["    ", "    ", "  ", "\t"])
    cls = rng.choice(["GPT", "Net", "TinyTransformer", "Model"])
    fields = {
        "smp": alias,
        "I": indent,
        "cls": cls,
        "title": rng.choice(["a GPT model", "the classifier", "experiment 7"]),
        "import_line": f"import smdistributed.modelparallel.torch as {alias}",
        "vocab": rng.choice([1000, 32000, 50257]),
        "hidden": rng.choice([64, 256, 768]),
        "layers": rng.randint(1, 12),
        "lr": rng.choice(["1e-4", "0.001", "3e-4"]),
        "epochs": rng.randint(1, 10),
        "batch": rng.choice([8, 16, 32]),
        "seq": rng.choice([128, 256, 512]),
        "samples": rng.choice([1024, 4096, 65536]),
    }

    def fill(template: str) -> str:
        return (
            template.format(**fields, comment=_comment(rng)).replace(" \n", "\n").rstrip(" ")
            if template
            else ""
        )

    body: list[str] = [f"{indent}{alias}.init()\n", f"{indent}args = parse_args()\n"]
    wrap_bad, wrap_good = PITFALL_PARTS["SMP101"]
    save_bad, save_good = PITFALL_PARTS["SMP301"]
    body.append(fill((wrap_bad if choose.get("SMP101") else wrap_good).template))
    # After the model exists, the training, logging and checkpoint parts come in random order
    # (the data set-up stays before the loop that reads it).
    after_wrap = [
        fill(_DATA.template) + fill(_LOOP.template),
        fill((save_bad if choose.get("SMP301") else save_good).template),
    ]
    if rng.random() < 0.5:
        after_wrap.append(fill(_LOG.template))
    rng.shuffle(after_wrap)
    body.extend(after_wrap)
    if rng.random() < 0.3:
        body.insert(
            rng.randint(2, len(body)),
            f"{indent}# {rng.choice(['checkpoint below', 'data', 'model'])}\n",
        )
    support = [fill(part) for part in _SUPPORT_PARTS if rng.random() < 0.85]
    parts = [
        fill(_HEADER),
        _SUPPORT_IMPORTS,
        fill(_MODEL),
        *support,
        fill(_ARGS),
        fill(_STEP),
        "\n\ndef main():\n" + "".join(body),
        '\n\nif __name__ == "__main__":\n' + f"{indent}main()\n",
    ]
    text = "".join(parts).replace("\r\n", "\n")
    lines = [line.rstrip(" ") for line in text.split("\n")]
    text = newline.join(lines)
    expected = frozenset(rule for rule, bad in choose.items() if bad)
    return Script(text=text, alias=alias, expected_rules=expected, newline=newline)


def corpus(count: int, seed: int = 0) -> list[Script]:
    """``count`` scripts from one seed, for the benchmark."""
    rng = random.Random(seed)
    return [render(rng) for _ in range(count)]
