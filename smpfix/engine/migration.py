"""``smpfix migrate``: the jobs among the checked paths, each moved to SMP v2 as one unit.

A job is what one estimator call starts: the launcher, the script its ``entry_point`` names,
and the project modules that script imports which use the library (a script no checked
launcher starts is a job of its own, with the job facts its check would use: the stated job,
the launchers of its project, its own ``smp.init`` dict). The launchers are paired with their
scripts as ``smpfix check`` and ``smpfix plan`` pair them (``smpfix.job.linking``), and each
script and helper is rewritten by ``smpfix.migrate.script`` with its launcher's job facts.

A job moves whole or not at all: when any of its items is blocking (pipeline parallelism,
TensorFlow, the Trainer integration), none of its files is rewritten; each only gains the
``TODO`` comments of what a person must do first, so the job keeps running on SMP v1. A
launcher's scaffold items get their ``TODO`` comments here too (a script's are written by the
script half). Files already on v2 are left alone, so a second run changes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Optional

from smpfix.base import nesting, notebook, source
from smpfix.base.findings import FileError
from smpfix.engine.analysis import parse, script_job
from smpfix.engine.discovery import DiscoveredFile
from smpfix.engine.launcher_index import LauncherSearch, with_launchers
from smpfix.job.jobfacts import DeclaredJob
from smpfix.job.linking import may_be_launcher
from smpfix.job.project import Project
from smpfix.migrate.items import FileMigration, MigrationItem, Outcome
from smpfix.migrate.launcher import (
    V2_FRAMEWORK_VERSION,
    V2_PY_VERSION,
    V2_SMP_RELEASE,
    LaunchMigration,
    migrate_launchers,
)
from smpfix.migrate.run import JobMigration, MigrationRun
from smpfix.migrate.script import migrate_script
from smpfix.migrate.text_edits import TextEdit, apply_edits, todo_edits
from smpfix.program.model import Program
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import parse_file


@dataclass(frozen=True)
class _Source:
    """A file read once: its text on disk, the code LibCST parsed (a notebook's joined
    cells) and the notebook, if it is one."""

    path: str
    source: source.SourceFile
    code: str
    book: Optional[notebook.Notebook]


@dataclass
class _Plan:
    """The edits each file gets, collected job by job (mutable while the run is built)."""

    sources: dict[str, _Source] = field(default_factory=dict)
    edits: dict[str, list[TextEdit]] = field(default_factory=dict)
    scripts: dict[str, FileMigration] = field(default_factory=dict)
    # Scripts of a blocked job: kept on v1 even when another job would move them.
    kept: set[str] = field(default_factory=set)


def migrate_files(
    tasks: Sequence[DiscoveredFile],
    project: Project,
    declared: Sequence[DeclaredJob],
    search: Optional[LauncherSearch] = None,
) -> MigrationRun:
    """Migrate the jobs among ``tasks`` (the discovered files); nothing is written here."""
    errors: list[FileError] = []
    sources: dict[str, _Source] = {}
    raws: list[tuple[str, Optional[bytes]]] = []
    with nesting.recursion_headroom():
        for task in tasks:
            read = _read(task.path)
            if isinstance(read, FileError):
                errors.append(read)
                raws.append((task.path, None))
                continue
            sources[os.path.abspath(task.path)] = read
            raws.append((task.path, read.source.raw))
        project = with_launchers(raws, project, search)
        plan = _Plan(sources=dict(sources))
        jobs: list[JobMigration] = []
        started: set[str] = set()
        for key, read in sources.items():
            if not may_be_launcher(read.source.raw, read.path):
                continue
            module, error = parse(read.code, read.path)
            if module is None:
                assert error is not None
                errors.append(error)
                continue
            for launch in migrate_launchers(module, read.code, read.path, read.path):
                jobs.append(_launch_job(key, launch, project, declared, plan, started, errors))
        helpers = {os.path.abspath(path) for job in jobs for path in job.files}
        for key, read in sources.items():
            if key in started or key in helpers or read.book is not None:
                continue
            job = _script_job(key, project, declared, plan, errors)
            if job is not None:
                jobs.append(job)
        files = _finished(plan, jobs, errors)
    return MigrationRun(tuple(jobs), tuple(files), tuple(_unique(errors)))


def _read(path: str) -> _Source | FileError:
    try:
        src = source.read(path)
    except source.SourceError as exc:
        return FileError(path, exc.message, exc.line, exc.column)
    if not path.endswith(".ipynb"):
        return _Source(path, src, src.text, None)
    try:
        book = notebook.parse(src.text).checkable()[0]
    except notebook.NotebookError as exc:
        return FileError(path, str(exc))
    return _Source(path, src, book.joined()[0], book)


def _shown(path: str) -> str:
    shown = os.path.relpath(path)
    return path if shown.startswith("..") else shown


def _launch_job(
    launcher_key: str,
    launch: LaunchMigration,
    project: Project,
    declared: Sequence[DeclaredJob],
    plan: _Plan,
    started: set[str],
    errors: list[FileError],
) -> JobMigration:
    shown = plan.sources[launcher_key].path
    files = [launcher_key]
    items = list(launch.items)
    scripts: list[FileMigration] = []
    script = launch.script
    if script is not None and script.endswith(".py") and os.path.isfile(script):
        key = os.path.abspath(script)
        started.add(key)
        for migrated in _script_files(key, project, declared, plan, errors):
            files.append(os.path.abspath(migrated.path))
            scripts.append(migrated)
            items += migrated.items
    blocked = any(item.blocking for item in items)
    own = [item for item in launch.items if item.outcome is not Outcome.MOVED]
    if blocked:
        plan.kept.update(files[1:])
        plan.edits.setdefault(launcher_key, []).extend(
            todo_edits(plan.sources[launcher_key].code, _waiting(launch.items))
        )
    else:
        plan.edits.setdefault(launcher_key, []).extend(
            [*launch.edits, *todo_edits(plan.sources[launcher_key].code, own)]
        )
    container = (
        f"PyTorch {V2_FRAMEWORK_VERSION}, {V2_PY_VERSION} (SMP {V2_SMP_RELEASE})"
        if any(item.topic == "container" and item.outcome is Outcome.MOVED for item in items)
        else None
    )
    shown_files = tuple(plan.sources[key].path for key in files)
    return JobMigration(f"{shown}:{launch.line}", shown_files, tuple(items), container)


def _script_job(
    key: str,
    project: Project,
    declared: Sequence[DeclaredJob],
    plan: _Plan,
    errors: list[FileError],
) -> Optional[JobMigration]:
    """A script (or a module) no checked launcher starts: a job of its own when it imports
    SMP v1."""
    read = plan.sources[key]
    if b"smdistributed" not in read.source.raw:
        return None
    migrated = _script_files(key, project, declared, plan, errors)
    if not migrated:
        return None
    items = tuple(item for file in migrated for item in file.items)
    if any(item.blocking for item in items):
        plan.kept.update(os.path.abspath(file.path) for file in migrated)
    return JobMigration(read.path, tuple(file.path for file in migrated), items)


def _script_files(
    key: str,
    project: Project,
    declared: Sequence[DeclaredJob],
    plan: _Plan,
    errors: list[FileError],
) -> list[FileMigration]:
    """The script at ``key`` and its project modules that use SMP v1, each migrated with the
    script's job (once per run: a module two scripts import is migrated for the first)."""
    read = plan.sources.get(key) or _read(_shown(key))
    if isinstance(read, FileError):
        errors.append(read)
        return []
    plan.sources.setdefault(key, read)
    module, error = parse(read.code, read.path)
    if module is None:
        assert error is not None
        errors.append(error)
        return []
    file = parse_file(read.path, read.code)
    if file is None or not file.facts.imports_smp:
        return []  # already on v2, or nothing of the library to move
    modules = LocalModules(project, read.path)
    job = script_job(file, (*declared, *project.declared_for(read.path)), modules)
    migrated = [_migrated(key, Program(file, job, modules), plan)]
    for helper in modules.imported_closure(file):
        helper_key = os.path.abspath(helper.path)
        if not helper.facts.imports_smp or helper_key in plan.scripts:
            continue
        helper_source = plan.sources.get(helper_key) or _read(helper.path)
        if isinstance(helper_source, FileError):
            errors.append(helper_source)
            continue
        plan.sources.setdefault(helper_key, helper_source)
        migrated.append(_migrated(helper_key, Program(helper, job, modules, (file,)), plan))
    return migrated


