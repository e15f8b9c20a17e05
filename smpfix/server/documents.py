"""Checking what the editor holds: a Python file, or a notebook given cell by cell.

Each check works on a snapshot (the document's text and version when the check began) and
returns what the editor needs to show and fix it: the findings, the text their positions
refer to, and problems to log. The engine does the work exactly as ``smpfix check`` does it
on a file (``runner.check_text``), with the options ``settings.resolve`` gives the document;
a notebook is handed to the engine as the ``.ipynb`` JSON its cells make, so its findings
come back per cell.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

import libcst as cst

from smpfix.base import notebook
from smpfix.base.findings import FileError, FileResult, Finding
from smpfix.engine.analysis import Analysis, parse
from smpfix.engine.discovery import Excluder
from smpfix.engine.runner import analyze_text, check_text
from smpfix.server.reparse import Reparser
from smpfix.server.settings import DocumentSettings


@dataclass(frozen=True)
class Snapshot:
    """A document as it was when a check began. ``cells`` is set for a notebook: each cell's
    URI, whether it is code, and its text."""

    uri: str
    path: str
    version: Optional[int]
    text: str
    cells: tuple[tuple[str, bool, str], ...] = ()

    def notebook_json(self) -> str:
        """The cells as an ``.ipynb`` text, in order (markdown cells keep their place)."""
        cells: list[dict[str, object]] = [
            {
                "cell_type": "code" if is_code else "markdown",
                "metadata": {},
                "source": text,
                **({"outputs": [], "execution_count": None} if is_code else {}),
            }
            for _, is_code, text in self.cells
        ]
        return json.dumps(
            {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1
        )


@dataclass(frozen=True)
class Checked:
    """The outcome of checking a snapshot."""

    snapshot: Snapshot
    result: FileResult
    resolved: Optional[DocumentSettings] = None
    # Lines for the editor's log: configuration problems, files that could not be analyzed,
    # rules that crashed.
    problems: tuple[str, ...] = ()
    # What was wrong with the settings (the editor's, the configuration file's): shown to the
    # user, once each.
    settings_problems: tuple[str, ...] = ()
    # Where the job settings the findings depend on were read: a source's name (as findings
    # give it) -> the file and its 1-based line.
    job_locations: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    # The analysis of a Python text, which its fixes start from (kept in the analysis
    # process, never sent to the server).
    analysis: Optional[Analysis] = None
    # The files on disk the job was read from (launchers, the configuration) with their
    # modification time and size then: watched when the editor watches no files.
    watched: Mapping[str, Optional[tuple[int, int]]] = field(default_factory=dict)

    @property
    def findings(self) -> tuple[Finding, ...]:
        """What to show: none when the file could not be analyzed as a whole (a syntax error,
        a huge file), and only this document's (not a helper module's)."""
        if any(error.code is None for error in self.result.errors):
            return ()
        return tuple(f for f in self.result.findings if f.path == self.result.path)

    def cell_findings(self) -> Mapping[str, list[Finding]]:
        """A notebook's findings by cell URI (every cell present, even without findings)."""
        by_uri: dict[str, list[Finding]] = {uri: [] for uri, _, _ in self.snapshot.cells}
        for finding in self.findings:
            if finding.cell is not None and 0 < finding.cell <= len(self.snapshot.cells):
                by_uri[self.snapshot.cells[finding.cell - 1][0]].append(finding)
        return by_uri


