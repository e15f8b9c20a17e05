"""A launcher in a branch its file's own values do not take is a job the code offers.

``strategy = "ddp"`` then ``if strategy == "ddp": ... elif strategy == "smp": PyTorch(...)``:
SageMaker never starts the model-parallel job, but the code offers it; what would break there
(on the launcher's configuration, and on the script it would start) is a hint, not silence,
and an error or warning once the branch is the one taken.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

LAUNCHER = """\
from sagemaker.pytorch import PyTorch

strategy = "{strategy}"

if strategy == "ddp":
    estimator = PyTorch(
        entry_point="train_ddp.py",
        framework_version="1.12.1",
        py_version="py38",
        instance_type="ml.p3.16xlarge",
        instance_count=2,
        distribution={{"smdistributed": {{"dataparallel": {{"enabled": True}}}}}},
    )
elif strategy == "smp":
    estimator = PyTorch(
        entry_point="train.py",
        framework_version="1.12.1",
        py_version="py38",
        instance_type="ml.p3.16xlarge",
        instance_count=2,
        distribution={{
            "smdistributed": {{"modelparallel": {{"enabled": True, "parameters": {{
                "pipeline_parallel_degree": 2, "microbatches": 4, "ddp": True}}}}}},
            "mpi": {{"enabled": True, "processes_per_host": 2}},
        }},
        debugger_hook_config=False,
    )
estimator.fit()
"""

SCRIPT = """\
import smdistributed.modelparallel.torch as smp
import torch
from torch.utils.data import DataLoader, DistributedSampler

smp.init()
dataset = torch.utils.data.TensorDataset(torch.zeros(64, 4))
sampler = DistributedSampler(dataset, num_replicas=smp.size(), rank=smp.rank())
loader = DataLoader(dataset, batch_size=8, sampler=sampler, drop_last=True)
model = smp.DistributedModel(torch.nn.Linear(4, 4))
"""


def _findings(root: Path, strategy: str) -> list[tuple[str, int, str, str]]:
    (root / "launch.py").write_text(LAUNCHER.format(strategy=strategy), encoding="utf-8")
    (root / "train.py").write_text(SCRIPT, encoding="utf-8")
    (root / "train_ddp.py").write_text("import torch\n", encoding="utf-8")
    result = run_cli("check", ".", "--no-cache", "--output-format", "json", cwd=root)
    return sorted(
        (f["filename"].rsplit("/", 1)[-1], f["location"]["row"], f["code"], f["severity"])
        for f in json.loads(result.stdout)
    )


def test_the_branch_not_taken_offers_its_job_as_hints(workdir: Path) -> None:
    assert _findings(workdir, "ddp") == [
        ("launch.py", 24, "SMP818", "hint"),
        ("train.py", 7, "SMP202", "hint"),
    ]


def test_the_branch_taken_is_the_job(workdir: Path) -> None:
    assert _findings(workdir, "smp") == [
        ("launch.py", 24, "SMP818", "warning"),
        ("train.py", 7, "SMP202", "error"),
    ]


def test_an_untaken_branch_says_why_its_finding_is_a_hint(workdir: Path) -> None:
    _findings(workdir, "ddp")
    result = run_cli("check", ".", "--no-cache", "--show-hints", cwd=workdir)
    assert 'in the branch `strategy == "smp"`' in result.stdout


CHOOSING_LAUNCHER = """\
from sagemaker.pytorch import PyTorch

hyperparameters = {{"epochs": 2, "{strategy}": True}}

instance_type = "ml.p3.16xlarge"
distribution = None
if hyperparameters.get("data_parallel"):
    entry_point = "train_ddp.py"
    distribution = {{"smdistributed": {{"dataparallel": {{"enabled": True}}}}}}
elif hyperparameters.get("model_parallel"):
    entry_point = "train.py"
    distribution = {{"mpi": {{"enabled": True, "processes_per_host": 2}}}}
    distribution["smdistributed"] = {{
        "modelparallel": {{"enabled": True, "parameters": {{
            "pipeline_parallel_degree": 2, "microbatches": 4, "ddp": True}}}}
    }}
else:
    entry_point = "train_ddp.py"
    instance_type = "ml.p3.2xlarge"

estimator = PyTorch(
    entry_point=entry_point,
    framework_version="1.12.1",
    py_version="py38",
    instance_type=instance_type,
    instance_count=2,
    distribution=distribution,
    debugger_hook_config=False,
)
estimator.fit()
"""


def _chosen(root: Path, strategy: str) -> list[tuple[str, int, str, str]]:
    (root / "launch.py").write_text(CHOOSING_LAUNCHER.format(strategy=strategy), encoding="utf-8")
    (root / "train.py").write_text(SCRIPT, encoding="utf-8")
    (root / "train_ddp.py").write_text("import torch\n", encoding="utf-8")
    result = run_cli("check", ".", "--no-cache", "--output-format", "json", cwd=root)
    return sorted(
        (f["filename"].rsplit("/", 1)[-1], f["location"]["row"], f["code"], f["severity"])
        for f in json.loads(result.stdout)
    )


def test_a_distribution_chosen_in_an_untaken_branch_is_offered(workdir: Path) -> None:
    """The branch only builds ``distribution`` (by subscripts too) and the estimator after the
    ``if`` reads it: the job of that branch is offered, its findings are hints, and the
    single-GPU ``else`` branch's instance type is no model-parallel job's."""
    assert _chosen(workdir, "data_parallel") == [
        ("launch.py", 12, "SMP818", "hint"),
        ("train.py", 7, "SMP202", "hint"),
    ]


def test_a_distribution_chosen_in_the_taken_branch_is_the_job(workdir: Path) -> None:
    assert _chosen(workdir, "model_parallel") == [
        ("launch.py", 12, "SMP818", "warning"),
        ("train.py", 7, "SMP202", "error"),
    ]
