"""A script that reaches SMP only through the project's own helper modules.

``train.py`` never names ``smdistributed``: it calls ``setup(args)``, ``wrap_model(model)``
and ``is_main_process()`` from ``utils/dist.py``, which does. Such a script is kept by the
prefilter (``engine.helper_reach``), its facts read the helpers that stand for the library as
the library (``program.objects.library_wrappers``), so the order, sampler and guard rules see
through them; and an ``args.rank`` the helper sets in branches (``if args.backend == "smp":
... elif ...``) is judged by the branch the job takes (SMP202).
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import finding_text, parsed, run_cli

from smpfix.engine.analysis import AnalysisOptions, analyze
from smpfix.engine.helper_reach import HelperReach
from smpfix.job.jobfacts import DeclaredJob
from smpfix.job.project import Project
from smpfix.program.objects.library_wrappers import library_reach
from smpfix.program.project.local_modules import LocalModules

SMP = "smdistributed.modelparallel.torch"

HELPER = """\
import smdistributed.modelparallel.torch as smp
import torch


def setup(args):
    smp.init()
    torch.cuda.set_device(smp.local_rank())
    args.rank = smp.rank()
    args.world_size = smp.size()
    return torch.device("cuda")


def wrap_model(model):
    model = smp.DistributedModel(model)
    return model


def wrap_second(args, model):
    return smp.DistributedModel(model)


def rank():
    return smp.rank()


def rank_or_zero():
    if not smp.is_initialized():
        return 0
    return smp.rank()


def is_main_process():
    return smp.rank() == 0


def seed_everything(seed):
    torch.manual_seed(seed)
"""

SCRIPT = """\
from torch.utils.data import DataLoader, DistributedSampler
import torch

from utils.dist import is_main_process, setup, wrap_model


def main(args):
    device = setup(args)
    sampler = DistributedSampler(dataset, num_replicas=args.world_size, rank=args.rank)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler, drop_last=True)
    model = wrap_model(build_model())
    if is_main_process():
        torch.save(model.state_dict(), "model.pt")
"""

UNRELATED = """\
from torch.utils.data import DataLoader, DistributedSampler

from utils.dist import seed_everything


def main(args):
    seed_everything(0)
    sampler = DistributedSampler(dataset)
    return DataLoader(dataset, batch_size=8, sampler=sampler)
"""


def _project(root: Path, script: str = SCRIPT, helper: str = HELPER) -> Path:
    (root / "utils").mkdir()
    (root / "utils" / "__init__.py").write_text("", encoding="utf-8")
    (root / "utils" / "dist.py").write_text(helper, encoding="utf-8")
    (root / "train.py").write_text(script, encoding="utf-8")
    return root


def _findings(root: Path, select: set[str], job: dict | None = None, name: str = "train.py"):
    path = root / name
    declared = (DeclaredJob("test job", job),) if job else ()
    options = AnalysisOptions(
        select=frozenset(select), declared_jobs=declared, project=Project.of((str(root),))
    )
    return list(analyze(path.read_text(encoding="utf-8"), str(path), options).findings)


def _reach(root: Path, source: str, name: str = "train.py"):
    path = str(root / name)
    return library_reach(parsed(source, path).facts, LocalModules(Project.of((str(root),)), path))


# -- the prefilter ----------------------------------------------------------------------------
def test_a_script_importing_a_helper_that_names_the_library_is_kept(workdir: Path) -> None:
    root = _project(workdir)
    reach = HelperReach(Project.of((str(root),)))
    assert reach.reaches(str(root / "train.py"), SCRIPT.encode())


def test_a_script_importing_no_helper_of_the_library_is_skipped(workdir: Path) -> None:
    root = _project(workdir, helper="import torch\n\n\ndef setup(args):\n    return args\n")
    reach = HelperReach(Project.of((str(root),)))
    assert not reach.reaches(str(root / "train.py"), SCRIPT.encode())
    assert not reach.reaches(str(root / "train.py"), b"import os\nimport numpy as np\n")


def test_the_helper_may_name_the_library_through_its_own_imports(workdir: Path) -> None:
    """``from utils import setup`` where ``utils/__init__.py`` re-exports ``.dist``'s."""
    root = _project(workdir)
    (root / "utils" / "__init__.py").write_text("from .dist import setup\n", encoding="utf-8")
    (root / "run.py").write_text("from utils import setup\n", encoding="utf-8")
    (root / "pkg").mkdir()
    (root / "pkg" / "trainer.py").write_text("from . import helpers\n", encoding="utf-8")
    (root / "pkg" / "helpers.py").write_text("from utils.dist import rank\n", encoding="utf-8")
    reach = HelperReach(Project.of((str(root),)))
    assert reach.reaches(str(root / "run.py"), b"from utils import (\n    setup,\n)\n")
    assert reach.reaches(str(root / "pkg" / "trainer.py"), b"from . import helpers\n")


