"""Whole projects shaped like real SMP code: every finding smpfix reports is one a person marked.

Each folder of ``tests/realistic/`` is a project as its authors would lay it out: training
scripts of a few hundred lines with their helper modules, and the launcher (a script or a
notebook) that starts them. Every line where smpfix must report something carries a
``# expect: CODE severity`` marker (in a notebook, inside the cell); the project is checked
as a user checks it, from its own folder, and the findings must be exactly the marked ones:
a finding without a marker is noise, a marker without a finding a miss.

The projects are written fresh for these tests; the patterns the official examples use on
purpose are in them, unmarked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, expected_findings, run_cli

REALISTIC = ROOT / "tests" / "realistic"
PROJECTS = (
    sorted(path for path in REALISTIC.iterdir() if path.is_dir()) if REALISTIC.is_dir() else []
)

Marked = tuple[str, int, int, str, str]  # path, cell (0 outside notebooks), line, code, severity


def _marked(project: Path) -> set[Marked]:
    marked: set[Marked] = set()
    for path in sorted(project.rglob("*")):
        relative = path.relative_to(project).as_posix()
        if path.suffix == ".py":
            cells = [(0, path.read_text(encoding="utf-8"))]
        elif path.suffix == ".ipynb":
            notebook = json.loads(path.read_text(encoding="utf-8"))
            cells = [
                (
                    number,
                    "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"],
                )
                for number, cell in enumerate(notebook["cells"], start=1)
                if cell["cell_type"] == "code"
            ]
        else:
            continue
        for cell, text in cells:
            for item in expected_findings(text):
                assert item.severity is not None, (
                    f"{relative}: give every marker a severity ({item.code} at line {item.line})"
                )
                marked.add((relative, cell, item.line, item.code, item.severity))
    return marked


def _reported(project: Path) -> set[Marked]:
    completed = run_cli("check", ".", "--format", "json", "--no-cache", "--exit-zero", cwd=project)
    assert completed.code == 0, completed.stderr
    assert completed.stderr == "", completed.stderr
    return {
        (
            _relative(project, item["filename"]),
            item["cell"] or 0,
            item["location"]["row"],
            item["code"],
            item["severity"],
        )
        for item in json.loads(completed.stdout)
    }


def _relative(project: Path, filename: str) -> str:
    """Findings in a helper module, found while checking the script importing it, name the
    helper by its absolute path; the markers name every file relative to the project."""
    path = Path(filename)
    if path.is_absolute() and path.is_relative_to(project.resolve()):
        path = path.relative_to(project.resolve())
    return path.as_posix().removeprefix("./")


@pytest.mark.parametrize("project", PROJECTS, ids=lambda path: path.name)
def test_findings_are_exactly_the_marked_ones(project: Path) -> None:
    marked, reported = _marked(project), _reported(project)
    noise = sorted(reported - marked)
    missed = sorted(marked - reported)
    assert (noise, missed) == (
        [],
        [],
    ), f"reported but not marked: {noise}\nmarked but not reported: {missed}"


def test_there_are_realistic_projects() -> None:
    assert len(PROJECTS) >= 1
