"""Checking many files: prefilter, analyze (in a process pool when it pays), fix, write.

Every file is one independent job; whatever goes wrong in one (unreadable, undecodable,
unparsable, a crashing rule, a failed write) becomes a ``FileError`` for that file and the
others go on. Results come back sorted by path, whatever order the workers finish in.
LibCST and the rules are imported only when some file passes the byte-level prefilter and
has no reusable cached result (``smpfix.engine.cache``), so a tree without SMP code, or an unchanged
one, is checked at the cost of reading it. Each file is read once, here; the worker gets its
bytes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from smpfix.base import source
from smpfix.base.findings import FileError, FileResult, Finding
from smpfix.engine import prefilter
from smpfix.engine.discovery import DiscoveredFile
from smpfix.job.jobfacts import DeclaredJob

if TYPE_CHECKING:
    import multiprocessing.context

    import libcst as cst

    from smpfix.base.walker import NodeIndex
    from smpfix.engine.analysis import Analysis, AnalysisOptions
    from smpfix.engine.cache import EntryKey, ResultCache
    from smpfix.engine.config_tree import FileOptions
    from smpfix.engine.launcher_index import LauncherSearch
    from smpfix.job.project import Project

# Starting worker processes costs about as much as analyzing this much source; below it (a
# pre-commit hook naming a few files) one process finishes sooner.
_POOL_MIN_BYTES = 48 * 1024
_POOL_MIN_FILES = 2


@dataclass(frozen=True)
class RunOptions:
    select: frozenset[str]
    rule_names: Mapping[str, str]
    declared_jobs: tuple[DeclaredJob, ...] = ()
    per_file_ignores: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    root: Path = field(default_factory=Path.cwd)
    apply: bool = False
    unsafe_fixes: bool = False
    # Whether ``--apply`` also writes hints' fixes: only when hints are shown (``eligible``).
    fix_hints: bool = True
    diff: bool = False
    jobs: int = 0
    show_job: bool = False
    project: Optional[Project] = None
    # Where per-file results are kept between runs (``smpfix.engine.cache``); None: no cache.
    cache_dir: Optional[Path] = None
    # How launchers beyond the checked files are found (``smpfix.engine.launcher_index``);
    # None: only the launchers among the checked files count.
    launchers: Optional[LauncherSearch] = None
    # The files (as named in the run) whose own configuration, or a job override, gives them
    # other options than the four above (``smpfix.engine.config_tree``); resolved once, in the
    # main process.
    per_file: Mapping[str, FileOptions] = field(default_factory=dict)
    # The line length fixes keep within (``line-length`` of the run's configuration).
    line_length: int = 100

    @property
    def fixing(self) -> bool:
        return self.apply or self.diff


def options_for(path: str, options: RunOptions) -> FileOptions:
    """What ``path`` is checked with: its own entry in ``per_file``, else the run's."""
    found = options.per_file.get(path)
    if found is not None:
        return found
    from smpfix.engine.config_tree import FileOptions

    return FileOptions(
        options.select, options.declared_jobs, options.per_file_ignores, options.root
    )


def _codes(path: str, options: RunOptions) -> tuple[frozenset[str], FileOptions]:
    """The rules that run on ``path`` (``per-file-ignores`` applied), and its options."""
    from smpfix.engine.selection import per_file

    own = options_for(path, options)
    codes = per_file(own.select, path, own.per_file_ignores, own.root, options.rule_names)
    return codes, own


def _analysis_options(path: str, options: RunOptions) -> AnalysisOptions:
    from smpfix.engine.analysis import AnalysisOptions

    codes, own = _codes(path, options)
    return AnalysisOptions(
        select=codes,
        declared_jobs=own.declared_jobs,
        project=options.project,
        line_length=options.line_length,
    )


def analyze_text(
    text: str,
    path: str,
    options: RunOptions,
    parsed: Optional[tuple[Optional[cst.Module], Optional[FileError]]] = None,
    index: Optional[NodeIndex] = None,
) -> Analysis:
    """The analysis ``check_text`` starts from for a Python text (not a notebook): a caller
    that keeps it (the language server) fixes the same text later without analyzing it again.
    ``parsed``: the text's tree (or why there is none), when the caller parsed it; ``index``:
    that tree's node index, when the caller has it."""
    from smpfix.engine.analysis import analyze

    return analyze(text, path, _analysis_options(path, options), parsed, index)


