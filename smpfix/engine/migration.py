"""``smpfix migrate``: the jobs among the checked paths, each moved to SMP v2 as one unit.

A job is what one estimator call starts: the launcher, the script its ``entry_point`` names,
and the project modules that script imports which use the library (a script no checked
launcher starts is a job of its own, with the job facts its check would use: the stated job,
the launchers of its project, its own ``smp.init`` dict). Launchers are paired with their
scripts as ``smpfix check`` and ``smpfix plan`` pair them (``smpfix.job.linking``), and each
script and helper is rewritten by ``smpfix.migrate.script`` with its launcher's job facts.

A job moves whole or not at all: when any of its items is blocking (pipeline parallelism,
TensorFlow, the Trainer integration), none of its files is rewritten; each only gains the
``TODO`` comments of what a person must do first, so the job keeps running on SMP v1. A
launcher's scaffold items get their ``TODO`` comments here too (a script's are written by the
script half). Files already on v2 are left alone, so a second run changes nothing. Nothing is
written here: ``write_migrated`` does that for ``--apply``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional, Union

import libcst as cst

from smpfix.base import nesting, notebook, source
from smpfix.base.findings import FileError
from smpfix.base.flavour import Flavour
from smpfix.base.walker import indexed
from smpfix.engine.analysis import parse, script_job
from smpfix.engine.discovery import DiscoveredFile
from smpfix.engine.launcher_index import LauncherSearch, with_launchers
from smpfix.job.framework_versions import launcher_flavour
from smpfix.job.jobfacts import DeclaredJob
from smpfix.job.linking import may_be_launcher, shown_path
from smpfix.job.project import Project
from smpfix.job.project_root import project_root
from smpfix.job.shell_launcher import SHELL_SUFFIX
from smpfix.migrate import links
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
from smpfix.program.facts import collect
from smpfix.program.model import Program
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import ParsedFile

_CONTAINER = f"PyTorch {V2_FRAMEWORK_VERSION}, {V2_PY_VERSION} (SMP {V2_SMP_RELEASE})"


@dataclass(frozen=True)
class _Source:
    """A file read once: its text on disk, the code LibCST parses (a notebook's joined
    cells) and the notebook, if it is one."""

    path: str
    source: source.SourceFile
    code: str
    book: Optional[notebook.Notebook]


@dataclass
class _Plan:
    """What each file gets, collected job by job while the run is built."""

    sources: dict[str, _Source] = field(default_factory=dict)
    # Launcher edits (and TODO comments) by file.
    edits: dict[str, list[TextEdit]] = field(default_factory=dict)
    # Each launcher's items, as the report shows them (a notebook's by cell).
    launcher_items: dict[str, list[MigrationItem]] = field(default_factory=dict)
    # Each script or helper, migrated once (a module two scripts import: for the first).
    scripts: dict[str, FileMigration] = field(default_factory=dict)
    # Scripts of a blocked job: kept on v1 even when another job would move them.
    kept: set[str] = field(default_factory=set)
    # Files some job already holds (launched scripts, their helpers, launchers).
    claimed: set[str] = field(default_factory=set)


def migrate_files(
    tasks: Sequence[DiscoveredFile],
    project: Project,
    declared: Sequence[DeclaredJob],
    search: Optional[LauncherSearch] = None,
) -> MigrationRun:
    """Migrate the jobs among ``tasks`` (the discovered files), launchers first in path
    order, then the scripts no launcher among them starts. ``declared`` are the stated jobs
    (``--job``, ``[tool.smpfix.job]``), highest precedence first."""
    errors: list[FileError] = []
    plan = _Plan()
    raws: list[tuple[str, Optional[bytes]]] = []
    with nesting.recursion_headroom():
        for task in tasks:
            read = _read(task.path)
            if isinstance(read, FileError):
                errors.append(read)
                raws.append((task.path, None))
                continue
            plan.sources[os.path.abspath(task.path)] = read
            raws.append((task.path, read.source.raw))
        # The launchers of each project a file belongs to, found as ``check`` finds them.
        project = with_launchers(raws, project, search)
        stated = _stated(declared)
        checked = list(plan.sources.items())
        jobs: list[JobMigration] = []
        for key, read in checked:
            if not may_be_launcher(read.source.raw, read.path):
                continue
            module = _module(read, errors)
            if module is None:
                continue
            launches = migrate_launchers(module, read.code, read.path, read.path, stated)
            if launches:
                plan.claimed.add(key)
            for launch in launches:
                jobs.append(_launch_job(key, launch, project, declared, plan, errors))
        for key, read in sorted(checked, key=_helper_last):
            if key in plan.claimed or read.book is not None:
                continue
            job = _script_job(key, project, declared, plan, errors)
            if job is not None:
                jobs.append(job)
        files = _finished(plan, errors)
    return MigrationRun(tuple(jobs), tuple(files), tuple(_unique(errors)))


def _helper_last(entry: tuple[str, _Source]) -> bool:
    """Scripts that run (a ``__main__`` block, the library's ``init``) before the modules they
    may import: a helper is migrated with the job of the script that imports it, not first as
    a job of its own that would move it while its script stays on v1."""
    raw = entry[1].source.raw
    return not (b"__main__" in raw or b"init(" in raw)


def _stated(declared: Sequence[DeclaredJob]) -> Mapping[str, Any]:
    """The settings the stated jobs give, the highest precedence winning."""
    settings: dict[str, Any] = {}
    for job in reversed(declared):
        settings.update(job.settings)
    return settings


def _read(path: str) -> Union[_Source, FileError]:
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


def _module(read: _Source, errors: list[FileError]) -> Optional[cst.Module]:
    module, error = parse(read.code, read.path)
    if module is None:
        assert error is not None
        errors.append(error)
    return module


def _shown(path: str) -> str:
    shown = os.path.relpath(path)
    return path if shown.startswith("..") else shown


def _launch_job(
    launcher_key: str,
    launch: LaunchMigration,
    project: Project,
    declared: Sequence[DeclaredJob],
    plan: _Plan,
    errors: list[FileError],
) -> JobMigration:
    launcher = plan.sources[launcher_key]
    files = [launcher_key]
    items = list(launch.items)
    script = launch.script
    if script is not None and script.endswith(".py") and os.path.isfile(script):
        key = os.path.abspath(script)
        plan.claimed.add(key)
        # A TensorFlow job has nothing to rewrite in its scripts; any other blocked job's
        # scripts are still read, so the report lists everything that waits for a person.
        rewrite = launcher_flavour(launch.launcher) is not Flavour.TENSORFLOW
        for migrated in _script_files(key, project, declared, plan, errors, rewrite):
            files.append(os.path.abspath(migrated.path))
            items += migrated.items
    blocked = any(item.blocking for item in items)
    edits = plan.edits.setdefault(launcher_key, [])
    if blocked:
        plan.kept.update(files[1:])
        # The launcher says why its job stays on v1, wherever the blocking item is: by the
        # file alone, since a first run's comments move the item's line in a second.
        elsewhere = [
            replace(item, line=launch.line, message=f"{item.path}: {item.message}")
            for item in items[len(launch.items) :]
            if item.blocking
        ]
        edits += todo_edits(launcher.code, [*_waiting(launch.items), *elsewhere])
    else:
        own = [item for item in launch.items if item.outcome is not Outcome.MOVED]
        edits += [*launch.edits, *todo_edits(launcher.code, own)]
    shown_items = [_in_cell(item, launcher) for item in launch.items]
    plan.launcher_items.setdefault(launcher_key, []).extend(shown_items)
    items[: len(launch.items)] = shown_items
    container = (
        _CONTAINER
        if any(item.topic == "container" and item.outcome is Outcome.MOVED for item in items)
        else None
    )
    name = _in_cell(replace(launch.items[0], line=launch.line), launcher) if launch.items else None
    return JobMigration(
        f"{name.path if name else launcher.path}:{name.line if name else launch.line}",
        tuple(plan.sources[key].path for key in files),
        tuple(items),
        container,
    )


def _in_cell(item: MigrationItem, read: _Source) -> MigrationItem:
    """``item`` at its line in its notebook cell (``launch.ipynb:cell 7``), as ``check``
    places findings; unchanged outside a notebook."""
    if read.book is None:
        return item
    cell, line = read.book.cell_of_line(item.line)
    return replace(item, path=f"{item.path}:cell {cell + 1}", line=line)


def _script_job(
    key: str,
    project: Project,
    declared: Sequence[DeclaredJob],
    plan: _Plan,
    errors: list[FileError],
) -> Optional[JobMigration]:
    """A script no checked launcher starts: a job of its own when it uses SMP v1 and the
    migration has something to do or say about it."""
    read = plan.sources[key]
    if b"smdistributed" not in read.source.raw:
        return None
    behind = _launchers_left_behind(read.path, project, plan)
    rewrite = not any(item.blocking for item in behind)
    migrated = _script_files(key, project, declared, plan, errors, rewrite)
    if not migrated:
        return None
    items = [item for file in migrated for item in file.items] + behind
    if not items and all(file.after == file.before for file in migrated):
        return None
    if any(item.blocking for item in items):
        plan.kept.update(os.path.abspath(file.path) for file in migrated)
    if behind:
        # The script says which launcher it waits for (a shell launcher takes no comment).
        plan.launcher_items.setdefault(key, []).extend(behind)
        if not rewrite:
            plan.edits.setdefault(key, []).extend(todo_edits(read.code, _waiting(behind)))
    return JobMigration(read.path, tuple(file.path for file in migrated), tuple(items))


def _launchers_left_behind(path: str, project: Project, plan: _Plan) -> list[MigrationItem]:
    """The launchers that start ``path`` but are not migrated with it (a shell launcher, or
    one outside the paths given): each must move with the script, by a person or a run, so
    each blocks the script until then; one that starts a job v2 cannot run (pipeline
    parallelism, TensorFlow) says so."""
    found = []
    root = project_root(path)
    for link in project.launchers_of(path):
        where = shown_path(link.launcher, root)
        if not link.launcher.endswith(".ipynb"):  # a notebook's lines are its joined cells'
            where = f"{where}:{link.line}"
        settings = link.job.settings
        degree = settings.get("pipeline_parallel_degree", settings.get("partitions"))
        if settings.get("framework") == "tensorflow":
            found.append(
                _left_behind(
                    path,
                    f"{where} starts it with TensorFlow: {_NO_TF}",
                    True,
                    links.SUPPORTED_FRAMEWORKS,
                )
            )
            continue
        if isinstance(degree, int) and not isinstance(degree, bool) and degree > 1:
            found.append(
                _left_behind(
                    path,
                    f"{where} runs it with pipeline parallelism (degree {degree}), which SMP v2"
                    " does not have: choose the sharding with `smpfix plan`, then migrate again",
                    True,
                    links.UPGRADE_FROM_V1,
                )
            )
            continue
        if link.launcher.endswith(SHELL_SUFFIX):
            message = (
                f"it is started by the shell launcher {where}: start it with torchrun and"
                " pass SMP v2's parameters (hybrid_shard_degree, ...) there"
            )
        elif os.path.abspath(link.launcher) not in plan.sources:
            message = (
                f"its launcher {where} is not among the migrated paths: migrate it too, or"
                " the job keeps starting SMP v1"
            )
        else:
            continue
        # Blocking: the launcher keeps starting SMP v1 until a person moves it, so the script
        # must stay on v1 with it (a partial migration leaves the job working under v1).
        found.append(_left_behind(path, message, True))
    return found


_NO_TF = "SMP v2 supports PyTorch only; keep it on SMP v1 or port the model to PyTorch FSDP"


def _left_behind(
    path: str, message: str, blocking: bool, link: str = links.USE_V2
) -> MigrationItem:
    return MigrationItem(path, 1, Outcome.REPORT, "launch", message, link, blocking)


def _script_files(
    key: str,
    project: Project,
    declared: Sequence[DeclaredJob],
    plan: _Plan,
    errors: list[FileError],
    rewrite: bool = True,
) -> list[FileMigration]:
    """The script at ``key`` and its project modules that use SMP v1, each migrated with the
    script's job (each file once per run). Without ``rewrite``, each is returned unchanged
    (a job v2 cannot run still holds them)."""
    read = plan.sources.get(key) or _read(_shown(key))
    if isinstance(read, FileError):
        errors.append(read)
        return []
    plan.sources.setdefault(key, read)
    file = _parsed(read, errors)
    if file is None or not file.facts.imports_smp:
        return []  # already on v2, or nothing of the library to move
    modules = LocalModules(project, read.path)
    job = script_job(file, (*declared, *project.declared_for(read.path)), modules)
    programs = [(key, Program(file, job, modules))]
    for helper in modules.imported_closure(file):
        helper_key = os.path.abspath(helper.path)
        if not helper.facts.imports_smp:
            continue
        helper_source = plan.sources.get(helper_key) or _read(helper.path)
        if isinstance(helper_source, FileError):
            errors.append(helper_source)
            continue
        plan.sources.setdefault(helper_key, helper_source)
        programs.append((helper_key, Program(helper, job, modules, (file,))))
    migrated = []
    for program_key, program in programs:
        plan.claimed.add(program_key)
        if not rewrite:
            text = program.file.text
            migrated.append(FileMigration(program.path, text, text, ()))
            continue
        known = plan.scripts.get(program_key)
        if known is None:
            known = plan.scripts[program_key] = migrate_script(program)
        migrated.append(known)
    return migrated


def _parsed(read: _Source, errors: list[FileError]) -> Optional[ParsedFile]:
    """``read`` parsed once, indexed, with its facts; None (and an error) when it does not
    parse."""
    module = _module(read, errors)
    if module is None:
        return None
    with indexed(module) as index:
        return ParsedFile(read.path, read.code, module, collect(module), index)


def _waiting(items: Sequence[MigrationItem]) -> list[MigrationItem]:
    """What a person must do before a blocked job can move: its blocking and report items."""
    return [item for item in items if item.blocking or item.outcome is Outcome.REPORT]


def _finished(plan: _Plan, errors: list[FileError]) -> list[FileMigration]:
    """Each file's text after the run, for the files that change; a result that does not
    parse is dropped with an error (the file is left as it was)."""
    results: list[FileMigration] = []
    for key in sorted(set(plan.edits) | set(plan.scripts)):
        read = plan.sources[key]
        if key in plan.scripts:
            migrated = plan.scripts[key]
            behind = plan.launcher_items.get(key, [])
            items = (*migrated.items, *behind)
            if key in plan.kept:
                after = _applied(read, todo_edits(read.code, _waiting(items)))
            else:
                after = apply_edits(migrated.after, todo_edits(migrated.after, _waiting(behind)))
        else:
            items = tuple(plan.launcher_items.get(key, ()))
            after = _applied(read, plan.edits[key])
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
        results.append(FileMigration(read.path, read.source.text, after, items))
    return results


def _applied(read: _Source, edits: Sequence[TextEdit]) -> str:
    if not edits:
        return read.source.text
    if read.book is None:
        return apply_edits(read.code, edits)
    return _notebook_applied(read.book, edits)


def _notebook_applied(book: notebook.Notebook, edits: Sequence[TextEdit]) -> str:
    """The notebook with ``edits`` of its joined code applied cell by cell (an edit that
    spans two cells is left out); only the cells that change are written back, with their
    magics as they were."""
    joined, layout = book.joined()
    line_starts = [0, *(i + 1 for i, char in enumerate(joined) if char == "\n")]
    spans = [
        (
            line_starts[first - 1],
            line_starts[first - 1 + count] if first + count <= len(line_starts) else len(joined),
        )
        for first, count in layout
    ]
    by_cell: dict[int, list[TextEdit]] = {}
    for edit in edits:
        for position, (start, end) in enumerate(spans):
            # An insertion at a cell's first offset belongs to that cell, not the one before.
            if start <= edit.start and edit.end <= end and edit.start < end:
                by_cell.setdefault(position, []).append(
                    replace(edit, start=edit.start - start, end=edit.end - start)
                )
                break
    sources: dict[int, str] = {}
    for position, cell_edits in by_cell.items():
        cell = book.cells[position]
        masked = notebook.mask(cell.source)
        had_newline = masked.endswith("\n")
        new = apply_edits(masked if had_newline else masked + "\n", cell_edits)
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
