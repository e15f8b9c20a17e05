"""Checking many files: prefilter, analyze (in a process pool when it pays), fix, write.

Every file is one independent job; whatever goes wrong in one (unreadable, undecodable,
unparsable, a crashing rule, a failed write) becomes a ``FileError`` for that file and the
others go on. Results come back sorted by path, whatever order the workers finish in.
LibCST and the rules are imported only when some file passes the byte-level prefilter, so a
tree without SMP code is checked at the cost of reading it.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from smpfix import prefilter, source
from smpfix.discovery import DiscoveredFile
from smpfix.findings import FileError, FileResult, Finding
from smpfix.jobfacts import DeclaredJob

if TYPE_CHECKING:
    from smpfix.analysis import AnalysisOptions
    from smpfix.project import Project

# Below this many relevant files, starting worker processes costs more than it saves.
_POOL_THRESHOLD = 4


@dataclass(frozen=True)
class RunOptions:
    select: frozenset[str]
    rule_names: Mapping[str, str]
    declared_jobs: tuple[DeclaredJob, ...] = ()
    per_file_ignores: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    root: Path = field(default_factory=Path.cwd)
    apply: bool = False
    unsafe_fixes: bool = False
    diff: bool = False
    jobs: int = 0
    show_job: bool = False
    project: Optional[Project] = None

    @property
    def fixing(self) -> bool:
        return self.apply or self.diff


def _analysis_options(path: str, options: RunOptions) -> AnalysisOptions:
    from smpfix.analysis import AnalysisOptions
    from smpfix.selection import per_file

    codes = per_file(options.select, path, options.per_file_ignores, options.root, options.rule_names)
    return AnalysisOptions(select=codes, declared_jobs=options.declared_jobs, project=options.project)


def check_text(text: str, path: str, options: RunOptions) -> FileResult:
    """Analyze (and with ``apply``/``diff`` fix) one text or notebook; nothing is written."""
    from smpfix.analysis import analyze
    from smpfix.fixing import fix_text

    analysis_options = _analysis_options(path, options)
    if path.endswith(".ipynb"):
        from smpfix.notebook_analysis import check_notebook

        return check_notebook(text, path, analysis_options, options.fixing, options.unsafe_fixes)
    analysis = analyze(text, path, analysis_options)
    job = analysis.job.describe() if options.show_job and analysis.job is not None and analysis.imports_smp else None
    if not options.fixing or not analysis.findings:
        return FileResult(path=path, findings=analysis.findings, errors=analysis.errors, text=text if analysis.findings else None, job=job)
    outcome = fix_text(text, path, analysis_options, unsafe=options.unsafe_fixes, first=analysis)
    changed = outcome.text != text
    return FileResult(
        path=path,
        findings=outcome.analysis.findings,
        errors=outcome.analysis.errors + outcome.errors,
        fixed_count=outcome.applied,
        new_text=outcome.text if changed else None,
        original_text=text if changed else None,
        text=outcome.text if outcome.analysis.findings else None,
        job=job,
    )


def check_file(task: DiscoveredFile, options: RunOptions) -> FileResult:
    """One file from path to result, writing fixes with ``apply``."""
    try:
        with open(task.path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        return FileResult(task.path, errors=(FileError(task.path, f"cannot read: {exc.strerror or exc}"),))
    if not prefilter.may_involve_smp(raw):
        return FileResult(task.path)
    try:
        src = source.decode(task.path, raw)
    except source.SourceError as exc:
        return FileResult(task.path, errors=(FileError(task.path, exc.message, exc.line, exc.column),))
    try:
        result = check_text(src.text, task.path, options)
    except RecursionError:
        return FileResult(task.path, errors=(FileError(task.path, "code is nested too deeply to analyze"),))
    if options.apply and result.new_text is not None:
        if not task.writable:
            error = FileError(task.path, "not written: it is a link to a file outside the checked tree (name it explicitly to fix it)")
            return replace(result, errors=(*result.errors, error), new_text=None, fixed_count=0)
        try:
            source.write_atomic(src, result.new_text)
        except source.SourceError as exc:
            return replace(result, errors=(*result.errors, FileError(task.path, exc.message)), fixed_count=0)
    return result


def _worker(args: tuple[DiscoveredFile, RunOptions]) -> FileResult:
    task, options = args
    try:
        return check_file(task, options)
    except Exception as exc:  # a crash in one file must not stop the run
        return FileResult(task.path, errors=(FileError(task.path, f"internal error: {type(exc).__name__}: {exc}"),))


def _pool_context() -> multiprocessing.context.BaseContext:
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def run(tasks: Sequence[DiscoveredFile], options: RunOptions, on_result: Optional[Callable[[FileResult], None]] = None) -> Iterator[FileResult]:
    """Results for ``tasks``, in path order; ``on_result`` hears of each file as it is done (progress)."""
    relevant: list[DiscoveredFile] = []
    results: list[FileResult] = []
    for task in tasks:
        if prefilter.file_may_involve_smp(task.path):
            relevant.append(task)
        else:
            results.append(FileResult(task.path))
    notify = on_result or (lambda result: None)
    for result in results:
        notify(result)
    workers = options.jobs or os.cpu_count() or 1
    if len(relevant) < _POOL_THRESHOLD or workers == 1:
        for task in relevant:
            results.append(_worker((task, options)))
            notify(results[-1])
    else:
        with ProcessPoolExecutor(max_workers=min(workers, len(relevant)), mp_context=_pool_context()) as pool:
            for result in pool.map(_worker, [(task, options) for task in relevant], chunksize=max(1, len(relevant) // (workers * 8))):
                results.append(result)
                notify(result)
    yield from sorted(_regroup(results), key=lambda r: r.path)


def _regroup(results: list[FileResult]) -> list[FileResult]:
    """Move findings reported in other files (helper modules checked on behalf of a script)
    to those files' results, once each even when several scripts import the same module."""
    by_path = {result.path: result for result in results}
    moved: dict[str, dict[tuple[str, int, int, int], Finding]] = {}
    for result in results:
        foreign = [f for f in result.findings if f.path != result.path]
        if not foreign:
            continue
        by_path[result.path] = replace(result, findings=tuple(f for f in result.findings if f.path == result.path))
        for finding in foreign:
            key = (finding.code, finding.start.line, finding.start.column, finding.end.line)
            moved.setdefault(finding.path, {}).setdefault(key, finding)
    for path, findings in moved.items():
        current = by_path.get(path, FileResult(path))
        combined = tuple(sorted((*current.findings, *findings.values()), key=lambda f: f.sort_key))
        text = current.text
        if text is None:
            try:
                text = source.read(path).text
            except source.SourceError:
                text = None
        by_path[path] = replace(current, findings=combined, text=text)
    return list(by_path.values())
