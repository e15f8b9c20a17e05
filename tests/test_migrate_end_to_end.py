"""``smpfix migrate`` on the shipped examples, every realistic project of ``tests/realistic/``
and a project written to move completely.

On each, as a user runs it from the project's folder: nothing fails to read, every item links a
v2 page, every changed file parses, a second run changes nothing, a launcher that moved gets no
error from the SMP v2 configuration rules, and a job that moved completely imports no SMP v1 and
gets no error from ``smpfix check`` at all.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

PROJECTS = sorted(p for p in (ROOT / "tests" / "realistic").iterdir() if p.is_dir())
EXAMPLES = [ROOT / "examples" / "pytorch" / "correct", ROOT / "examples" / "pytorch" / "pitfalls"]
MOVABLE = [ROOT / "tests" / "fixtures" / "migrate" / "projects" / "neox_sharded_bf16"]
# The rules about a configuration (the launcher's, v1 or v2) and the mix-ups of the two: a
# moved launcher's code. SMP002 (script still on v1) is the script half's to clear.
LAUNCHER_CODES = ("SMP001", "SMP003", "SMP010", "SMP011", "SMP012")


@pytest.mark.parametrize(
    "project", [*PROJECTS, *EXAMPLES, *MOVABLE], ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_migration_of_a_realistic_project(project: Path, tmp_path: Path) -> None:
    copy = tmp_path / project.name
    shutil.copytree(project, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "pyproject.toml").write_text("")  # the copy is its own project, as in its repository
    first = run_cli("migrate", "--apply", "--format", "json", ".", cwd=copy)
    assert first.code in (0, 1), first.stderr
    report = json.loads(first.stdout)
    assert report["errors"] == []
    moved_launchers, moved_jobs = set(), []
    for job in report["jobs"]:
        if job["status"] == "moved":
            moved_jobs.append(job["files"])
        for item in job["items"]:
            assert item["link"].startswith("https://docs.aws.amazon.com/sagemaker/"), item
        if job["status"] != "kept-on-v1" and job["container"] is not None:
            moved_launchers.add(job["files"][0])
    second = run_cli("migrate", "--format", "json", ".", cwd=copy)
    assert json.loads(second.stdout)["changed_files"] == []
    if moved_launchers:
        checked = run_cli(
            "check",
            "--select",
            ",".join(LAUNCHER_CODES),
            "--format",
            "json",
            *sorted(moved_launchers),
            cwd=copy,
        )
        errors = [f for f in json.loads(checked.stdout) if f.get("severity") == "error"]
        assert errors == []
    for files in moved_jobs:
        for name in files:
            assert "import smdistributed.modelparallel" not in (copy / name).read_text(), name
        checked = run_cli("check", "--format", "json", *files, cwd=copy)
        errors = [f for f in json.loads(checked.stdout) if f.get("severity") == "error"]
        assert errors == [], files


def test_a_project_written_to_move_moves_completely(tmp_path: Path) -> None:
    """The end-to-end promise on one project: every change mechanical, exit 0."""
    copy = tmp_path / "project"
    shutil.copytree(MOVABLE[0], copy)
    (copy / "pyproject.toml").write_text("")
    done = run_cli("migrate", "--apply", "--format", "json", ".", cwd=copy)
    assert done.code == 0, done.stdout
    (job,) = json.loads(done.stdout)["jobs"]
    assert job["status"] == "moved" and job["moved_share"] == 1.0