def _migrated(key: str, program: Program, plan: _Plan) -> FileMigration:
    known = plan.scripts.get(key)
    if known is None:
        known = plan.scripts[key] = migrate_script(program)
    return known


def _waiting(items: Sequence[MigrationItem]) -> list[MigrationItem]:
    """What a person must do before a blocked job can move: its blocking and report items."""
    return [item for item in items if item.blocking or item.outcome is Outcome.REPORT]


def _finished(
    plan: _Plan, jobs: Sequence[JobMigration], errors: list[FileError]
) -> list[FileMigration]:
    """Each file's text after the run, for the files that change; a result that does not
    parse is dropped with an error (the file is left as it was)."""
    items_by_file: dict[str, list[MigrationItem]] = {}
    for job in jobs:
        for item in job.items:
            items_by_file.setdefault(item.path, []).append(item)
    results: list[FileMigration] = []
    for key in sorted(set(plan.edits) | set(plan.scripts)):
        read = plan.sources[key]
        if key in plan.scripts:
            migrated = plan.scripts[key]
            if key in plan.kept:
                edits = todo_edits(read.code, _waiting(migrated.items))
                after = _applied(read, edits)
            else:
                after = migrated.after
            items = migrated.items
        else:
            after = _applied(read, plan.edits.get(key, []))
            items = tuple(items_by_file.get(read.path, ()))
        if after == read.source.text:
            continue
        if not _parses(read, after):
            errors.append(
                FileError(
                    read.path,
                    "internal error: the migration produced code that does not parse;"
                    " the file is left as it was",
                )
            )
            continue
        results.append(FileMigration(read.path, read.source.text, after, tuple(items)))
    return results


