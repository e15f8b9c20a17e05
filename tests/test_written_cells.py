"""A ``%%writefile train.py`` cell and the committed ``train.py`` are one script: a run that checks
both reports each of its mistakes once, on the file; a notebook checked alone still reports
them in its cell, and what only the cell holds stays reported there."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

SCRIPT = """\
import smdistributed.modelparallel.torch as smp


def log(message):
    if smp.rank() == 0:
        print(message)


def main():
    log("starting")
    smp.init({"pipeline_parallel_degree": 2})
    model = smp.DistributedModel(build())


main()
"""


def _project(tmp_path: Path, cell_script: str, file_script: str) -> Path:
    """A notebook whose only cell writes ``train.py``, beside a committed ``train.py``."""
    cell = {
        "cell_type": "code",
        "execution_count": None,
        "metadata": {},
        "outputs": [],
        "source": ["%%writefile train.py\n", *cell_script.splitlines(keepends=True)],
    }
    book = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "write_script.ipynb").write_text(json.dumps(book), encoding="utf-8")
    (tmp_path / "train.py").write_text(file_script, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text("")
    return tmp_path


def _findings(folder: Path, *paths: str) -> list[tuple[str, str, int]]:
    done = run_cli("check", "--no-cache", "--output-format", "json", *paths, cwd=folder)
    assert done.code in (0, 1), done.stderr
    return sorted(
        (Path(f["filename"]).name, f["code"], f["location"]["row"]) for f in json.loads(done.stdout)
    )


def test_a_mistake_in_the_cell_and_the_file_is_reported_once_on_the_file(tmp_path: Path) -> None:
    # The file on disk is a little ahead of the cell: the same mistake sits two lines lower.
    folder = _project(tmp_path, SCRIPT, '"""Train."""\n\n' + SCRIPT)
    assert _findings(folder, ".") == [("train.py", "SMP108", 7)]


def test_the_notebook_checked_alone_reports_the_mistake_in_its_cell(tmp_path: Path) -> None:
    folder = _project(tmp_path, SCRIPT, SCRIPT)
    assert _findings(folder, "write_script.ipynb") == [("write_script.ipynb", "SMP108", 6)]


def test_a_mistake_only_the_cell_holds_stays_in_the_notebook(tmp_path: Path) -> None:
    fixed = SCRIPT.replace(
        "    if smp.rank() == 0:\n        print(message)\n", "    print(message)\n"
    )
    folder = _project(tmp_path, SCRIPT, fixed)
    assert _findings(folder, ".") == [("write_script.ipynb", "SMP108", 6)]
