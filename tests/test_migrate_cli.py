"""``smpfix migrate`` as a user runs it: a diff and a report by default, ``--apply`` to write,
exit codes 0 (everything moved), 1 (a person must finish) and 2 (a file could not be read)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli
from test_notebooks import make_notebook

from smpfix.engine import migration
from smpfix.engine.discovery import DiscoveredFile
from smpfix.job.project import Project
from smpfix.migrate.items import FileMigration, MigrationItem, Outcome
from smpfix.program.model import Program

LAUNCHERS = Path(__file__).parent / "fixtures" / "migrate" / "launchers"

SCRIPT = """import smdistributed.modelparallel.torch as smp

smp.init()
print(f"rank {smp.rank()} of {smp.size()}")
"""


def project(tmp_path: Path, fixture: str) -> Path:
    shutil.copy(LAUNCHERS / fixture, tmp_path / "launch.py")
    (tmp_path / "train.py").write_text(SCRIPT)
    return tmp_path


def test_by_default_it_prints_a_diff_and_writes_nothing(tmp_path: Path) -> None:
    project(tmp_path, "mpi_to_torch_distributed.py")
    before = (tmp_path / "launch.py").read_bytes()
    done = run_cli("migrate", ".", cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert '-        "mpi": {"enabled": True, "processes_per_host": 8},' in done.stdout
    assert '+        "torch_distributed": {"enabled": True},' in done.stdout
    assert "changes moved mechanically (100%)" in done.stdout
    assert (tmp_path / "launch.py").read_bytes() == before


def test_apply_writes_the_migrated_launcher_and_keeps_everything_else(tmp_path: Path) -> None:
    project(tmp_path, "key_mappings.py")
    done = run_cli("migrate", "--apply", ".", cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert "--- a/" not in done.stdout
    expected = (LAUNCHERS / "key_mappings.migrated.py").read_text()
    assert (tmp_path / "launch.py").read_text() == expected
    script = (tmp_path / "train.py").read_text()
    assert "smdistributed" not in script and "tsm.init()" in script
    again = run_cli("migrate", ".", cwd=tmp_path)
    assert "--- a/" not in again.stdout and again.code == 0


def test_apply_keeps_line_endings_and_encoding_declaration(tmp_path: Path) -> None:
    text = (LAUNCHERS / "mpi_to_torch_distributed.py").read_text()
    (tmp_path / "launch.py").write_bytes(
        ("# -*- coding: latin-1 -*-\n# caf\xe9\n" + text).replace("\n", "\r\n").encode("latin-1")
    )
    assert run_cli("migrate", "--apply", ".", cwd=tmp_path).code == 0
    raw = (tmp_path / "launch.py").read_bytes()
    assert b"caf\xe9\r\n" in raw and b'"torch_distributed": {"enabled": True},\r\n' in raw
    assert b"\n" not in raw.replace(b"\r\n", b"")


def test_a_scaffold_exits_1_and_leaves_a_todo(tmp_path: Path) -> None:
    project(tmp_path, "v1_only_keys_dropped.py")
    done = run_cli("migrate", "--apply", ".", cwd=tmp_path)
    assert done.code == 1
    assert (
        "# smpfix-migrate: TODO(launch): `custom_mpi_options`"
        in (tmp_path / "launch.py").read_text()
    )


def test_a_blocked_job_exits_1_and_keeps_its_v1_launcher(tmp_path: Path) -> None:
    project(tmp_path, "pipeline_blocks.py")
    done = run_cli("migrate", "--apply", ".", cwd=tmp_path)
    assert done.code == 1
    assert "kept on SMP v1" in done.stdout
    text = (tmp_path / "launch.py").read_text()
    assert '"mpi": {"enabled": True, "processes_per_host": 8}' in text
    assert "# smpfix-migrate: TODO(pipeline-parallelism)" in text


def test_a_file_that_does_not_parse_exits_2_and_the_others_still_migrate(tmp_path: Path) -> None:
    project(tmp_path, "mpi_to_torch_distributed.py")
    (tmp_path / "broken.py").write_text(
        "import smdistributed.modelparallel.torch as smp\ndef f(:\n"
    )
    done = run_cli("migrate", ".", cwd=tmp_path)
    assert done.code == 2
    assert "broken.py:2:7: error: syntax error" in done.stderr
    assert '+        "torch_distributed": {"enabled": True},' in done.stdout


def test_json_report_schema(tmp_path: Path) -> None:
    project(tmp_path, "v1_only_keys_dropped.py")
    done = run_cli("migrate", "--format", "json", ".", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert report["version"] == 1
    assert set(report) == {"version", "jobs", "changed_files", "errors", "summary"}
    changed = {file["path"]: file["diff"] for file in report["changed_files"]}
    assert set(changed) == {"launch.py", "train.py"}
    assert changed["launch.py"].startswith("--- a/launch.py\n")
    (job,) = report["jobs"]
    assert set(job) == {"name", "files", "status", "container", "counts", "moved_share", "items"}
    assert job["status"] == "needs-a-person"
    assert job["files"] == ["launch.py", "train.py"]
    assert job["container"] == "PyTorch 2.4.1, py311 (SMP 2.7.0)"
    assert set(job["items"][0]) == {
        "path",
        "line",
        "outcome",
        "topic",
        "message",
        "link",
        "blocking",
    }
    assert all(item["link"].startswith("https://docs.aws.amazon.com/") for item in job["items"])
    summary = report["summary"]
    assert summary["changes"] == summary["moved"] + summary["scaffold"] + summary["report"]


def test_a_migrated_launcher_has_no_v2_configuration_error(tmp_path: Path) -> None:
    project(tmp_path, "v1_only_keys_dropped.py")
    (tmp_path / "train.py").unlink()
    assert run_cli("migrate", "--apply", ".", cwd=tmp_path).code == 1
    done = run_cli("check", "--select", "SMP0", "launch.py", cwd=tmp_path)
    assert " error" not in done.stdout, done.stdout


def test_a_notebook_launcher_changes_only_its_launch_cell(tmp_path: Path) -> None:
    launcher = (LAUNCHERS / "mpi_to_torch_distributed.py").read_text()
    path = tmp_path / "launch.ipynb"
    path.write_text(
        make_notebook(
            [("markdown", "# Train"), ("code", "%pip install sagemaker\n"), ("code", launcher)]
        )
    )
    assert run_cli("migrate", "--apply", ".", cwd=tmp_path).code == 0
    cells = json.loads(path.read_text())["cells"]
    assert cells[1]["source"] == "%pip install sagemaker\n"
    assert cells[2]["source"] == (LAUNCHERS / "mpi_to_torch_distributed.migrated.py").read_text()
    assert cells[2]["outputs"] and cells[2]["metadata"] == {"tags": ["x"]}
    again = run_cli("migrate", "--format", "json", ".", cwd=tmp_path)
    assert json.loads(again.stdout)["changed_files"] == []


def blocking_script(program: Program) -> FileMigration:
    """A stand-in for the script half that finds something v2 cannot run (``smp.partition``)."""
    item = MigrationItem(
        program.path, 4, Outcome.REPORT, "pipeline-parallelism", "smp.partition", "https://x", True
    )
    return FileMigration(program.path, program.file.text, "changed = True\n", (item,))


def test_a_blocking_item_in_the_script_keeps_the_whole_job_on_v1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project(tmp_path, "mpi_to_torch_distributed.py")
    monkeypatch.setattr(migration, "migrate_script", blocking_script)
    monkeypatch.chdir(tmp_path)
    run = migration.migrate_files(
        [DiscoveredFile("launch.py", True), DiscoveredFile("train.py", True)],
        Project.of((".",)),
        (),
    )
    (job,) = run.jobs
    assert job.blocked
    by_path = {file.path: file.after for file in run.files}
    # The launcher stays on v1 too, and says why.
    launcher = (LAUNCHERS / "mpi_to_torch_distributed.py").read_text()
    assert by_path["launch.py"] == launcher.replace(
        "estimator = PyTorch(",
        "# smpfix-migrate: TODO(pipeline-parallelism): train.py: smp.partition <https://x>\n"
        "estimator = PyTorch(",
    )
    assert by_path["train.py"] == SCRIPT.replace(
        "print(",
        "# smpfix-migrate: TODO(pipeline-parallelism): smp.partition <https://x>\nprint(",
    )


def test_a_stated_job_answers_for_a_value_the_launcher_does_not_write(tmp_path: Path) -> None:
    shutil.copy(LAUNCHERS / "non_literal_values.py", tmp_path / "launch.py")
    stated_one = run_cli(
        "migrate", "--format", "json", "--job", "pipeline_parallel_degree=1", ".", cwd=tmp_path
    )
    (job,) = json.loads(stated_one.stdout)["jobs"]
    assert job["status"] == "moved"
    stated_two = run_cli(
        "migrate", "--format", "json", "--job", "pipeline_parallel_degree=2", ".", cwd=tmp_path
    )
    (job,) = json.loads(stated_two.stdout)["jobs"]
    assert job["status"] == "kept-on-v1" and stated_two.code == 1


def test_a_script_migrated_without_its_launcher_says_so(tmp_path: Path) -> None:
    project(tmp_path, "mpi_to_torch_distributed.py")
    (tmp_path / "pyproject.toml").write_text("")
    done = run_cli("migrate", "--format", "json", "train.py", cwd=tmp_path)
    (job,) = json.loads(done.stdout)["jobs"]
    assert job["files"] == ["train.py"]
    assert job["items"][0]["message"].startswith(
        "its launcher launch.py:5 is not among the migrated paths"
    )
    assert done.code == 1


def test_a_tensorflow_job_holds_its_scripts_and_rewrites_none(tmp_path: Path) -> None:
    shutil.copy(LAUNCHERS / "tensorflow_blocks.py", tmp_path / "launch.py")
    (tmp_path / "train.py").write_text(
        "import smdistributed.modelparallel.tensorflow as smp\n\nsmp.init()\n"
    )
    done = run_cli("migrate", "--format", "json", ".", cwd=tmp_path)
    (job,) = json.loads(done.stdout)["jobs"]
    assert job["files"] == ["launch.py", "train.py"] and job["status"] == "kept-on-v1"
    assert [file["path"] for file in json.loads(done.stdout)["changed_files"]] == ["launch.py"]


def test_notebook_items_are_placed_in_their_cell(tmp_path: Path) -> None:
    launcher = (LAUNCHERS / "v1_only_keys_dropped.py").read_text()
    (tmp_path / "launch.ipynb").write_text(
        make_notebook([("code", "import sagemaker\n"), ("markdown", "x"), ("code", launcher)])
    )
    done = run_cli("migrate", "--format", "json", ".", cwd=tmp_path)
    (job,) = json.loads(done.stdout)["jobs"]
    assert job["name"] == "launch.ipynb:cell 3:15"
    dropped = [item for item in job["items"] if item["message"].startswith("`partitions`")]
    assert dropped[0]["path"] == "launch.ipynb:cell 3" and dropped[0]["line"] == 4


@pytest.mark.parametrize("fixture", ["key_mappings", "non_literal_values"])
def test_inserted_lines_take_the_file_s_line_endings(fixture: str, tmp_path: Path) -> None:
    text = (LAUNCHERS / f"{fixture}.py").read_text()
    (tmp_path / "launch.py").write_bytes(text.replace("\n", "\r\n").encode())
    assert run_cli("migrate", "--apply", ".", cwd=tmp_path).code in (0, 1)
    expected = (LAUNCHERS / f"{fixture}.migrated.py").read_text().replace("\n", "\r\n")
    assert (tmp_path / "launch.py").read_bytes() == expected.encode()


SHELL_LAUNCHER = """#!/bin/bash
export SM_HP_MP_PARAMETERS='{{"partitions": {degree}, "ddp": true}}'
mpirun --allow-run-as-root -np 8 python train.py
"""


@pytest.mark.parametrize(("degree", "pipeline"), [(1, False), (2, True)])
def test_a_shell_launcher_is_reported_and_keeps_its_script_on_v1(
    degree: int, pipeline: bool, tmp_path: Path
) -> None:
    """smpfix does not rewrite shell launchers: the script waits for a person to start it with
    torchrun, so the job keeps working under v1 meanwhile."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "run.sh").write_text(SHELL_LAUNCHER.format(degree=degree))
    done = run_cli("migrate", "--format", "json", ".", cwd=tmp_path)
    assert done.code == 1
    (job,) = json.loads(done.stdout)["jobs"]
    (item,) = [item for item in job["items"] if item["topic"] == "launch"]
    assert item["outcome"] == "report" and item["blocking"] is True
    assert job["status"] == "kept-on-v1"
    assert item["message"].startswith(
        "run.sh:3 runs it with pipeline"
        if pipeline
        else "it is started by the shell launcher run.sh:3"
    )
    (changed,) = json.loads(done.stdout)["changed_files"]
    assert changed["diff"].splitlines()[3].startswith("+# smpfix-migrate: TODO(launch): ")
    assert "smdistributed" in (tmp_path / "train.py").read_text()