def test_the_cli_checks_a_script_that_never_names_the_library(workdir: Path) -> None:
    root = _project(workdir)
    (root / "offline.py").write_text(UNRELATED, encoding="utf-8")
    result = run_cli(
        "check", "--job", "pipeline_parallel_degree=2", "--format", "json", ".", cwd=root
    )
    found = {
        (Path(f["filename"]).name, f["location"]["row"], f["code"])
        for f in json.loads(result.stdout)
    }
    assert ("train.py", 9, "SMP202") in found
    assert ("train.py", 13, "SMP302") in found
    # Kept by the prefilter (it imports the helper) but it uses nothing of the library there.
    assert not any(name == "offline.py" for name, _, _ in found)


# -- which helpers stand for the library -------------------------------------------------------
def test_wrappers_stand_for_what_they_return(workdir: Path) -> None:
    root = _project(workdir)
    source = "from utils.dist import rank, rank_or_zero, setup, wrap_model, wrap_second\n"
    reach = _reach(
        root, source + "setup(a)\nwrap_model(m)\nwrap_second(a, m)\nrank()\nrank_or_zero()\n"
    )
    assert reach.aliases == {
        "utils.dist.rank": f"{SMP}.rank",
        "utils.dist.setup": f"{SMP}.init",
        "utils.dist.wrap_model": f"{SMP}.DistributedModel",
    }


def test_a_module_of_the_library_a_helper_imports_stands_for_it(workdir: Path) -> None:
    root = _project(workdir)
    reach = _reach(root, "from utils.dist import smp\n\nsmp.barrier()\n")
    assert reach.aliases == {"utils.dist.smp": SMP}
    facts = parsed("from utils.dist import smp\n\nsmp.barrier()\n").facts
    assert not facts.imports_smp


def test_a_script_using_only_unrelated_helpers_reaches_nothing(workdir: Path) -> None:
    root = _project(workdir)
    assert not _reach(root, UNRELATED)


def test_a_helper_that_only_reads_the_library_makes_the_script_run_under_it(
    workdir: Path,
) -> None:
    """``args = dist_setting(args)`` sets ``args.rank = smp.rank()``: no alias, but the script
    runs the library's calls, so it is a script of the library."""
    root = _project(
        workdir,
        helper=HELPER
        + "\n\ndef dist_setting(args):\n    args.rank = smp.rank()\n    return args\n",
    )
    reach = _reach(root, "from utils.dist import dist_setting\n\nargs = dist_setting(args)\n")
    assert reach.aliases == {}
    assert reach.modules == (SMP,)


# -- the rules see through the wrappers ---------------------------------------------------------
def test_sampler_and_guard_rules_read_the_wrapped_calls(workdir: Path) -> None:
    root = _project(workdir)
    findings = _findings(root, {"SMP202", "SMP302", "SMP106"}, {"pipeline_parallel_degree": 2})
    assert [(f.code, f.start.line, f.severity.value) for f in findings] == [
        ("SMP202", 9, "error"),
        ("SMP302", 13, "error"),
    ]


