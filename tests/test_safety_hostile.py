"""Hostile inputs: smpfix never hangs on, floods itself with, or wanders into what a path names.

Each test reproduces one failure of an adversarial run (issue 23) in a temporary folder:
FIFOs are made with ``os.mkfifo`` and never written, so code that opened one would block
(the command is then ended by a timeout and the test fails); "large files" are sparse; the
real ``/dev/zero`` is only ever linked to, never written.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import run_cli

from smpfix.base.safe_read import JSON_LIMIT, RefusedFile, read_regular

HEADER = "import smdistributed.modelparallel.torch as smp\n"
SCRIPT = (
    HEADER + "import torch\n\n"
    "smp.init()\n"
    "model = smp.DistributedModel(build_model())\n\n\n"
    "def save(path):\n"
    "    if smp.dp_rank() == 0:\n"
    "        smp.save(model.local_state_dict(), path, partial=True)\n"
)
PARAMETERS = b'{"tensor_parallel_degree": 4, "pipeline_parallel_degree": 1}'


def launcher(parameters: str) -> str:
    return (
        "from sagemaker.pytorch import PyTorch\n"
        "estimator = PyTorch(entry_point='train.py', instance_type='ml.p4d.24xlarge',"
        " instance_count=1, distribution={'smdistributed': {'modelparallel': {'enabled': True,"
        f" 'parameters': {parameters!r}}}}}, 'mpi': {{'enabled': True, 'processes_per_host': 8}}}})\n"
    )


# A run that used to hang on a FIFO is ended after this long (the test then fails); a run
# that does not hang takes a second or two.
HANG = 60


def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    (root / "train.py").write_text(SCRIPT)
    return root


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ": error: " in line]


# -- the one way smpfix reads a file it chose to open ------------------------------------------


def test_a_regular_file_within_the_cap_is_read(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_bytes(PARAMETERS)
    assert read_regular(str(tmp_path / "p.json"), JSON_LIMIT, inside=str(tmp_path)) == PARAMETERS


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p.json")
    with pytest.raises(RefusedFile, match="it is a FIFO, not a regular file"):
        read_regular(str(tmp_path / "p.json"), JSON_LIMIT)


def test_a_character_device_is_refused(tmp_path: Path) -> None:
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    with pytest.raises(RefusedFile, match="it is a device"):
        read_regular(str(tmp_path / "zero.json"), JSON_LIMIT)


def test_a_file_over_the_cap_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with open(big, "wb") as handle:
        handle.truncate(JSON_LIMIT + 1)  # sparse: costs nothing on disk
    with pytest.raises(RefusedFile, match="larger than 10 MB"):
        read_regular(str(big), JSON_LIMIT)


def test_a_link_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    inside = tmp_path / "inside"
    inside.mkdir()
    (tmp_path / "secret.json").write_bytes(PARAMETERS)
    (inside / "p.json").symlink_to(tmp_path / "secret.json")
    with pytest.raises(RefusedFile, match="outside the project"):
        read_regular(str(inside / "p.json"), JSON_LIMIT, inside=str(inside))


# -- a launcher's "parameters": "<path>" ---------------------------------------------------------


def test_a_launcher_naming_a_fifo_gets_one_line_and_the_run_goes_on(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "launch.py").write_text(launcher("smp.json"))
    os.mkfifo(root / "smp.json")
    result = run_cli("--no-cache", "--format", "concise", str(root), timeout=HANG)
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert error_lines(result.stderr) == [
        f"{root / 'launch.py'}:2:13: error: parameters file 'smp.json': not read: it is a FIFO,"
        " not a regular file"
    ]
    assert f"{root / 'train.py'}:" in result.stdout  # the script is still checked


@pytest.mark.parametrize(
    ("named", "reason"),
    [
        ("/dev/zero", "it is a device, not a regular file"),
        ("../outside.json", "it is outside the project"),
        ("big.json", "it is larger than 10 MB"),
    ],
)
def test_a_launcher_naming_what_is_not_a_small_project_file(
    tmp_path: Path, named: str, reason: str
) -> None:
    root = project(tmp_path)
    (tmp_path / "outside.json").write_bytes(PARAMETERS)
    with open(root / "big.json", "wb") as handle:
        handle.write(PARAMETERS + b" " * JSON_LIMIT)
    (root / "launch.py").write_text(launcher(named))
    result = run_cli("--no-cache", "--format", "concise", str(root / "launch.py"))
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert error_lines(result.stderr) == [
        f"{root / 'launch.py'}:2:13: error: parameters file {named!r}: not read: {reason}"
    ]


def test_checking_a_sibling_reads_no_named_device(tmp_path: Path) -> None:
    """The launcher search reads every launcher of the project even when one script is
    checked; a launcher naming a FIFO must not hang that run."""
    root = project(tmp_path)
    (root / "launch.py").write_text(launcher("smp.json"))
    os.mkfifo(root / "smp.json")
    result = run_cli("--no-cache", "--format", "concise", str(root / "train.py"), timeout=HANG)
    assert result.code == 1 and "Traceback" not in result.stderr, result.stderr
    assert "SMP301 [*] warning: " in result.stdout, result.stdout