def check(
    snapshot: Snapshot, resolved: DocumentSettings, reparser: Optional[Reparser] = None
) -> Checked:
    """Check ``snapshot`` with ``resolved``; never raises (a crash becomes a problem to log).
    ``reparser``: the document's last tree, which an edited text is parsed again from."""
    problems = list(resolved.problems)
    config = resolved.config
    if config.exclude and Excluder(list(config.exclude), config.root).matches(
        Path(os.path.abspath(snapshot.path))
    ):
        return Checked(
            snapshot, FileResult(snapshot.path), resolved, tuple(problems), resolved.problems
        )
    text = snapshot.notebook_json() if snapshot.cells else snapshot.text
    analysis = None
    try:
        if not snapshot.cells:
            parsed = _parse(reparser, snapshot.path, text)
            index = (
                reparser.index(snapshot.path, parsed[0])
                if reparser is not None and parsed[0] is not None
                else None
            )
            analysis = analyze_text(text, snapshot.path, resolved.options, parsed, index)
        result = check_text(text, snapshot.path, resolved.options, analysis)
    except RecursionError:
        result = FileResult(
            snapshot.path,
            errors=(FileError(snapshot.path, "code is nested too deeply to analyze"),),
        )
    except Exception as exc:  # the editor must keep its server whatever one document does
        result = FileResult(
            snapshot.path,
            errors=(FileError(snapshot.path, f"internal error: {type(exc).__name__}: {exc}"),),
        )
    problems.extend(_describe(error) for error in result.errors)
    return Checked(
        snapshot, result, resolved, tuple(problems), resolved.problems, analysis=analysis
    )


def _parse(
    reparser: Optional[Reparser], path: str, text: str
) -> tuple[Optional[cst.Module], Optional[FileError]]:
    """The tree of ``text``: from the last one of ``path`` where only part of it changed,
    else parsed whole (and kept for the next edit)."""
    module = reparser.parse(path, text) if reparser is not None else None
    if module is not None:
        return module, None
    module, error = parse(text, path)
    if module is not None and reparser is not None:
        try:
            reparser.remember(path, text, module)
        except RecursionError:
            pass
    return module, error


def _describe(error: FileError) -> str:
    what = "not checked" if error.code is None else f"rule {error.code} skipped"
    return f"smpfix: {error.path}:{error.line}:{error.column}: {error.message} ({what})"


@dataclass(frozen=True)
class FixedText:
    """The text after every safe fix (``text``), or for a notebook the new text of each
    changed cell by URI (``cells``)."""

    text: Optional[str] = None
    cells: Mapping[str, str] = field(default_factory=dict)
    applied: int = 0


def fix_all(
    snapshot: Snapshot, resolved: DocumentSettings, first: Optional[Analysis] = None
) -> FixedText:
    """Every safe fix applied, as ``smpfix check --apply`` would write it; nothing is written.
    ``first``: the check's analysis of this Python text with these settings, fixed from
    without analyzing the text again."""
    options = replace(resolved.options, apply=True)
    try:
        result = check_text(
            snapshot.notebook_json() if snapshot.cells else snapshot.text,
            snapshot.path,
            options,
            None if snapshot.cells else first,
        )
    except Exception:  # no fix then; the diagnostics say why
        return FixedText()
    if result.new_text is None:
        return FixedText()
    if not snapshot.cells:
        return FixedText(text=result.new_text, applied=result.fixed_count)
    try:
        book = notebook.parse(result.new_text)
    except notebook.NotebookError:
        return FixedText()
    sources = {
        cell.index: cell.source for cell in (*book.cells, *(script.cell for script in book.scripts))
    }
    changed = {
        uri: sources[index]
        for index, (uri, _, old) in enumerate(snapshot.cells)
        if index in sources and sources[index] != old
    }
    return FixedText(cells=changed, applied=result.fixed_count)


def changed_span(old: str, new: str) -> tuple[int, int, str]:
    """The one edit turning ``old`` into ``new``: ``old[start:end]`` becomes the text returned
    (so the editor moves the cursor and the undo history only where something changed)."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    return start, end_old, new[start:end_new]


def affected(checked: Sequence[Checked], path: str) -> list[str]:
    """URIs of the checked documents whose result depends on the file at ``path`` (a helper
    module they import, or a launcher's script)."""
    target = os.path.abspath(path)
    return [
        item.snapshot.uri
        for item in checked
        if any(os.path.abspath(dep) == target for dep in item.result.dependencies)
    ]
