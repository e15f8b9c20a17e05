"""SMP202 and SMP204 follow the data pipeline into a helper module (``data.py``).

A training script often builds its sampler and DataLoader in a ``data.py`` that never
imports the library. When both files are among the checked paths, the helper is checked on
behalf of the script, with the script's job: a global-rank sampler there is SMP202, and a
loader the script trains on without any sharding is SMP204. The fixture harness checks
single files, so these tests build a small project.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import finding_text, run_cli

from smpfix.engine.analysis import AnalysisOptions, analyze
from smpfix.job.project import Project

TRAIN = """\
import smdistributed.modelparallel.torch as smp
import data


@smp.step
def train_step(model, batch):
    loss = model(batch)
    model.backward(loss)
    return loss


smp.init()
with smp.tensor_parallelism():
    model = build_model()
model = smp.DistributedModel(model)
loader = data.make_loader(args)
for batch in loader:
    train_step(model, batch)
"""

DATA_UNSHARDED = """\
from torch.utils.data import DataLoader


def make_loader(args):
    dataset = load(args.path)
    loader = DataLoader(dataset, batch_size=8, shuffle=True, drop_last=True)
    return loader
"""

DATA_GLOBAL_SAMPLER = """\
from torch.utils.data import DataLoader, DistributedSampler


def make_loader(args):
    dataset = load(args.path)
    sampler = DistributedSampler(dataset, shuffle=True)
    return DataLoader(dataset, batch_size=8, sampler=sampler, drop_last=True)
"""


def _project(root: Path, data: str) -> Path:
    (root / "train.py").write_text(TRAIN, encoding="utf-8")
    (root / "data.py").write_text(data, encoding="utf-8")
    return root


def _findings(root: Path, select: str, job: dict | None = None) -> list:
    from smpfix.job.jobfacts import DeclaredJob

    path = root / "train.py"
    declared = (DeclaredJob("test job", job),) if job else ()
    options = AnalysisOptions(
        select=frozenset({select}), declared_jobs=declared, project=Project.of((str(root),))
    )
    return list(analyze(path.read_text(encoding="utf-8"), str(path), options).findings)


def test_unsharded_loader_in_helper_is_a_hint_on_the_helper(workdir: Path) -> None:
    root = _project(workdir, DATA_UNSHARDED)
    findings = _findings(root, "SMP204")
    assert [(Path(f.path).name, f.start.line, f.severity.value) for f in findings] == [
        ("data.py", 6, "hint")
    ]
    assert "`train_step` of train.py" in finding_text(findings[0])
    assert "found while checking" in findings[0].evidence[0]


def test_sharded_helper_loader_is_quiet(workdir: Path) -> None:
    sharded = DATA_UNSHARDED.replace(
        "loader = DataLoader(dataset, batch_size=8, shuffle=True, drop_last=True)",
        "loader = DataLoader(dataset, batch_size=8, sampler=make_sampler(dataset), drop_last=True)",
    )
    root = _project(workdir, sharded)
    assert _findings(root, "SMP204") == []


def test_global_rank_sampler_in_helper(workdir: Path) -> None:
    root = _project(workdir, DATA_GLOBAL_SAMPLER)
    findings = _findings(root, "SMP202", {"pipeline_parallel_degree": 2})
    assert [(Path(f.path).name, f.start.line, f.severity.value) for f in findings] == [
        ("data.py", 6, "error")
    ]
    # The helper does not import the library, so no fix can name it: nothing to apply.
    assert findings[0].fix is None


def test_cli_checks_the_helper_and_leaves_it_unwritten(workdir: Path) -> None:
    root = _project(workdir, DATA_GLOBAL_SAMPLER)
    result = run_cli(
        "check",
        "--select",
        "SMP202",
        "--job",
        "pipeline_parallel_degree=2",
        "--format",
        "json",
        ".",
        cwd=root,
    )
    assert result.code == 1, result.stderr
    findings = json.loads(result.stdout)
    assert [(f["code"], Path(f["filename"]).name, f["location"]["row"]) for f in findings] == [
        ("SMP202", "data.py", 6)
    ]
    applied = run_cli(
        "check",
        "--select",
        "SMP202",
        "--job",
        "pipeline_parallel_degree=2",
        "--apply",
        ".",
        cwd=root,
    )
    assert applied.code == 1
    assert (root / "data.py").read_text(encoding="utf-8") == DATA_GLOBAL_SAMPLER


def test_helper_outside_the_checked_paths_is_not_read(workdir: Path) -> None:
    root = _project(workdir, DATA_UNSHARDED)
    result = run_cli(
        "check",
        "--select",
        "SMP202,SMP204",
        "--job",
        "pipeline_parallel_degree=2",
        "train.py",
        cwd=root,
    )
    assert result.code == 0, result.stdout + result.stderr


ARGS_SCRIPT = """\
import argparse

