"""Tensor-parallel module rules ask whether the program marks modules, across its files.

``smp.DistributedModel`` replaces only the modules the program marked for tensor parallelism
(``smpfix.program.objects.tp_marking``). The marking often sits in the project's own model module
(``model.py``), so the answer follows the script's imports; a model from a module outside
the checked paths leaves it unknown. The fixture harness checks single files, so these tests
build small projects.
"""

from __future__ import annotations

from pathlib import Path

from smpfix.engine.analysis import AnalysisOptions, analyze
from smpfix.job.jobfacts import DeclaredJob
from smpfix.job.project import Project

TRAIN = """\
import smdistributed.modelparallel.torch as smp
import torch
from model import build_model


def main(config):
    smp.init()
    model = build_model(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model = smp.DistributedModel(model)
    optimizer = smp.DistributedOptimizer(optimizer)
    return model, optimizer
"""

MARKED = """\
import smdistributed.modelparallel.torch as smp
from transformers import AutoModelForCausalLM


def build_model(config):
    with smp.tensor_parallelism():
        return AutoModelForCausalLM.from_config(config)
"""

PLAIN = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return self.fc(x)


def build_model(config):
    return Net(config.width)
"""

SWITCHED = """\
import smdistributed.modelparallel.torch as smp
from transformers import AutoModelForCausalLM


def build_model(config, use_tp=True):
    with smp.tensor_parallelism(enabled=use_tp):
        return AutoModelForCausalLM.from_config(config)
"""


def _findings(root: Path, degree: int) -> list[tuple[str, int, str]]:
    path = root / "train.py"
    declared = (DeclaredJob("test job", {"tensor_parallel_degree": degree}),)
    options = AnalysisOptions(
        select=frozenset({"SMP101"}), declared_jobs=declared, project=Project.of((str(root),))
    )
    found = analyze(path.read_text(encoding="utf-8"), str(path), options).findings
    return [(f.code, f.start.line, f.severity.value) for f in found]


def _project(root: Path, model: str | None) -> Path:
    (root / "train.py").write_text(TRAIN, encoding="utf-8")
    if model is not None:
        (root / "model.py").write_text(model, encoding="utf-8")
    return root


def test_marking_in_an_imported_module_replaces_modules(workdir: Path) -> None:
    root = _project(workdir, MARKED)
    assert _findings(root, 4) == [("SMP101", 9, "error")]
    # At degree 1 the marked modules are replaced all the same.
    assert _findings(root, 1) == [("SMP101", 9, "error")]


def test_imported_model_without_marking_replaces_nothing(workdir: Path) -> None:
    root = _project(workdir, PLAIN)
    assert _findings(root, 4) == []


def test_model_from_a_module_outside_the_checked_paths_is_unknown(workdir: Path) -> None:
    root = _project(workdir, None)
    assert _findings(root, 4) == [("SMP101", 9, "warning")]
    assert _findings(root, 1) == []


def test_marking_switched_by_a_value_from_another_file_is_unknown(workdir: Path) -> None:
    root = _project(workdir, SWITCHED)
    assert _findings(root, 4) == [("SMP101", 9, "warning")]
