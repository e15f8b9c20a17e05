"""Properties of every script migration, over generated v1 scripts: the result parses, the
user's own code between the library's calls is all still there, a second migration changes
nothing, and each item links its page at a line of the original file.

The scripts are put together from the v1 constructs the migration knows (and some it does not),
in any order and nesting, under any job: what a real script combines.
"""

from __future__ import annotations

import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from migrate_program import migrate_text

_HEADER = [
    "import smdistributed.modelparallel.torch as smp",
    "import torch",
    "from transformers import AutoModelForCausalLM",
]

# One statement (or block) per line, with the names they use defined by the header and
# ``_SETUP``; each is valid Python on its own.
_PIECES = [
    "smp.init()",
    "smp.init({'ddp': True})",
    "print(smp.rank(), smp.size(), smp.local_rank())",
    "start = smp.dp_rank() * 4",
    "smp.barrier()",
    "model = smp.DistributedModel(model)",
    "optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters()))",
    "optimizer = smp.DistributedOptimizer(optimizer)",
    "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)",
    "model.backward(loss)",
    "scaler = smp.amp.GradScaler()",
    "optimizer.clip_master_grads(1.0)",
    "loss = train_step(model, batch).reduce_mean()",
    "_, loss_mb = pair_step(model, batch)\nloss = loss_mb.reduce_mean()",
    "first, *rest = pair_step(model, batch)\nprint(rest[0].stack(), first.outputs, first[0])",
    "print(pair_step(model, batch))",
    "for layer in model.get_module().layers:\n    smp.set_activation_checkpointing(layer)",
    "with smp.tensor_parallelism():\n    model = AutoModelForCausalLM.from_pretrained(name)",
    "with smp.model_creation(delay_param_initialization=True):\n    model = build()",
    "smp.save_checkpoint('/ckpt', tag='t', partial=True, model=model, optimizer=optimizer)",
    "state = smp.resume_from_checkpoint('/ckpt', tag='t')",
    "state = smp.resume_from_checkpoint('/ckpt', tag=None, partial=True)",
    "state = smp.resume_from_checkpoint('/ckpt', tag=name, partial=bool(name))",
    "gathered = smp.allgather(loss, smp.DP_GROUP)",
    "if smp.rank() == 0:\n    print('first')",
    "smp.nn.DistributedTransformer(num_layers=2)",
    "smp.partition(0)",
]
_SETUP = [
    "name = 'EleutherAI/pythia-70m'",
    "model = AutoModelForCausalLM.from_pretrained(name)",
    "optimizer = None",
    "loss = batch = None",
    "",
    "@smp.step",
    "def train_step(model, batch):",
    "    loss = model(batch).loss",
    "    model.backward(loss)",
    "    return loss",
    "",
    "@smp.step",
    "def pair_step(model, batch):",
    "    output = model(batch)",
    "    model.backward(output.loss)",
    "    return output.logits, output.loss",
    "",
]

_JOBS = st.fixed_dictionaries(
    {},
    optional={
        "microbatches": st.sampled_from([1, 2]),
        "bf16": st.booleans(),
        "fp16": st.booleans(),
        "tensor_parallel_degree": st.sampled_from([1, 2]),
        "partitions": st.sampled_from([1, 2]),
        "ddp": st.just(True),
    },
)


@st.composite
def _scripts(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(st.sampled_from(_PIECES), max_size=8))
    in_function = draw(st.booleans())
    # Code of the user's own between the library's: every line of it must survive.
    mixed = [line for at, piece in enumerate(pieces) for line in (f"keep_{at} = {at}", piece)]
    body = "\n".join(mixed) or "pass"
    if in_function:
        body = "def main():\n" + "\n".join("    " + line for line in body.splitlines())
    return "\n".join([*_HEADER, *_SETUP, body, ""])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scripts(), _JOBS)
def test_a_migration_parses_and_a_second_changes_nothing(text: str, job: dict[str, object]) -> None:
    first = migrate_text(text, job)
    cst.parse_module(first.after)
    lines = text.splitlines()
    for item in first.items:
        assert item.link.startswith("https://"), item
        assert 1 <= item.line <= len(lines) and lines[item.line - 1].strip(), item
    for line in text.splitlines():
        if line.strip().startswith("keep_"):
            assert line in first.after.splitlines(), line
    again = migrate_text(first.after, job)
    assert again.after == first.after
