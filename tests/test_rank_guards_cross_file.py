"""A rank predicate imported from the project's own module guards like one written inline.

``if is_main_process(smp.rank()):`` with ``is_main_process`` in ``utils.py`` lets rank 0 alone
into what it guards: a collective there (``smp.save_checkpoint``) hangs the job (SMP302).
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from smpfix.cli import main

TRAIN = """\
import smdistributed.modelparallel.torch as smp
import torch

from utils import is_main_process, is_first_stage

smp.init()
model = smp.DistributedModel(Net())
optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters()))

if is_main_process(smp.rank()):
    smp.save_checkpoint("/opt/ml/checkpoints", tag="final", model=model, optimizer=optimizer)
if is_first_stage():
    smp.save_checkpoint("/opt/ml/checkpoints", tag="stage", model=model, optimizer=optimizer)
"""

UTILS = """\
import smdistributed.modelparallel.torch as smp


def is_main_process(rank):
    return rank == 0


def is_first_stage():
    return smp.pp_rank() == 0
"""


def _findings(root: Path) -> list[tuple[str, str, int]]:
    result = CliRunner().invoke(
        main,
        ["check", "--no-cache", "--select", "SMP302", "--output-format", "json", str(root)],
    )
    return [
        (Path(f["filename"]).name, f["code"], f["location"]["row"])
        for f in json.loads(result.output)
    ]


def test_an_imported_predicate_guards_the_collective(workdir: Path) -> None:
    (workdir / "train.py").write_text(TRAIN, encoding="utf-8")
    (workdir / "utils.py").write_text(UTILS, encoding="utf-8")
    assert _findings(workdir) == [("train.py", "SMP302", 11), ("train.py", "SMP302", 13)]


def test_an_imported_predicate_that_tests_no_rank_guards_nothing(workdir: Path) -> None:
    (workdir / "train.py").write_text(TRAIN, encoding="utf-8")
    (workdir / "utils.py").write_text(
        UTILS.replace("rank == 0", "rank is not None").replace("smp.pp_rank() == 0", "True"),
        encoding="utf-8",
    )
    assert _findings(workdir) == []


ENGINE = """\
import smdistributed.modelparallel.torch as smp


@smp.step
def eval_step(model, data):
    return model(data)


def evaluate_batch(model, data):
    return eval_step(model, data)


def evaluate(model, loader):
    for data in loader:
        evaluate_batch(model, data)


def log(message):
    print(message)
"""

EVALUATING = """\
import smdistributed.modelparallel.torch as smp
import torch

import engine
from engine import evaluate, log

smp.init({"pipeline_parallel_degree": 2, "microbatches": 4, "ddp": True})
model = smp.DistributedModel(Net())


def main(loader):
    if smp.rank() == 0:
        evaluate(model, loader)
        log("evaluated")
    if smp.rank() == 0:
        engine.evaluate(model, loader)
    evaluate(model, loader)
"""


def test_a_guarded_call_is_judged_by_what_the_imported_function_runs(workdir: Path) -> None:
    """``evaluate`` in engine.py runs an ``@smp.step`` function two calls down: under
    ``smp.rank() == 0`` the other pipeline stages never enter the step and the job hangs;
    ``log`` runs no collective, and the unguarded call is fine."""
    (workdir / "train.py").write_text(EVALUATING, encoding="utf-8")
    (workdir / "engine.py").write_text(ENGINE, encoding="utf-8")
    assert _findings(workdir) == [("train.py", "SMP302", 13), ("train.py", "SMP302", 16)]