import smdistributed.modelparallel.torch as smp
import torch
from torch.utils.data import DataLoader, DistributedSampler

from dist_utils import init_distributed

smp.init({"pipeline_parallel_degree": 2, "microbatches": 4, "ddp": True})
parser = argparse.ArgumentParser()
args = parser.parse_args()
init_distributed(args)
dataset = torch.utils.data.TensorDataset(torch.zeros(64, 4))
sampler = DistributedSampler(dataset, num_replicas=args.world_size, rank=args.rank)
loader = DataLoader(dataset, batch_size=8, sampler=sampler, drop_last=True)
model = smp.DistributedModel(torch.nn.Linear(4, 4))
"""

ARGS_HELPER = """\
import smdistributed.modelparallel.torch as smp


def init_distributed(args):
    args.rank = {rank}
    args.world_size = {size}
"""


def _sampler_findings(workdir: Path, rank: str, size: str) -> list[tuple[str, int]]:
    (workdir / "train.py").write_text(ARGS_SCRIPT, encoding="utf-8")
    (workdir / "dist_utils.py").write_text(
        ARGS_HELPER.format(rank=rank, size=size), encoding="utf-8"
    )
    result = run_cli(
        "check", "--no-cache", "--select", "SMP202", "--output-format", "json", str(workdir)
    )
    return [(f["code"], f["location"]["row"]) for f in json.loads(result.stdout)]


def test_attributes_a_helper_module_sets_from_global_ranks_shard_by_them(workdir: Path) -> None:
    assert _sampler_findings(workdir, "smp.rank()", "smp.size()") == [("SMP202", 14)]


def test_attributes_a_helper_module_sets_from_replica_ranks_are_right(workdir: Path) -> None:
    assert _sampler_findings(workdir, "smp.rdp_rank()", "smp.rdp_size()") == []


def test_attributes_set_from_something_else_are_not_judged(workdir: Path) -> None:
    rank, size = 'int(os.environ["RANK"])', 'int(os.environ["WORLD_SIZE"])'
    assert _sampler_findings(workdir, rank, size) == []


def test_the_configuration_of_a_helper_that_initialises_the_library_is_the_scripts(
    workdir: Path,
) -> None:
    """``init_distributed(args)`` in dist_utils.py calls ``smp.init({...})`` with pipeline
    parallelism: the script's job is that configuration, so the global-rank sampler is an
    error, not a warning about a setting smpfix cannot see."""
    init = 'smp.init({"pipeline_parallel_degree": 2, "microbatches": 4, "ddp": True})\n'
    (workdir / "train.py").write_text(ARGS_SCRIPT.replace(init, ""), encoding="utf-8")
    helper = ARGS_HELPER.format(rank="smp.rank()", size="smp.size()").replace(
        "def init_distributed(args):\n", f"def init_distributed(args):\n    {init}"
    )
    (workdir / "dist_utils.py").write_text(helper, encoding="utf-8")
    result = run_cli(
        "check", "--no-cache", "--select", "SMP202", "--output-format", "json", str(workdir)
    )
    assert [
        (f["code"], f["location"]["row"], f["severity"]) for f in json.loads(result.stdout)
    ] == [("SMP202", 13, "error")]