def test_an_undecodable_file_is_one_error_line_and_exit_2(tmp_path: Path) -> None:
    project(tmp_path, "mpi_to_torch_distributed.py")
    (tmp_path / "latin.py").write_bytes(
        b"import smdistributed.modelparallel.torch as smp\nx = '\xe9'\n"
    )
    done = run_cli("migrate", "--apply", ".", cwd=tmp_path)
    assert done.code == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("latin.py:2:1: error: cannot decode as utf-8")
    assert '"torch_distributed": {"enabled": True}' in (tmp_path / "launch.py").read_text()


def broken_script(program: Program) -> FileMigration:
    """A stand-in for a script half that would write code that does not parse."""
    return FileMigration(program.path, program.file.text, "def broken(:\n", ())


def test_a_migration_that_does_not_parse_is_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project(tmp_path, "mpi_to_torch_distributed.py")
    monkeypatch.setattr(migration, "migrate_script", broken_script)
    monkeypatch.chdir(tmp_path)
    run = migration.migrate_files(
        [DiscoveredFile("launch.py", True), DiscoveredFile("train.py", True)],
        Project.of((".",)),
        (),
    )
    assert [file.path for file in run.files] == ["launch.py"]
    (error,) = run.errors
    assert error.path == "train.py" and "does not parse" in error.message