def check_text(
    text: str, path: str, options: RunOptions, first: Optional[Analysis] = None
) -> FileResult:
    """Analyze (and with ``apply``/``diff`` fix) one text or notebook; nothing is written.
    ``first``: the analysis of this Python text with these options, if already made."""
    from smpfix.engine.analysis import analyze
    from smpfix.engine.fixing import fix_text

    analysis_options = _analysis_options(path, options)
    if path.endswith(".ipynb"):
        from smpfix.engine.notebook_analysis import check_notebook

        return check_notebook(
            text, path, analysis_options, options.fixing, options.unsafe_fixes, options.fix_hints
        )
    analysis = first if first is not None else analyze(text, path, analysis_options)
    job = (
        analysis.job.describe()
        if options.show_job and analysis.job is not None and analysis.imports_smp
        else None
    )
    if not options.fixing or not analysis.findings:
        return FileResult(
            path=path,
            findings=analysis.findings,
            errors=analysis.errors,
            text=text if analysis.findings else None,
            job=job,
            dependencies=analysis.dependencies,
        )
    outcome = fix_text(
        text,
        path,
        analysis_options,
        unsafe=options.unsafe_fixes,
        first=analysis,
        hints=options.fix_hints,
    )
    changed = outcome.text != text
    return FileResult(
        path=path,
        findings=outcome.analysis.findings,
        errors=outcome.analysis.errors + outcome.errors,
        fixed_count=outcome.applied,
        fixed=outcome.fixed,
        new_text=outcome.text if changed else None,
        original_text=text if changed else None,
        text=outcome.text if outcome.analysis.findings else None,
        job=job,
        dependencies=outcome.analysis.dependencies,
    )


def check_file(task: DiscoveredFile, options: RunOptions) -> FileResult:
    """One file from path to result, writing fixes with ``apply``."""
    try:
        raw = source.read_raw(task.path)
    except source.SourceError as exc:
        return FileResult(task.path, errors=(FileError(task.path, exc.message),))
    return check_bytes(task, raw, options)


def check_bytes(
    task: DiscoveredFile, raw: bytes, options: RunOptions, reached: bool = False
) -> FileResult:
    """``check_file`` for the bytes already read from ``task.path``; ``reached``: the file
    imports a project module that names the library (``helper_reach``), so it is checked
    though its own bytes never name it."""
    if not reached and not prefilter.may_involve_smp(raw):
        return FileResult(task.path)
    try:
        src = source.decode(task.path, raw)
    except source.SourceError as exc:
        return FileResult(
            task.path, errors=(FileError(task.path, exc.message, exc.line, exc.column),)
        )
    try:
        result = check_text(src.text, task.path, options)
    except RecursionError:
        return FileResult(
            task.path, errors=(FileError(task.path, "code is nested too deeply to analyze"),)
        )
    if options.apply and result.new_text is not None:
        if not task.writable:
            error = FileError(
                task.path,
                "not written: it is a link to a file outside the checked tree"
                " (name it explicitly to fix it)",
            )
            return replace(
                result, errors=(*result.errors, error), new_text=None, fixed_count=0, fixed=()
            )
        try:
            source.write_atomic(src, result.new_text)
        except source.SourceError as exc:
            return replace(
                result,
                errors=(*result.errors, FileError(task.path, exc.message)),
                fixed_count=0,
                fixed=(),
            )
    return result


@dataclass(frozen=True)
class _Job:
    """One file for a worker: the bytes read for the prefilter (None when they could not be
    read: the worker reads again and reports why) and its cache entry (None: no cache)."""

    task: DiscoveredFile
    raw: Optional[bytes]
    entry: Optional[EntryKey] = None
    # Relevant only through the project modules it imports (``helper_reach``).
    reached: bool = False