def test_a_rank_wrapper_is_a_rank_value_and_guard(workdir: Path) -> None:
    helper = HELPER + (
        "\n\ndef dp_rank():\n    return smp.dp_rank()\n"
        "\n\ndef dp_size():\n    return smp.dp_size()\n"
    )
    script = """\
import torch
from torch.utils.data import DistributedSampler

from utils.dist import dp_rank, dp_size, rank, setup, wrap_model

setup(args)
sampler = DistributedSampler(dataset, num_replicas=dp_size(), rank=dp_rank())
model = wrap_model(build_model())
if rank() == 0:
    torch.save(model.state_dict(), "model.pt")
"""
    root = _project(workdir, script=script, helper=helper)
    findings = _findings(root, {"SMP202", "SMP302"}, {"pipeline_parallel_degree": 2})
    assert [(f.code, f.start.line) for f in findings] == [("SMP302", 10)]


def test_order_rules_read_a_model_wrapper_as_the_distributed_model(workdir: Path) -> None:
    script = """\
import smdistributed.modelparallel.torch as smp
import torch

from utils.dist import setup, wrap_model

setup(args)
with smp.tensor_parallelism():
    model = build_model()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
model = wrap_model(model)
optimizer = smp.DistributedOptimizer(optimizer)
"""
    root = _project(workdir, script=script)
    findings = _findings(root, {"SMP101", "SMP106"}, {"tensor_parallel_degree": 2})
    assert [(f.code, f.start.line, f.severity.value) for f in findings] == [("SMP101", 9, "error")]
    assert "`utils.dist.wrap_model` is read as `smp.DistributedModel`" in finding_text(findings[0])


def test_a_wrapper_whose_first_parameter_is_not_the_model_is_not_read_as_the_wrap(
    workdir: Path,
) -> None:
    script = SCRIPT.replace("wrap_model", "wrap_second").replace(
        "wrap_second(build_model())", "wrap_second(args, build_model())"
    )
    root = _project(workdir, script=script)
    reach = _reach(root, script)
    assert "utils.dist.wrap_second" not in reach.aliases


# -- args.rank set in branches -------------------------------------------------------------------
BRANCHING = """\
import smdistributed.modelparallel.torch as smp
import horovod.torch as hvd


def setup(args):
    smp.init()
    if args.use_smp:
        args.rank = smp.rank()
        args.world_size = smp.size()
    elif args.use_hvd:
        args.rank = hvd.rank()
        args.world_size = hvd.size()
    else:
        args.rank = 0
        args.world_size = 1
"""

BRANCHING_SCRIPT = """\
import argparse

from torch.utils.data import DataLoader, DistributedSampler

from utils.dist import setup

parser = argparse.ArgumentParser()
parser.add_argument("--use_smp", type=int)
parser.add_argument("--use_hvd", type=int, default=0)
args = parser.parse_args()
setup(args)
sampler = DistributedSampler(dataset, num_replicas=args.world_size, rank=args.rank)
"""

LAUNCHER = """\
from sagemaker.pytorch import PyTorch

PyTorch(
    entry_point="train.py",
    role="arn:aws:iam::111111111111:role/SageMaker",
    instance_type="ml.p4d.24xlarge",
    instance_count=1,
    framework_version="1.12.0",
    py_version="py38",
    hyperparameters={HYPERPARAMETERS},
    distribution={
        "smdistributed": {
            "modelparallel": {"enabled": True, "parameters": {"partitions": 2, "ddp": True}}
        },
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
).fit()
"""


def _branching(root: Path, hyperparameters: str) -> list[dict]:
    _project(root, script=BRANCHING_SCRIPT, helper=BRANCHING)
    (root / "launch.py").write_text(
        LAUNCHER.replace("{HYPERPARAMETERS}", hyperparameters), encoding="utf-8"
    )
    result = run_cli("check", "--select", "SMP202", "--format", "json", ".", cwd=root)
    return json.loads(result.stdout)


def test_the_branch_the_job_takes_decides(workdir: Path) -> None:
    findings = _branching(workdir, '{"use_smp": 1}')
    assert [(f["location"]["row"], f["severity"]) for f in findings] == [(12, "error")]


