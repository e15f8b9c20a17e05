"""Every configuration rule's launcher fixtures, also as notebooks.

Each ``tests/fixtures/SMP8xx/*.py`` launcher is split into notebook cells at its blank
lines (with a markdown cell and an IPython magic added), and must give the same findings,
reported per cell, as the ``.py`` file; the fixed notebook must carry the fixed code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, fixture_job, fixture_roots, fixture_unsafe

from smpfix.api import check_source, fix_source
from smpfix.engine.analysis import AnalysisOptions
from smpfix.engine.notebook_analysis import check_notebook
from smpfix.job.jobfacts import DeclaredJob
from smpfix.job.project import Project

CASES = sorted(p for p in FIXTURES.glob("SMP8*/*.py") if not p.name.endswith(".fixed.py"))


def to_cells(text: str) -> list[tuple[int, str]]:
    """Cells (with their first line in ``text``) split at blank lines between statements."""
    cells: list[tuple[int, str]] = []
    current: list[str] = []
    start = 1
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if (
            line.strip() == ""
            and current
            and not current[-1].rstrip().endswith(("(", "[", "{", ","))
        ):
            cells.append((start, "".join(current)))
            current, start = [], number + 1
        elif line.strip() == "" and not current:
            start = number + 1
        else:
            current.append(line)
    if current:
        cells.append((start, "".join(current)))
    return cells


def notebook_of(cells: list[tuple[int, str]]) -> str:
    data = {
        "cells": (
            [{"cell_type": "markdown", "metadata": {}, "source": ["# launcher\n"]}]
            + [
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "metadata": {},
                    "outputs": [],
                    "source": ["%env AWS_DEFAULT_REGION=us-west-2\n"],
                }
            ]
            + [
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "metadata": {},
                    "outputs": [],
                    "source": cell.splitlines(keepends=True),
                }
                for _, cell in cells
            ]
        ),
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(data, indent=1) + "\n"


def test_there_are_launcher_fixtures() -> None:
    assert CASES


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_launcher_fixture_as_notebook(path: Path) -> None:
    code = path.parent.name
    text = path.read_text(encoding="utf-8")
    job = fixture_job(text)
    cells = to_cells(text)
    book = notebook_of(cells)
    roots = fixture_roots(path, text)
    options = AnalysisOptions(
        select=frozenset({code}),
        declared_jobs=(DeclaredJob("fixture", job),) if job else (),
        project=Project(roots) if roots else None,
    )
    result = check_notebook(
        book, str(path.with_suffix(".ipynb")), options, fixing=False, unsafe=False
    )
    expected = []
    for finding in check_source(text, str(path), select=[code], job=job, roots=roots):
        number, (first, _) = max(
            (n, c) for n, c in enumerate(cells, start=3) if c[0] <= finding.start.line
        )
        expected.append(
            (number, finding.start.line - first + 1, finding.start.column, finding.code)
        )
    assert sorted(
        (f.cell, f.start.line, f.start.column, f.code) for f in result.findings
    ) == sorted(expected)

    fixed = check_notebook(
        book, str(path.with_suffix(".ipynb")), options, fixing=True, unsafe=fixture_unsafe(text)
    )
    py_fixed = fix_source(
        text, str(path), select=[code], job=job, unsafe=fixture_unsafe(text), roots=roots
    ).text
    if fixed.new_text is None:
        assert py_fixed == text
        return
    new_cells = json.loads(fixed.new_text)["cells"][2:]
    joined = "".join("".join(c["source"]) for c in new_cells)
    assert joined.replace("\n", "") == py_fixed.replace("\n", "")