def _work(job: _Job, options: RunOptions, cache: Optional[ResultCache]) -> FileResult:
    try:
        result = (
            check_file(job.task, options)
            if job.raw is None
            else check_bytes(job.task, job.raw, options, job.reached)
        )
    except Exception as exc:  # a crash in one file must not stop the run
        return FileResult(
            job.task.path,
            errors=(FileError(job.task.path, f"internal error: {type(exc).__name__}: {exc}"),),
        )
    if cache is not None and job.entry is not None and _is_plain_check(result, options):
        cache.store(job.entry, result, result.dependencies)
    return result


def _is_plain_check(result: FileResult, options: RunOptions) -> bool:
    """Whether ``result`` is exactly what checking the file gives (what the cache may keep):
    with ``--apply``/``--diff``, only when there was no fix to try."""
    from smpfix.engine.cache import has_applicable_fix, is_check_result

    return is_check_result(result) and not (
        options.fixing and has_applicable_fix(result, options.unsafe_fixes, options.fix_hints)
    )


# Run options that only say what to do with findings, or that ``_cache_settings`` replaces
# by what they mean for one file; every other option is part of a cache key.
_NOT_IN_CACHE_KEY = frozenset(
    {
        "select",
        "rule_names",
        "per_file_ignores",
        "project",
        "apply",
        "diff",
        "unsafe_fixes",
        "fix_hints",
        "jobs",
        "cache_dir",
        "launchers",
        "declared_jobs",
        "root",
        "per_file",
    }
)


def _cache_settings(path: str, options: RunOptions) -> dict[str, object]:
    """Everything besides the file's bytes that decides its check result
    (``smpfix.engine.cache``)."""
    from dataclasses import fields

    codes, own = _codes(path, options)
    settings: dict[str, object] = {
        "codes": codes,
        "declared_jobs": own.declared_jobs,
        "options": {
            f.name: getattr(options, f.name)
            for f in fields(options)
            if f.name not in _NOT_IN_CACHE_KEY
        },
    }
    project = options.project
    if project is not None:
        settings["project_roots"] = project.roots
        settings["declared_for_file"] = project.declared_for(path)
        # A helper module no launcher starts takes the job of the launched scripts of its
        # folder, or a folder above it, that import it (``analysis._importers_job``).
        folder = os.path.dirname(os.path.abspath(path))
        settings["declared_for_folder"] = [
            (script, project.declared_for(script))
            for script in sorted(project.links)
            if folder == os.path.dirname(script)
            or folder.startswith(os.path.dirname(script) + os.sep)
        ]
        settings["hyperparameters_for_file"] = dict(project.hyperparameters_for(path))
    return settings


def open_cache(options: RunOptions) -> Optional[ResultCache]:
    if options.cache_dir is None:
        return None
    from smpfix.engine.cache import ResultCache

    try:
        return ResultCache.open(options.cache_dir)
    except OSError:
        return None


def _preload() -> None:
    """Import the engine and the rules before forking, so that workers start with them."""
    from smpfix.engine import analysis, fixing  # noqa: F401
    from smpfix.rules.registry import all_rules

    all_rules()


def _worker_setup(parent: int) -> None:
    """Workers leave Ctrl-C to the main process, which stops handing out files; a worker that
    also raised KeyboardInterrupt would print a traceback and could stop between two writes.

    A worker whose main process was killed (``kill -9``, the OOM killer) would otherwise wait
    for work forever, or go on rewriting files nobody asked about any more; on Linux it is
    killed with its parent.

    A worker only parses and analyzes, so the cycle collector runs as rarely as in a run
    without workers (``_few_collections``)."""
    import gc
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.set_threshold(*_ANALYSIS_GC_THRESHOLDS)
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


# LibCST trees hold no reference cycles and are freed by reference counting when a file is
# done; the cycle collector's default thresholds make it walk every live object (the shared
# helper modules, the rules) after each few hundred allocations, which cost about a fifth of
# the parse in a run over a project's scripts. The count that triggers it is of containers
# allocated and not yet freed, so at a million it runs only when the live heap grows by a
# million objects: never, over 2 million characters of real SMP code, where 50,000 (the last
# setting) still spent 8% of the run in it to free 21,000 objects, and the peak memory was
# the same.
_ANALYSIS_GC_THRESHOLDS = (1_000_000, 20, 20)


