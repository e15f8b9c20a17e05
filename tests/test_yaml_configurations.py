"""Configuration kept in YAML files: what a launcher loads, and the dict a script builds for
``smp.init`` from a file its command line names (``smpfix.job.launcher_files``,
``smpfix.job.script_config``). YAML is parsed with ``yaml.safe_load`` only."""

from __future__ import annotations

import json
from pathlib import Path

import libcst as cst
import pytest
from conftest import run_cli

from smpfix.base.literals import UNKNOWN
from smpfix.job.launcher import find_launchers
from smpfix.program.facts import collect

SMP_YAML = """# the job's library settings
smp:
  enabled: true
  parameters:
    pipeline_parallel_degree: 2
    microbatches: 8
per_host: 8
"""


def _distribution(tmp_path: Path, loading: str) -> object:
    launcher = tmp_path / "launch.py"
    launcher.write_text(
        f"""import yaml
from omegaconf import OmegaConf
from sagemaker.pytorch import PyTorch
{loading}
PyTorch(entry_point="train.py", distribution={{
    "mpi": {{"enabled": True, "processes_per_host": config["per_host"]}},
    "smdistributed": {{"modelparallel": config["smp"]}},
}})
""",
        encoding="utf-8",
    )
    module = cst.parse_module(launcher.read_text(encoding="utf-8"))
    (found,) = find_launchers(module, collect(module).imports, str(launcher))
    assert found.distribution is not None
    return found.distribution.plain()


@pytest.mark.parametrize(
    "loading",
    [
        'config = yaml.safe_load(open("configs/smp.yaml"))',
        'with open("configs/smp.yaml") as handle:\n    config = yaml.safe_load(handle)',
        'with open("configs/smp.yaml") as handle:\n'
        "    config = yaml.load(handle, Loader=yaml.SafeLoader)",
        'config = yaml.safe_load(open("configs/smp.yaml").read())',
        'config = OmegaConf.load("configs/smp.yaml")',
    ],
)
def test_a_launcher_reads_the_yaml_file_it_loads(tmp_path: Path, loading: str) -> None:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "smp.yaml").write_text(SMP_YAML, encoding="utf-8")
    assert _distribution(tmp_path, loading) == {
        "mpi": {"enabled": True, "processes_per_host": 8},
        "smdistributed": {
            "modelparallel": {
                "enabled": True,
                "parameters": {"pipeline_parallel_degree": 2, "microbatches": 8},
            }
        },
    }


@pytest.mark.parametrize(
    "text",
    [
        "smp: [unclosed\n",  # not YAML
        "smp: !!python/object/apply:os.system ['touch pwned']\nper_host: 8\n",  # a code tag
        # Aliases that expand to far more values than the file holds.
        "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
        + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n"
            for i in range(6)
        )
        + "smp: *g\nper_host: 8\n",
    ],
)
def test_a_yaml_file_that_cannot_be_read_safely_leaves_the_values_unknown(
    tmp_path: Path, text: str
) -> None:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "smp.yaml").write_text(text, encoding="utf-8")
    distribution = _distribution(tmp_path, 'config = yaml.safe_load(open("configs/smp.yaml"))')
    assert distribution == {
        "mpi": {"enabled": True, "processes_per_host": UNKNOWN},
        "smdistributed": {"modelparallel": UNKNOWN},
    }
    assert not (tmp_path / "pwned").exists()


SCRIPT = """import argparse

import smdistributed.modelparallel.torch as smp
import yaml
from torch.utils.data import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--config", default="configs/default.yaml")
args = parser.parse_args()
with open(args.config) as handle:
    config = yaml.safe_load(handle)
smp.init(config["smp"])
sampler = DistributedSampler(dataset, num_replicas=smp.size(), rank=smp.rank())
"""


def _project(tmp_path: Path, launch: str) -> Path:
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "pipeline.yaml").write_text(
        "smp:\n  pipeline_parallel_degree: 2\n  microbatches: 4\n  ddp: true\n", encoding="utf-8"
    )
    (tmp_path / "configs" / "default.yaml").write_text(
        "smp:\n  pipeline_parallel_degree: 1\n  ddp: true\n", encoding="utf-8"
    )
    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    (tmp_path / "run.sh").write_text(launch, encoding="utf-8")
    return tmp_path


