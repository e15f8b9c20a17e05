"""``smpfix migrate`` on the shipped examples and every realistic project of ``tests/realistic/``.

On each, as a user runs it from the project's folder: nothing fails to read, every item links a
v2 page, every changed file parses, a second run changes nothing, and a launcher that moved
gets no error from the SMP v2 configuration rules. (Whether the launched scripts pass the v2
rules is the script half's specification; here the scripts are whatever it returns.)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

PROJECTS = sorted(p for p in (ROOT / "tests" / "realistic").iterdir() if p.is_dir())
EXAMPLES = [ROOT / "examples" / "pytorch" / "correct", ROOT / "examples" / "pytorch" / "pitfalls"]
# The rules about a configuration (the launcher's, v1 or v2) and the mix-ups of the two: a
# moved launcher's code. SMP002 (script still on v1) is the script half's to clear.
LAUNCHER_CODES = ("SMP001", "SMP003", "SMP010", "SMP011", "SMP012")


@pytest.mark.parametrize(
    "project", [*PROJECTS, *EXAMPLES], ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_migration_of_a_realistic_project(project: Path, tmp_path: Path) -> None:
    copy = tmp_path / project.name
    shutil.copytree(project, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "pyproject.toml").write_text("")  # the copy is its own project, as in its repository
    first = run_cli("migrate", "--apply", "--format", "json", ".", cwd=copy)
    assert first.code in (0, 1), first.stderr
    report = json.loads(first.stdout)
    assert report["errors"] == []
    moved_launchers = set()
    for job in report["jobs"]:
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
