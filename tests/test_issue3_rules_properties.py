"""Properties of SMP201, SMP501 and SMP601 over the ways a script can import the library.

For each rule, one script with the pitfall is rendered with the library imported as ``smp``
(the canonical spelling), under a random alias (``import ... as <name>``), and with
``from smdistributed.modelparallel.<flavour> import ...`` (random ``as`` names included). The
findings (codes and lines) must be the same in every spelling, and the fixes must re-parse,
resolve the finding and converge: a second run changes nothing.
"""

from __future__ import annotations

import builtins
import keyword
from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smpfix.api import check_source, fix_source
from smpfix.job.jobfacts import Value

TORCH = "smdistributed.modelparallel.torch"
TENSORFLOW = "smdistributed.modelparallel.tensorflow"


@dataclass(frozen=True)
class Case:
    """A script template; ``{m[member]}`` is where the library's ``member`` is named."""

    code: str
    flavour: str
    members: tuple[str, ...]
    template: str
    job: Mapping[str, Value]


CASES = (
    Case(
        "SMP201",
        TORCH,
        ("DistributedModel", "init", "step"),
        """import torch
{import_line}


@{m[step]}
def train_step(model, x):
    loss = model(x)
    model.backward(loss)
    return loss


def main():
    {m[init]}()
    model = {m[DistributedModel]}(Net())
    loader = torch.utils.data.DataLoader(dataset, batch_size=8, shuffle=True)
    for epoch, x in enumerate(loader):
        train_step(model, x)
""",
        {"microbatches": 4},
    ),
    Case(
        "SMP201",
        TENSORFLOW,
        ("init", "step"),
        """import tensorflow as tf
{import_line}

{m[init]}()
dataset = tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(100).batch(64)


@{m[step]}
def train_step(images, labels):
    return loss_object(labels, model(images))


for images, labels in dataset:
    train_step(images, labels)
""",
        {"microbatches": 2},
    ),
    Case(
        "SMP501",
        TORCH,
        ("DistributedModel", "init", "model_creation"),
        """import torch
{import_line}


def main(args):
    {m[init]}()
    generator = torch.Generator().manual_seed(0)
    loader = torch.utils.data.DataLoader(dataset, batch_size=8, shuffle=True, generator=generator)
    torch.manual_seed(args.seed)
    with {m[model_creation]}(tensor_parallelism=True):
        model = GPT()
    model = {m[DistributedModel]}(model)
    return model, loader
""",
        {},
    ),
    Case(
        "SMP601",
        TORCH,
        ("DistributedModel", "DistributedOptimizer", "init"),
        """import torch
{import_line}

{m[init]}()
model = {m[DistributedModel]}(GPT())
optimizer = {m[DistributedOptimizer]}(torch.optim.AdamW(model.parameters()))
for batch in loader:
    train_step(model, batch)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    optimizer.clip_master_grads(0.5)
    optimizer.step()
""",
        {"sharded_data_parallel_degree": 8},
    ),
)

# Names the templates use, which an alias must not shadow.
_TAKEN = {
    "torch",
    "tf",
    "model",
    "loader",
    "dataset",
    "x",
    "epoch",
    "main",
    "args",
    "train_step",
    "images",
    "labels",
    "loss",
    "loss_object",
    "batch",
    "optimizer",
    "generator",
    "smp",
    "Net",
    "GPT",
    "dp_rank",
    "tp_rank",
}
IDENTIFIERS = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name) and name not in _TAKEN and not hasattr(builtins, name)
)


def render_alias(case: Case, alias: str) -> str:
    names = {member: f"{alias}.{member}" for member in case.members}
    return case.template.format(import_line=f"import {case.flavour} as {alias}", m=names)


def render_from(case: Case, local_names: list[str], renamed: list[bool]) -> str:
    names = {
        member: local if rename else member
        for member, local, rename in zip(case.members, local_names, renamed)
    }
    imported = ", ".join(
        member if local == member else f"{member} as {local}" for member, local in names.items()
    )
    return case.template.format(import_line=f"from {case.flavour} import {imported}", m=names)


def findings_of(case: Case, text: str) -> list[tuple[int, str]]:
    return sorted(
        (f.start.line, f.code)
        for f in check_source(text, "train.py", select=[case.code], job=case.job)
    )


def assert_fix_resolves_and_converges(case: Case, text: str) -> None:
    first = fix_source(text, "train.py", select=[case.code], job=case.job, unsafe=True)
    assert not first.errors, first.errors
    assert first.text != text
    cst.parse_module(first.text)
    assert findings_of(case, first.text) == []
    second = fix_source(first.text, "train.py", select=[case.code], job=case.job, unsafe=True)
    assert second.text == first.text


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), alias=IDENTIFIERS)
def test_alias_finds_the_same_and_fixes_converge(case: Case, alias: str) -> None:
    canonical = findings_of(case, render_alias(case, "smp"))
    assert canonical, f"{case.code}: the canonical script is not flagged"
    text = render_alias(case, alias)
    assert findings_of(case, text) == canonical
    assert_fix_resolves_and_converges(case, text)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(CASES),
    local_names=st.lists(IDENTIFIERS, min_size=3, max_size=3, unique=True),
    renamed=st.lists(st.booleans(), min_size=3, max_size=3),
)
def test_from_import_finds_the_same_and_fixes_converge(
    case: Case, local_names: list[str], renamed: list[bool]
) -> None:
    canonical = findings_of(case, render_alias(case, "smp"))
    text = render_from(case, local_names, renamed)
    assert findings_of(case, text) == canonical
    assert_fix_resolves_and_converges(case, text)
