"""A ``%%writefile train.py`` cell and the ``train.py`` beside its notebook, checked in one run.

Notebooks often write their training script from a cell, and the repository also commits the
file the cell wrote (the version a run of the notebook last wrote, often a little behind or
ahead of the cell). The cell is checked as that script, at the same path and so with the same
job, and the file is checked as itself: a mistake in both would be reported twice. When the
run checks the file too, a finding of the cell that the file's result already holds (the same
rule, the same message, on a line of the same code) is dropped from the notebook's result. A
notebook checked without the file keeps all its findings, and so does a cell for what only it
says.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from smpfix.base import notebook, source
from smpfix.base.findings import FileResult, Finding

_Key = tuple[str, str, str]


def without_cells_checked_as_files(results: Sequence[FileResult]) -> list[FileResult]:
    """``results`` without the findings of ``%%writefile`` cells that the result of the file
    the cell writes also holds."""
    by_path = {os.path.abspath(result.path): result for result in results}
    return [
        _without_repeated(result, by_path)
        if result.path.endswith(".ipynb") and any(f.cell for f in result.findings)
        else result
        for result in results
    ]


def _without_repeated(result: FileResult, by_path: dict[str, FileResult]) -> FileResult:
    try:
        book = notebook.parse(source.read(result.path).text)
    except (source.SourceError, notebook.NotebookError):
        return result
    folder = os.path.dirname(result.path)
    repeated: dict[int, set[_Key]] = {}
    for script in book.scripts:
        written = by_path.get(os.path.abspath(os.path.join(folder, script.filename)))
        if written is not None and written.findings:
            repeated[script.index + 1] = {
                _key(finding, _text_of(written)) for finding in written.findings
            }
    if not repeated:
        return result
    cells = {script.index + 1: script.cell.source for script in book.scripts}
    kept = tuple(
        finding
        for finding in result.findings
        if finding.cell not in repeated
        or _key(finding, cells[finding.cell]) not in repeated[finding.cell]
    )
    return replace(result, findings=kept) if len(kept) != len(result.findings) else result


def _text_of(result: FileResult) -> str:
    if result.text is not None:
        return result.text
    try:
        return source.read(result.path).text
    except source.SourceError:
        return ""


def _key(finding: Finding, text: str) -> _Key:
    """What makes two findings the same report: the rule, what it says, and the code of the
    line it points at (the line's number differs between the cell and the file)."""
    lines = text.splitlines()
    line = finding.start.line
    code = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return finding.code, finding.message, code
