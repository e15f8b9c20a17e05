"""Checking and fixing a notebook: the joined code cells, then each ``%%writefile`` script.

Findings are reported per cell, with lines and columns inside the cell, as Ruff does. Fixes
are applied round by round like for a file, except that an edit must fall inside one cell;
only the cells whose code changed are written back.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from smpfix.base import notebook
from smpfix.base.findings import Edit, FileError, FileResult, Finding, Fix, Position
from smpfix.engine.analysis import Analysis, AnalysisOptions, analyze
from smpfix.engine.fixing import MAX_ROUNDS, apply_edits, select_fixes


@dataclass(frozen=True)
class _Unit:
    """A piece of the notebook analyzed as one text: the joined cells, or one script cell."""

    path: str
    cells: tuple[int, ...]
    sources: tuple[str, ...]
    # Lines at the top of a cell that are not part of the unit's code (the %%writefile line).
    skipped: tuple[int, ...]

    def joined(self) -> tuple[str, list[tuple[int, int, int]]]:
        """Text and, per cell, (cell index, start offset, end offset) in it."""
        pieces, spans, offset = [], [], 0
        for index, source, skip in zip(self.cells, self.sources, self.skipped):
            code = notebook.mask(source.split("\n", skip)[-1] if skip else source)
            if not code.endswith("\n"):
                code += "\n"
            pieces.append(code)
            spans.append((index, offset, offset + len(code)))
            offset += len(code)
        return "".join(pieces), spans


def check_notebook(
    text: str,
    path: str,
    options: AnalysisOptions,
    fixing: bool,
    unsafe: bool,
    hints: bool = True,
) -> FileResult:
    """Findings (and with ``fixing`` the fixed text) of a notebook; a code cell that is not
    Python is skipped with a diagnostic naming it, and the other cells are still checked."""
    try:
        book, broken = notebook.parse(text).checkable()
    except notebook.NotebookError as exc:
        return FileResult(path, errors=(FileError(path, str(exc)),))
    units = [
        _Unit(
            path,
            tuple(c.index for c in book.cells),
            tuple(c.source for c in book.cells),
            tuple(0 for _ in book.cells),
        )
    ]
    for script in book.scripts:
        units.append(
            _Unit(
                os.path.join(os.path.dirname(path), script.filename),
                (script.index,),
                (script.cell.source,),
                (1,),
            )
        )
    findings: list[Finding] = []
    errors: list[FileError] = [
        FileError(
            path,
            f"syntax error: {cell.message}; this cell is skipped, the others are checked",
            cell.line,
            cell.column,
            cell=cell.index + 1,
        )
        for cell in broken
    ]
    new_sources: dict[int, str] = {}
    fixed: tuple[str, ...] = ()
    for unit in units:
        if not unit.cells:
            continue
        final_unit, analysis, applied, unit_errors = (
            _fix_unit(unit, options, unsafe, hints)
            if fixing
            else (unit, _analyze(unit, options), (), [])
        )
        fixed += applied
        errors.extend(unit_errors)
        if analysis.findings:
            cells = _CellMap.of(final_unit)
            findings.extend(_per_cell(f, cells, path) for f in analysis.findings)
        errors.extend(replace(e, path=path) for e in analysis.errors)
        for index, before, after in zip(unit.cells, unit.sources, final_unit.sources):
            if before != after:
                new_sources[index] = after
    findings.sort(key=lambda f: (f.cell or 0, f.start.line, f.start.column, f.code))
    new_text = book.with_sources(new_sources) if new_sources else None
    return FileResult(
        path=path,
        findings=tuple(findings),
        errors=tuple(errors),
        fixed_count=len(fixed),
        fixed=fixed,
        new_text=new_text,
        original_text=text if new_text is not None else None,
        text=None,
    )


def _analyze(unit: _Unit, options: AnalysisOptions) -> Analysis:
    joined, _ = unit.joined()
    return analyze(joined, unit.path, options)


def _fix_unit(
    unit: _Unit, options: AnalysisOptions, unsafe: bool, hints: bool
) -> tuple[_Unit, Analysis, tuple[str, ...], list[FileError]]:
    """The unit with its fixes applied, its analysis, and the code of each fix applied."""
    analysis = _analyze(unit, options)
    applied: tuple[str, ...] = ()
    for _ in range(MAX_ROUNDS):
        joined, spans = unit.joined()
        starts = _starts(spans)
        by_cell: dict[int, list[Edit]] = {}
        codes: list[str] = []
        for finding in select_fixes(analysis.findings, unsafe, unit.path, hints):
            assert finding.fix is not None
            placed = [(_cell_for(edit, spans, starts), edit) for edit in finding.fix.edits]
            if any(cell is None for cell, _ in placed):
                continue
            for cell, edit in placed:
                assert cell is not None
                index, start, _ = cell
                by_cell.setdefault(index, []).append(
                    replace(edit, start=edit.start - start, end=edit.end - start)
                )
            codes.append(finding.code)
        if not by_cell:
            break
        sources = list(unit.sources)
        for position, (index, source, skip) in enumerate(
            zip(unit.cells, unit.sources, unit.skipped)
        ):
            if index not in by_cell:
                continue
            head, body = source.split("\n", 1) if skip else ("", source)
            masked = notebook.mask(body)
            had_newline = masked.endswith("\n")
            code = masked if had_newline else masked + "\n"
            new = apply_edits(code, by_cell[index])
            if not had_newline and new.endswith("\n"):
                new = new[:-1]
            sources[position] = (head + "\n" if skip else "") + notebook.unmask(new)
        candidate = replace(unit, sources=tuple(sources))
        new_analysis = _analyze(candidate, options)
        if any(e.code is None and "syntax error" in e.message for e in new_analysis.errors):
            return (
                unit,
                analysis,
                applied,
                [
                    FileError(
                        unit.path,
                        "internal error: a fix produced code that does not parse;"
                        " notebook left unchanged",
                    )
                ],
            )
        unit, analysis = candidate, new_analysis
        applied += tuple(codes)
    return unit, analysis, applied, []


def _cell_for(
    edit: Edit, spans: Sequence[tuple[int, int, int]], starts: Sequence[int]
) -> tuple[int, int, int] | None:
    """The span holding ``edit`` whole (``starts``: where each span starts); found by
    bisection, so fixing stays linear in cells."""
    at = bisect.bisect_right(starts, edit.start) - 1
    for span in spans[max(at - 1, 0) : at + 1]:  # an empty edit at a boundary: either side
        _, start, end = span
        if start <= edit.start and edit.end <= end and (edit.start < end or edit.start == edit.end):
            return span
    return None


def _starts(spans: Sequence[tuple[int, int, int]]) -> list[int]:
    return [start for _, start, _ in spans]


@dataclass(frozen=True)
class _CellMap:
    """Where each cell of a unit starts in its joined text, by offset and by line: worked
    out once per unit, so placing every finding in its cell costs a bisection each (a
    notebook of thousands of cells with findings used to take minutes)."""

    unit: _Unit
    spans: list[tuple[int, int, int]]
    starts: list[int]
    line_starts: list[int]
    base_lines: list[int]
    skipped: dict[int, int]

    @classmethod
    def of(cls, unit: _Unit) -> _CellMap:
        joined, spans = unit.joined()
        line_starts = [0, *(i + 1 for i, char in enumerate(joined) if char == "\n")]
        starts = _starts(spans)
        base_lines = [bisect.bisect_right(line_starts, start) - 1 for start in starts]
        return cls(
            unit, spans, starts, line_starts, base_lines, dict(zip(unit.cells, unit.skipped))
        )


def _per_cell(finding: Finding, cells: _CellMap, notebook_path: str) -> Finding:
    """Positions relative to the cell holding the finding (and its edits); cells count from 1."""
    offset = cells.line_starts[finding.start.line - 1] + finding.start.column - 1
    at = bisect.bisect_right(cells.starts, offset) - 1
    if at < 0 or offset >= cells.spans[at][2]:
        at = len(cells.spans) - 1
    cell_index = cells.spans[at][0]
    skip = cells.skipped[cell_index]
    base_line = cells.base_lines[at]

    def move(position: Position) -> Position:
        return Position(position.line - base_line + skip, position.column)

    fix = finding.fix
    if fix is not None:
        fix = Fix(
            fix.applicability,
            fix.description,
            tuple(
                replace(e, start_pos=move(e.start_pos), end_pos=move(e.end_pos)) for e in fix.edits
            ),
        )
    return replace(
        finding,
        path=notebook_path,
        start=move(finding.start),
        end=move(finding.end),
        fix=fix,
        cell=cell_index + 1,
    )
