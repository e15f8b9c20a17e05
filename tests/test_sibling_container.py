"""A script no launcher starts, beside the one a launcher does, runs in that launcher's container.

SageMaker uploads the launched script's folder into the container the estimator names, so an
older variant kept beside it (``deprecated_train.py`` next to ``train.py``) can only run that
container's library release there. Its job takes the release (the rules bounded by version
use it) and nothing else: the configuration is the launched script's own.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

LAUNCHER = """\
from sagemaker.pytorch import PyTorch

PyTorch(
    entry_point="train.py",
    source_dir="src",
    role="arn:aws:iam::111122223333:role/sm",
    instance_type="ml.p3.16xlarge",
    instance_count=2,
    framework_version="FRAMEWORK",
    py_version="py38",
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": {"partitions": 2, "microbatches": 4, "ddp": True}}},
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
).fit()
"""  # noqa: E501

SCRIPT = """\
import smdistributed.modelparallel.torch as smp
import torch
from torch.optim.lr_scheduler import StepLR

smp.init()
model = smp.DistributedModel(torch.nn.Linear(8, 8))
optimizer = smp.DistributedOptimizer(torch.optim.Adadelta(model.parameters(), lr=1.0))
scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
"""


def _project(root: Path, framework: str) -> None:
    (root / "src").mkdir()
    (root / "launch.py").write_text(LAUNCHER.replace("FRAMEWORK", framework), encoding="utf-8")
    (root / "src" / "train.py").write_text(SCRIPT, encoding="utf-8")
    (root / "src" / "deprecated_train.py").write_text(SCRIPT, encoding="utf-8")


def _findings(root: Path) -> list[tuple[str, str, str]]:
    completed = run_cli(
        "check", ".", "--select", "SMP113", "--format", "json", "--exit-zero", "--no-cache",
        cwd=root,
    )  # fmt: skip
    assert completed.code == 0, completed.stderr
    return sorted(
        (Path(item["filename"]).name, item["code"], item["severity"])
        for item in json.loads(completed.stdout)
    )


def test_the_unlaunched_variant_runs_the_release_of_its_folder_s_container(workdir: Path) -> None:
    # PyTorch 1.10 containers hold SMP 1.7 or 1.8: no fp16 setting, no wrapper to unwrap.
    _project(workdir, "1.10.2")
    assert _findings(workdir) == []
    shown = run_cli("check", "--show-job", "src/deprecated_train.py", cwd=workdir)
    assert "SMP 1.7 or 1.8" in shown.stdout
    assert "the container of launcher launch.py:3, which uploads this folder" in shown.stdout


def test_a_container_with_the_fp16_wrapper_keeps_the_advice(workdir: Path) -> None:
    # PyTorch 1.12 containers hold SMP 1.10 or later, where fp16 may be on: the variant, whose
    # configuration is unknown, keeps the advice; the launched script runs with fp16 off.
    _project(workdir, "1.12.0")
    assert _findings(workdir) == [("deprecated_train.py", "SMP113", "hint")]


def test_no_launcher_in_the_folder_leaves_the_release_unknown(workdir: Path) -> None:
    _project(workdir, "1.10.2")
    (workdir / "launch.py").unlink()
    # Neither script has a launcher now: both may run any release with fp16 on.
    assert _findings(workdir) == [
        ("deprecated_train.py", "SMP113", "hint"),
        ("train.py", "SMP113", "hint"),
    ]
