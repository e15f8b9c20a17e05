"""SMP108 and SMP205 across the files of a project: an initialisation in a helper module, a
launcher that says the instance type, hyperparameters that override argparse defaults, and a
data helper module checked on behalf of the script that imports it."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import finding_text, run_cli

from smpfix.engine.analysis import AnalysisOptions, analyze
from smpfix.job.project import Project

TRAIN_WITH_HELPER_INIT = """\
import smdistributed.modelparallel.torch as smp
from utils import setup_smp


def main():
    setup_smp()
    print(smp.rank())
    if smp.rank() == 0:
        smp.init()


main()
"""

UTILS = """\
import smdistributed.modelparallel.torch as smp


def setup_smp():
    smp.init({"ddp": True})
"""


def _codes(path: Path, roots: tuple[str, ...], code: str) -> list[tuple[str, int]]:
    options = AnalysisOptions(select=frozenset({code}), project=Project.of(roots))
    return [
        (f.code, f.start.line)
        for f in analyze(path.read_text(encoding="utf-8"), str(path), options).findings
    ]


def test_smp108_trusts_an_imported_function_that_initialises(workdir: Path) -> None:
    (workdir / "train.py").write_text(TRAIN_WITH_HELPER_INIT, encoding="utf-8")
    (workdir / "utils.py").write_text(UTILS, encoding="utf-8")
    assert _codes(workdir / "train.py", (str(workdir),), "SMP108") == []


def test_smp108_without_the_helper_flags_the_rank_query(workdir: Path) -> None:
    (workdir / "train.py").write_text(TRAIN_WITH_HELPER_INIT, encoding="utf-8")
    (workdir / "utils.py").write_text("def setup_smp():\n    pass\n", encoding="utf-8")
    assert _codes(workdir / "train.py", (str(workdir),), "SMP108") == [("SMP108", 7), ("SMP108", 8)]


LAUNCHER = """\
from sagemaker.pytorch import PyTorch

PyTorch(
    entry_point="train.py",
    source_dir="code",
    instance_type="{instance}",
    instance_count=2,
    framework_version="1.13.1",
    hyperparameters={{"workers": 6}},
    distribution={{
        "smdistributed": {{"modelparallel": {{"enabled": True, "parameters": {{"pipeline_parallel_degree": 2}}}}}},
        "mpi": {{"enabled": True, "processes_per_host": 8}},
    }},
).fit()
"""  # noqa: E501

TRAIN_WITH_LOADERS = """\
import argparse

import smdistributed.modelparallel.torch as smp
import torch

import data

parser = argparse.ArgumentParser()
parser.add_argument("--workers", type=int, default=0)
args = parser.parse_args()
smp.init()
train = torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=args.workers)
evaluation = data.eval_loader(dataset)
"""

DATA = """\
from torch.utils.data import DataLoader


def eval_loader(dataset):
    return DataLoader(dataset, batch_size=8, num_workers=2)
"""


def _project(root: Path, instance: str) -> None:
    (root / "code").mkdir()
    (root / "launch.py").write_text(LAUNCHER.format(instance=instance), encoding="utf-8")
    (root / "code" / "train.py").write_text(TRAIN_WITH_LOADERS, encoding="utf-8")
    (root / "code" / "data.py").write_text(DATA, encoding="utf-8")


def test_smp205_reads_the_launcher_and_the_data_helper(workdir: Path) -> None:
    _project(workdir, "ml.p4d.24xlarge")
    completed = run_cli(
        "check", ".", "--select", "SMP205", "--format", "concise", "--no-cache", cwd=workdir
    )
    places = sorted(
        Path(line.split(":")[0]).name + ":" + line.split(":")[1]
        for line in completed.stdout.splitlines()
        if "SMP205" in line
    )
    assert places == ["data.py:5", "train.py:12"], completed.stdout
    report = run_cli(
        "check", ".", "--select", "SMP205", "--format", "json", "--no-cache", cwd=workdir
    )
    assert any(
        "hyperparameter 'workers'" in finding_text(item) for item in json.loads(report.stdout)
    )


def test_smp205_is_quiet_on_other_instances(workdir: Path) -> None:
    _project(workdir, "ml.p3.16xlarge")
    completed = run_cli(
        "check", ".", "--select", "SMP205", "--format", "concise", "--no-cache", cwd=workdir
    )
    assert "SMP205" not in completed.stdout, completed.stdout


SMP108_LAUNCHER = """\
from sagemaker.pytorch import PyTorch