def test_an_undecided_branch_is_reported_with_if(workdir: Path) -> None:
    findings = _branching(workdir, "{}")
    assert [(f["location"]["row"], f["severity"]) for f in findings] == [(12, "warning")]
    assert "if the job takes `args.use_smp`" in findings[0]["message"]
    assert "smpfix cannot tell which one runs" in finding_text(findings[0])


def test_a_branch_the_job_does_not_take_decides_too(workdir: Path) -> None:
    assert _branching(workdir, '{"use_smp": 0, "use_hvd": 1}') == []


def test_a_rank_set_before_the_branch_is_not_read_as_the_libraries(workdir: Path) -> None:
    helper = BRANCHING.replace(
        "    smp.init()\n",
        "    smp.init()\n    args.rank = args.node * 8\n    args.world_size = 8 * args.nodes\n",
    )
    _project(workdir, script=BRANCHING_SCRIPT, helper=helper)
    assert _findings(workdir, {"SMP202"}, {"pipeline_parallel_degree": 2}) == []


def test_a_backend_named_by_a_string_is_the_library_switch(workdir: Path) -> None:
    """``if args.backend == "smp": smp.init()`` in the helper: an SMP job takes that branch."""
    helper = """\
import smdistributed.modelparallel.torch as smp
import os


def setup(args):
    if args.backend == "smp":
        smp.init()
        args.rank = smp.rank()
        args.world_size = smp.size()
    elif args.backend == "ddp":
        args.rank = int(os.environ["RANK"])
        args.world_size = int(os.environ["WORLD_SIZE"])
"""
    flags = (
        'parser.add_argument("--use_smp", type=int)\n'
        'parser.add_argument("--use_hvd", type=int, default=0)\n'
    )
    script = BRANCHING_SCRIPT.replace(
        flags, 'parser.add_argument("--backend", type=str, default="ddp")\n'
    )
    _project(workdir, script=script, helper=helper)
    findings = _findings(workdir, {"SMP202"}, {"pipeline_parallel_degree": 2})
    assert [(f.start.line, f.severity.value) for f in findings] == [(11, "error")]


# -- entry script and helper module --------------------------------------------------------------
def test_a_helper_in_a_package_takes_the_job_of_the_launched_script_above_it(
    workdir: Path,
) -> None:
    """``utils/dist.py`` runs in the processes of the ``train.py`` a launcher starts, which
    imports it through its package: it is judged with that script's job."""
    _project(workdir)
    (workdir / "launch.py").write_text(
        LAUNCHER.replace("{HYPERPARAMETERS}", "{}"), encoding="utf-8"
    )
    result = run_cli("check", "--show-job", "--exit-zero", "utils/dist.py", cwd=workdir)
    assert "the job of train.py, which imports it" in result.stdout
    assert "PP           on" in result.stdout


def test_a_package_helper_wrapping_the_model_is_no_script_missing_init(workdir: Path) -> None:
    """``pkg/model.py`` builds the ``DistributedModel`` for the launched ``train.py`` above
    it, which calls ``smp.init()`` first: SMP106 does not judge the helper as a script."""
    (workdir / "pkg").mkdir()
    (workdir / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (workdir / "pkg" / "model.py").write_text(
        "import smdistributed.modelparallel.torch as smp\n\n\n"
        "def build(model):\n    return smp.DistributedModel(model)\n",
        encoding="utf-8",
    )
    (workdir / "train.py").write_text(
        "import smdistributed.modelparallel.torch as smp\n\nfrom pkg.model import build\n\n"
        "smp.init()\nmodel = build(net)\n",
        encoding="utf-8",
    )
    (workdir / "launch.py").write_text(
        LAUNCHER.replace("{HYPERPARAMETERS}", "{}"), encoding="utf-8"
    )
    result = run_cli("check", "--select", "SMP106", "--format", "json", ".", cwd=workdir)
    assert json.loads(result.stdout) == []