def collect_rarely() -> None:
    """The cycle collector at the analysis thresholds for the rest of the process: for the
    command line, which checks and exits. Restoring the defaults when the run ends (as
    ``_few_collections`` does for the API and the server) would make the next allocation
    collect everything the run allocated: about a twentieth of a project's check, for a
    process about to end."""
    import gc

    gc.set_threshold(*_ANALYSIS_GC_THRESHOLDS)


@contextmanager
def _few_collections() -> Iterator[None]:
    """The cycle collector at the analysis thresholds for the block (files analyzed in this
    process), then as it was."""
    import gc

    before = gc.get_threshold()
    gc.set_threshold(*_ANALYSIS_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _pool_context() -> multiprocessing.context.BaseContext:
    import multiprocessing

    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def run(
    tasks: Sequence[DiscoveredFile],
    options: RunOptions,
    on_result: Optional[Callable[[FileResult], None]] = None,
) -> Iterator[FileResult]:
    """Results for ``tasks``, in path order; ``on_result`` hears of each file as it is done
    (progress).

    Files that fail the prefilter, and files with a reusable cached result, are done here;
    the rest are analyzed in this process when they are few and small, else in a pool of
    worker processes (one per core by default).
    """
    from smpfix.engine import verbose
    from smpfix.engine.helper_reach import HelperReach
    from smpfix.engine.written_cells import without_cells_checked_as_files

    notify = on_result or (lambda result: None)
    results: list[FileResult] = []
    relevant: list[tuple[DiscoveredFile, Optional[bytes]]] = []
    reach = HelperReach(options.project)
    reached: set[str] = set()
    # First every file's bytes (kept only for the files that name the library), so that the
    # prefilter's look at the helpers a file imports reads none of the run's files again.
    read: list[tuple[DiscoveredFile, Optional[bytes], bool, bool]] = []
    for task in tasks:
        raw = source.read_bytes(task.path)
        named = (
            prefilter.may_involve_smp(raw)
            if raw is not None
            else prefilter.file_may_involve_smp(task.path)
        )
        if raw is not None:
            reach.index(task.path, raw, named)
        read.append((task, raw if named else None, named, raw is not None))
    for task, raw, named, readable in read:
        if not named and readable and task.path.endswith(".py") and reach.reaches(task.path):
            verbose.debug("prefilter", f"kept {task.path}: it imports a module that does")
            reached.add(task.path)
            raw = source.read_bytes(task.path)
            named = raw is not None
        if not named:
            verbose.debug("prefilter", f"skipped {task.path}: it never mentions the library")
            results.append(FileResult(task.path))
            notify(results[-1])
        else:
            relevant.append((task, raw))
    cache = open_cache(options)
    verbose.debug(
        "cache", f"result cache in {options.cache_dir}" if cache is not None else "no result cache"
    )
    with _few_collections(), verbose.timed("launchers", "finding the launchers"):
        options = with_project([(task.path, raw) for task, raw in relevant], options, cache)
    if verbose.enabled():
        _say_launchers([task.path for task, _ in relevant], options)
    digests: dict[str, Optional[str]] = {}
    jobs: list[_Job] = []
    for task, raw in relevant:
        entry = None
        if cache is not None and raw is not None:
            from smpfix.engine.cache import has_applicable_fix

            entry = cache.key(task.path, raw, _cache_settings(task.path, options))
            cached = cache.load(entry, task.path, raw, digests) if entry is not None else None
            if cached is not None and not (
                options.fixing
                and has_applicable_fix(cached, options.unsafe_fixes, options.fix_hints)
            ):
                verbose.debug("cache", f"hit: {task.path}")
                results.append(cached)
                notify(cached)
                continue
            verbose.debug("cache", f"miss: {task.path}")
        jobs.append(_Job(task, raw, entry, task.path in reached))
    work = partial(_work, options=options, cache=cache)
    workers = options.jobs or os.cpu_count() or 1
    if (
        workers == 1
        or len(jobs) < _POOL_MIN_FILES
        or sum(len(job.raw or b"") for job in jobs) < _POOL_MIN_BYTES
    ):
        with _few_collections(), verbose.timed("analysis", f"checking {len(jobs)} file(s)"):
            for job in jobs:
                with verbose.timed("analysis", f"checking {job.task.path}"):
                    results.append(work(job))
                notify(results[-1])
    else:
        from concurrent.futures import ProcessPoolExecutor

        _preload()
        verbose.debug(
            "analysis", f"checking {len(jobs)} files in {min(workers, len(jobs))} workers"
        )
        with (
            verbose.timed("analysis", f"checking {len(jobs)} files"),
            ProcessPoolExecutor(
                max_workers=min(workers, len(jobs)),
                mp_context=_pool_context(),
                initializer=_worker_setup,
                initargs=(os.getpid(),),
            ) as pool,
        ):
            try:
                for result in pool.map(work, jobs, chunksize=max(1, len(jobs) // (workers * 8))):
                    results.append(result)
                    notify(result)
            except BaseException:  # Ctrl-C: let the workers finish the file at hand, start no other
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    yield from sorted(
        _with_refused_parameters(
            without_cells_checked_as_files(_regroup(results)), options.project
        ),
        key=lambda r: r.path,
    )


def _say_launchers(paths: Sequence[str], options: RunOptions) -> None:
    """``-v``: the launcher that gives each checked file its job, or that none does."""
    from smpfix.engine import verbose

    project = options.project
    for path in paths:
        links = project.launchers_of(path) if project is not None else ()
        if links:
            named = ", ".join(
                f"{link.launcher}:{link.line}"
                + (f" (started by {link.started_by})" if link.started_by else "")
                for link in links
            )
            verbose.debug("launchers", f"{path}: its job comes from {named}")
            for unread in sorted({file for link in links for file in link.unread}):
                verbose.debug(
                    "launchers",
                    f"{path}: its launcher loads {unread}, which could not be read (missing,"
                    " outside the project, too large or not valid): the values from it are"
                    " unknown",
                )
        elif options.declared_jobs:
            declared = ", ".join(job.source for job in options.declared_jobs)
            verbose.debug("launchers", f"{path}: no launcher starts it; job from {declared}")
        else:
            verbose.debug("launchers", f"{path}: no launcher starts it, and no job is declared")


def with_project(
    files: Sequence[tuple[str, Optional[bytes]]],
    options: RunOptions,
    cache: Optional[ResultCache] = None,
) -> RunOptions:
    """``options`` whose project knows the launchers of ``files`` (the files that passed the
    prefilter, with their bytes), so each launched script gets its job facts
    (``smpfix.engine.launcher_index``). Done once per run, in the main process."""
    from smpfix.engine.launcher_index import with_launchers

    if options.project is None:
        return options
    return replace(
        options, project=with_launchers(files, options.project, options.launchers, cache)
    )


def _with_refused_parameters(
    results: list[FileResult], project: Optional[Project]
) -> list[FileResult]:
    """A launcher's parameters file that was not read (a FIFO, a device, outside the
    project, too large) gets its one line also when only a script it starts is checked: at
    the launcher's estimator call, once, and not again when the launcher's own check said it."""
    if project is None:
        return results
    by_path = {os.path.abspath(result.path): result for result in results}
    for result in results:
        for link in project.launchers_of(result.path):
            if link.refusal is None:
                continue
            shown = by_path.get(link.launcher)
            # Named the way the checked file was (absolute, or relative to this folder).
            named = link.launcher if os.path.isabs(result.path) else os.path.relpath(link.launcher)
            current = shown if shown is not None else FileResult(named)
            if any(error.message == link.refusal for error in current.errors):
                continue
            error = FileError(current.path, link.refusal, link.line, link.column)
            by_path[link.launcher] = replace(current, errors=(*current.errors, error))
    return list(by_path.values())


def _regroup(results: list[FileResult]) -> list[FileResult]:
    """Move findings reported in other files (helper modules checked on behalf of a script)
    to those files' results, once each even when several scripts import the same module."""
    by_path = {result.path: result for result in results}
    moved: dict[str, dict[tuple[str, int, int, int], Finding]] = {}
    for result in results:
        foreign = [f for f in result.findings if f.path != result.path]
        if not foreign:
            continue
        by_path[result.path] = replace(
            result, findings=tuple(f for f in result.findings if f.path == result.path)
        )
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