def _sampler_findings(root: Path) -> list[tuple[str, str]]:
    out = run_cli("check", "--format", "json", "--no-cache", "--exit-zero", ".", cwd=root).stdout
    return [(f["code"], f["severity"]) for f in json.loads(out) if f["code"] == "SMP202"]


def test_a_script_configured_by_the_yaml_file_its_launcher_names(tmp_path: Path) -> None:
    root = _project(tmp_path, "mpirun -np 8 python train.py --config configs/pipeline.yaml\n")
    assert _sampler_findings(root) == [("SMP202", "error")]
    out = run_cli("check", "--show-job", "--format", "concise", "train.py", cwd=root).stdout
    assert (
        "PP           on       smp.init(...) at line 12, read from configs/pipeline.yaml,"
        " run by launcher run.sh:1"
    ) in out


def test_without_the_argument_the_default_file_configures_the_script(tmp_path: Path) -> None:
    root = _project(tmp_path, "mpirun -np 8 python train.py\n")
    # The default file has no pipeline parallelism: the sampler by global rank is right there.
    assert _sampler_findings(root) == []
    out = run_cli("check", "--show-job", "--format", "concise", "train.py", cwd=root).stdout
    assert "PP           off      smp.init(...) at line 12, read from configs/default.yaml" in out


def test_an_argument_smpfix_cannot_read_leaves_the_file_unknown(tmp_path: Path) -> None:
    root = _project(tmp_path, 'mpirun -np 8 python train.py --config "$CONFIG"\n')
    out = run_cli("check", "--show-job", "--format", "concise", "train.py", cwd=root).stdout
    assert "read from" not in out


def test_verbose_output_names_a_configuration_file_that_could_not_be_read(
    tmp_path: Path,
) -> None:
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    (tmp_path / "smp.yaml").write_text("parameters: [unclosed\n", encoding="utf-8")
    (tmp_path / "train.py").write_text(
        "import smdistributed.modelparallel.torch as smp\nsmp.init()\n", encoding="utf-8"
    )
    (tmp_path / "launch.py").write_text(
        "import yaml\nfrom sagemaker.pytorch import PyTorch\n"
        'config = yaml.safe_load(open("smp.yaml"))\n'
        'PyTorch(entry_point="train.py", distribution={"smdistributed": {"modelparallel":'
        ' {"enabled": True, "parameters": config["parameters"]}}})\n',
        encoding="utf-8",
    )
    completed = run_cli("check", "-v", "--no-cache", "train.py", cwd=tmp_path)
    assert "train.py: its launcher loads" in completed.stderr
    assert "smp.yaml, which could not be read" in completed.stderr


def test_a_cached_launcher_is_read_again_when_its_yaml_file_is_fixed(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    (tmp_path / "smp.yaml").write_text("parameters: [unclosed\n", encoding="utf-8")
    (tmp_path / "train.py").write_text(
        "import smdistributed.modelparallel.torch as smp\nsmp.init()\n", encoding="utf-8"
    )
    (tmp_path / "launch.py").write_text(
        "import yaml\nfrom sagemaker.pytorch import PyTorch\n"
        'config = yaml.safe_load(open("smp.yaml"))\n'
        'PyTorch(entry_point="train.py", instance_type="ml.p4d.24xlarge", instance_count=1,'
        ' distribution={"smdistributed": {"modelparallel": {"enabled": True, "parameters":'
        ' config["parameters"]}}, "mpi": {"enabled": True, "processes_per_host": 8}})\n',
        encoding="utf-8",
    )
    cache = str(tmp_path / ".cache")

    def tp() -> str:
        out = run_cli(
            "check",
            "--show-job",
            "--cache-dir",
            cache,
            "--format",
            "concise",
            "train.py",
            cwd=tmp_path,
        ).stdout
        return next(line.split()[1] for line in out.splitlines() if line.strip().startswith("TP "))

    assert tp() == "unknown"
    (tmp_path / "smp.yaml").write_text(
        "parameters:\n  tensor_parallel_degree: 4\n  ddp: true\n", encoding="utf-8"
    )
    assert tp() == "on"