def _applied(read: _Source, edits: Sequence[TextEdit]) -> str:
    if not edits:
        return read.source.text
    if read.book is None:
        return apply_edits(read.code, edits)
    return _notebook_applied(read.book, edits)


def _notebook_applied(book: notebook.Notebook, edits: Sequence[TextEdit]) -> str:
    """The notebook with ``edits`` of its joined code applied cell by cell (an edit that
    spans two cells is left out); only the cells that change are written back."""
    _, layout = book.joined()
    joined = book.joined()[0]
    line_starts = [0, *(i + 1 for i, char in enumerate(joined) if char == "\n")]
    spans = []
    for cell, (first, count) in zip(book.cells, layout):
        start = line_starts[first - 1]
        end = (
            line_starts[first - 1 + count] if first - 1 + count < len(line_starts) else len(joined)
        )
        spans.append((cell, start, end))
    by_cell: dict[int, list[TextEdit]] = {}
    for edit in edits:
        for position, (_, start, end) in enumerate(spans):
            if (
                start <= edit.start
                and edit.end <= end
                and (edit.start < end or edit.start == start)
            ):
                by_cell.setdefault(position, []).append(
                    replace(edit, start=edit.start - start, end=edit.end - start)
                )
                break
    sources: dict[int, str] = {}
    for position, cell_edits in by_cell.items():
        cell = spans[position][0]
        masked = notebook.mask(cell.source)
        had_newline = masked.endswith("\n")
        code = masked if had_newline else masked + "\n"
        new = apply_edits(code, cell_edits)
        if not had_newline and new.endswith("\n"):
            new = new[:-1]
        sources[cell.index] = notebook.unmask(new)
    return book.with_sources(sources)


def _parses(read: _Source, after: str) -> bool:
    if read.book is None:
        return parse(after, read.path)[0] is not None
    try:
        book = notebook.parse(after)
    except notebook.NotebookError:
        return False
    return parse(book.joined()[0], read.path)[0] is not None


def _unique(errors: Sequence[FileError]) -> list[FileError]:
    seen: list[FileError] = []
    for error in errors:
        if error not in seen:
            seen.append(error)
    return seen


def write_migrated(run: MigrationRun, tasks: Sequence[DiscoveredFile]) -> list[FileError]:
    """Write every changed file of ``run`` (atomically, in its own encoding; ``--apply``),
    unless it changed on disk since it was read or is a link out of the checked tree.
    Returns what could not be written."""
    links_out = {os.path.abspath(task.path) for task in tasks if not task.writable}
    errors: list[FileError] = []
    for migrated in run.files:
        if os.path.abspath(migrated.path) in links_out:
            errors.append(
                FileError(
                    migrated.path,
                    "not written: it is a link to a file outside the checked tree"
                    " (name it explicitly to migrate it)",
                )
            )
            continue
        try:
            now = source.read(migrated.path)
            if now.text != migrated.before:
                raise source.ConcurrentModification(
                    "not written: the file changed on disk while it was migrated"
                )
            source.write_atomic(now, migrated.after)
        except source.SourceError as exc:
            errors.append(FileError(migrated.path, exc.message))
    return errors