PyTorch(
    entry_point="train.py",
    instance_type="ml.p3.16xlarge",
    instance_count=1,
    framework_version="{framework}",
    environment={environment},
    distribution={{
        "smdistributed": {{"modelparallel": {{"enabled": True, "parameters": {{"pipeline_parallel_degree": 2}}}}}},
        "mpi": {{"enabled": True, "processes_per_host": 8}},
    }},
).fit()
"""  # noqa: E501

SMP108_SCRIPT = """\
import smdistributed.modelparallel.torch as smp

TP = smp.tp_size() > 1


def main():
    smp.init()
    model = smp.DistributedModel(Net())


main()
"""


def _smp108_severity(root: Path, framework: str, environment: str) -> list[str]:
    (root / "launch.py").write_text(
        SMP108_LAUNCHER.format(framework=framework, environment=environment), encoding="utf-8"
    )
    (root / "train.py").write_text(SMP108_SCRIPT, encoding="utf-8")
    completed = run_cli(
        "check",
        ".",
        "--select",
        "SMP108",
        "--format",
        "concise",
        "--show-hints",
        "--no-cache",
        cwd=root,
    )
    return [
        line.split("SMP108 ")[1].split(":")[0]
        for line in completed.stdout.splitlines()
        if "SMP108" in line
    ]


def test_smp108_is_a_hint_where_the_launch_initialises_on_import(workdir: Path) -> None:
    assert _smp108_severity(workdir, "1.13.1", "{}") == ["hint"]


def test_smp108_is_an_error_where_only_the_script_initialises(workdir: Path) -> None:
    assert _smp108_severity(workdir, "1.13.1", '{"SMP_MANUAL_INIT": "1"}') == ["error"]


def test_smp108_is_an_error_on_a_release_without_import_time_initialisation(workdir: Path) -> None:
    assert _smp108_severity(workdir, "1.8.1", "{}") == ["error"]


def test_smp108_is_a_warning_when_the_release_may_be_either(workdir: Path) -> None:
    assert _smp108_severity(workdir, "1.12.0", "{}") == ["warning"]


SMP116_SCRIPT = """\
import smdistributed.modelparallel.torch as smp


def main(args):
    smp.init({"pipeline_parallel_degree": 2, "auto_partition": not args.manual_partition, "default_partition": 0})
    model = smp.DistributedModel(GPT())
    for i, block in enumerate(model.get_module().blocks):
        smp.set_partition(block, i % 2)


main(None)
"""  # noqa: E501


def test_smp116_under_a_launch_that_ignores_the_scripts_dict(workdir: Path) -> None:
    (workdir / "launch.py").write_text(
        SMP108_LAUNCHER.format(framework="1.13.1", environment="{}"), encoding="utf-8"
    )
    (workdir / "train.py").write_text(SMP116_SCRIPT, encoding="utf-8")
    completed = run_cli(
        "check", ".", "--select", "SMP116", "--format", "concise", "--no-cache", cwd=workdir
    )
    assert "train.py:8:9: SMP116 warning" in completed.stdout, completed.stdout
    explained = run_cli(
        "check", ".", "--select", "SMP116", "--format", "json", "--no-cache", cwd=workdir
    )
    assert "returns at once" in finding_text(json.loads(explained.stdout)[0])


def test_smp116_when_the_scripts_dict_may_apply(workdir: Path) -> None:
    (workdir / "launch.py").write_text(
        SMP108_LAUNCHER.format(framework="1.13.1", environment='{"SMP_MANUAL_INIT": "1"}'),
        encoding="utf-8",
    )
    (workdir / "train.py").write_text(SMP116_SCRIPT, encoding="utf-8")
    completed = run_cli(
        "check", ".", "--select", "SMP116", "--format", "concise", "--no-cache", cwd=workdir
    )
    assert "SMP116" not in completed.stdout, completed.stdout
