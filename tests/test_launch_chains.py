"""Launch chains: notebooks and Python launchers that run commands, shell scripts that run
Python or other shell scripts, and the script at the end linked to the chain that starts it.
(``smpfix.job.shell_launcher``, ``smpfix.job.command_launches``, ``smpfix.job.launch_chains``)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import pytest
from conftest import run_cli

from smpfix.job.linking import LaunchRecord, may_be_launcher, read_launcher, read_shell_launcher
from smpfix.job.project import Project
from smpfix.job.shell_launcher import ShellLaunch, command_launch

SCRIPT = """import smdistributed.modelparallel.torch as smp

smp.init({"pipeline_parallel_degree": 2, "microbatches": 4, "ddp": True})
"""


def _launch(line: str) -> Optional[ShellLaunch]:
    return command_launch(line.split(), {}, 1, "/work")


@pytest.mark.parametrize(
    ("command", "script", "arguments"),
    [
        ("python train.py --epochs 2", "train.py", ("--epochs", "2")),
        ("python3 -u src/train.py", "src/train.py", ()),
        (
            "torchrun --nproc_per_node 8 --master_port 29500 run.py --lr 1e-4",
            "run.py",
            ("--lr", "1e-4"),
        ),
        ("python -m torch.distributed.run --nproc_per_node=8 run.py", "run.py", ()),
        ("python -m torch.distributed.launch --nproc_per_node 4 run.py", "run.py", ()),
        (
            "deepspeed --num_gpus 8 pretrain.py --deepspeed_config ds.json",
            "pretrain.py",
            ("--deepspeed_config", "ds.json"),
        ),
        ("mpirun -np 8 -x NCCL_DEBUG=INFO python train.py", "train.py", ()),
        ("bash scripts/train.sh --epochs 1", "scripts/train.sh", ("--epochs", "1")),
        ("sh -e train.sh", "train.sh", ()),
        ("./scripts/train.sh", "./scripts/train.sh", ()),
    ],
)
def test_a_command_that_starts_a_script_names_it_and_its_arguments(
    command: str, script: str, arguments: tuple[str, ...]
) -> None:
    found = _launch(command)
    assert found is not None
    assert (found.script, found.arguments) == (script, arguments)


@pytest.mark.parametrize(
    "command",
    [
        "pip install -r requirements.txt",
        "python -m pip install einops",
        "python -c print(1)",
        "python -m my_package.train",
        "python ${SCRIPT}",
        "torchrun --nproc_per_node 8",
        "bash -c ls",
        "nvidia-smi",
    ],
)
def test_a_command_that_starts_no_script_smpfix_can_read_starts_none(command: str) -> None:
    assert _launch(command) is None


def test_mpirun_passes_its_x_variables_to_the_script() -> None:
    found = _launch("mpirun -np 8 -x SMP_MANUAL_INIT=1 python train.py")
    assert found is not None and found.environment == {"SMP_MANUAL_INIT": "1"}


def _write(root: Path, files: dict[str, str]) -> None:
    (root / ".git").mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _records(root: Path, launcher: str) -> list[LaunchRecord]:
    path = root / launcher
    text = path.read_text(encoding="utf-8")
    if launcher.endswith(".sh"):
        return read_shell_launcher(str(path), text, str(root))
    return read_launcher(str(path), text, str(root))


def _linked(records: list[LaunchRecord]) -> list[tuple[str, str]]:
    found = [record.linked() for record in records]
    return [(Path(link.script).name, link.job.source) for link in found if link is not None]


def _notebook(*cells: str) -> str:
    return json.dumps(
        {
            "cells": [
                {"cell_type": "code", "metadata": {}, "outputs": [], "source": cell}
                for cell in cells
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def test_a_notebook_subprocess_runs_a_shell_script_that_starts_the_script(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "launch.ipynb": _notebook(
                "import subprocess",
                'subprocess.run(["bash", "scripts/train.sh", "--epochs", "2"], check=True)',
            ),
            "scripts/train.sh": "set -e\nexport NCCL_DEBUG=WARN\nmpirun -np 8 python src/run.py\n",
            "src/run.py": SCRIPT,
        },
    )
    records = _records(tmp_path, "launch.ipynb")
    assert _linked(records) == [
        ("run.py", "launcher scripts/train.sh:3, started by launch.ipynb"),
    ]
    # The shell script runs in the notebook's folder, and is a dependency of the record.
    assert records[0].dependencies == (str(tmp_path / "scripts" / "train.sh"),)
    assert records[0].linked().script == str(tmp_path / "src" / "run.py")  # type: ignore[union-attr]
    assert not records[0].job.configures


@pytest.mark.parametrize(
    "call",
    [
        'subprocess.run("python train.py --epochs 2", shell=True)',
        'subprocess.check_call(["python", "train.py", "--epochs", "2"])',
        'subprocess.Popen("python train.py --epochs 2".split())',
        'subprocess.call(shlex.split("python train.py --epochs 2"))',
        'os.system("python train.py --epochs 2")',
        'os.system(f"python train.py --epochs {EPOCHS}")',
        'os.system("python " + SCRIPT + " --epochs 2")',
        'subprocess.run(["python", SCRIPT, "--epochs", str(EPOCHS)])',
    ],
)
def test_every_way_of_running_a_command_links_the_script(tmp_path: Path, call: str) -> None:
    _write(
        tmp_path,
        {
            "launch.py": "import os\nimport shlex\nimport subprocess\n\nEPOCHS = 2\n"
            f'SCRIPT = "train.py"\n{call}\n',
            "train.py": SCRIPT,
        },
    )
    records = _records(tmp_path, "launch.py")
    assert _linked(records) == [("train.py", "launcher launch.py:7")]
    assert dict(records[0].hyperparameters) == {"epochs": 2}


def test_a_command_built_from_unknown_values_resolves_what_is_literal(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "launch.py": "import subprocess\nimport sys\n\n"
            "def main(args):\n"
            '    subprocess.run(f"torchrun --nproc_per_node {args.gpus} train.py --lr {args.lr}",'
            " shell=True)\n"
            '    subprocess.run([sys.executable, "train.py"])\n'
            '    subprocess.run(f"python {args.script}", shell=True)\n'
            "    subprocess.run(args.command, shell=True)\n",
            "train.py": SCRIPT,
        },
    )
    records = _records(tmp_path, "launch.py")
    # Only the first names its script; its argument is there, with an unknown value.
    assert _linked(records) == [("train.py", "launcher launch.py:5")]
    assert dict(records[0].hyperparameters) == {}
    assert not records[0].hyperparameters_complete


def test_the_cwd_argument_moves_the_folder_the_command_runs_in(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "launch.py": 'import subprocess\nsubprocess.run(["python", "train.py"], cwd="code")\n',
            "code/train.py": SCRIPT,
        },
    )
    records = _records(tmp_path, "launch.py")
    assert records[0].linked().script == str(tmp_path / "code" / "train.py")  # type: ignore[union-attr]


def test_a_notebook_shell_line_and_bash_cell_start_scripts(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "launch.ipynb": _notebook(
                "!pip install -q -r requirements.txt",
                "!torchrun --nproc_per_node {gpus} first.py",
                "%%bash\nset -e\nmpirun -np 8 python second.py",
            ),
            "first.py": SCRIPT,
            "second.py": SCRIPT,
        },
    )
    assert [name for name, _ in _linked(_records(tmp_path, "launch.ipynb"))] == [
        "first.py",
        "second.py",
    ]


def test_a_shell_script_that_runs_another_passes_its_exported_parameters(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "outer.sh": 'export SM_HP_MP_PARAMETERS=\'{"partitions": 2, "ddp": true}\'\n'
            "cd jobs\nbash inner.sh\n",
            "jobs/inner.sh": "mpirun -np 8 python train.py\n",
            "jobs/train.py": SCRIPT,
        },
    )
    records = _records(tmp_path, "outer.sh")
    assert _linked(records) == [("train.py", "launcher jobs/inner.sh:1, started by outer.sh:3")]
    assert records[0].job.settings == {"partitions": 2, "ddp": True}
    assert records[0].job.complete


def test_a_shell_script_that_runs_itself_or_leaves_the_project_ends_the_chain(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    _write(
        project,
        {
            "loop.sh": "bash loop.sh\npython train.py\nbash ../outside.sh\n",
            "train.py": SCRIPT,
        },
    )
    (tmp_path / "outside.sh").write_text("python train.py\n", encoding="utf-8")
    assert _linked(_records(project, "loop.sh")) == [("train.py", "launcher loop.sh:2")]


def test_a_shell_script_that_runs_something_else_links_only_that(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "run.sh": "python tools/prepare.py --out data\npip install einops\n"
            "python -m pip install -r requirements.txt\n",
            "tools/prepare.py": "import numpy\n",
        },
    )
    assert _linked(_records(tmp_path, "run.sh")) == [("prepare.py", "launcher run.sh:1")]


def test_a_launch_that_configures_nothing_gives_way_to_one_that_does(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "local.sh": "python code/train.py\n",
            "launch.py": "from sagemaker.pytorch import PyTorch\n"
            'PyTorch(entry_point="train.py", source_dir="code", instance_type="ml.p4d.24xlarge",'
            " instance_count=1, framework_version='1.13.1', distribution={'smdistributed':"
            " {'modelparallel': {'enabled': True, 'parameters': {'tensor_parallel_degree': 2}}},"
            " 'mpi': {'enabled': True, 'processes_per_host': 8}})\n",
            "code/train.py": SCRIPT,
        },
    )
    links = [
        link
        for name in ("local.sh", "launch.py")
        for record in _records(tmp_path, name)
        if (link := record.linked()) is not None
    ]
    project = Project((str(tmp_path),)).with_links(links)
    (only,) = project.launchers_of(str(tmp_path / "code" / "train.py"))
    assert only.job.source.startswith("launcher launch.py:2")


def test_a_chain_replaces_the_shell_scripts_own_link(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "launch.py": 'import os\nos.system("bash run.sh")\n',
            "run.sh": "python train.py\n",
            "train.py": SCRIPT,
        },
    )
    links = [
        link
        for name in ("run.sh", "launch.py")
        for record in _records(tmp_path, name)
        if (link := record.linked()) is not None
    ]
    project = Project((str(tmp_path),)).with_links(links)
    (only,) = project.launchers_of(str(tmp_path / "train.py"))
    assert only.job.source == "launcher run.sh:1, started by launch.py:2"


def test_show_job_says_which_chain_runs_the_script_its_dict_configures(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pyproject.toml": "",
            "launch.ipynb": _notebook('import subprocess\nsubprocess.run(["bash", "train.sh"])'),
            "train.sh": "mpirun -np 8 python src/train.py\n",
            "src/train.py": SCRIPT,
        },
    )
    out = run_cli("check", "--show-job", "--format", "concise", "src/train.py", cwd=tmp_path).stdout
    assert (
        "PP           on       smp.init({...}) at line 3, run by launcher train.sh:1,"
        " started by launch.ipynb"
    ) in out
    assert "train.sh:1, started by launch.ipynb starts it without SM_HP_MP_PARAMETERS" in out


@pytest.mark.parametrize(
    ("raw", "path", "expected"),
    [
        (b'import subprocess\nsubprocess.run(["bash", "scripts/train.sh"])\n', "a.py", True),
        (b"import os\nos.system(f'torchrun --nproc_per_node {n} run.py')\n", "a.py", True),
        (
            b'import os\ncmd = """\n  mpirun -np 8 python run.py\n"""\nos.system(cmd)\n',
            "a.py",
            True,
        ),
        (b'{"cells": [{"source": ["!deepspeed pretrain.py"]}]}', "a.ipynb", True),
        # A command that names no runner in a string, and a runner named only in a comment.
        (b"import subprocess\nsubprocess.run(command)  # python train.py\n", "a.py", False),
        (b"import subprocess\nsubprocess.run(['nvidia-smi'])\n", "a.py", False),
        # No command at all: a notebook that only mentions Python.
        (b'{"metadata": {"kernelspec": {"name": "python3"}}}', "a.ipynb", False),
    ],
)
def test_the_prefilter_keeps_files_that_may_run_a_launch_command(
    raw: bytes, path: str, expected: bool
) -> None:
    assert may_be_launcher(raw, path) is expected
