"""The launchers of a project, found from any one of its files.

pre-commit names only the files that changed, an editor checks one buffer, and stdin has no
folder; yet a script's job is declared by a launcher somewhere else in its project. So a run
indexes the launchers of every project a checked file belongs to, unless the run already
checks that whole project, and links them to the checked files exactly as a run over the
whole project would: a file's result never depends on which other files were named.

- The **project root** of a file is the nearest folder above it holding ``pyproject.toml``,
  ``setup.cfg``, ``setup.py`` or ``.git`` (``smpfix.job.project_root``). It is **searched**
  when no checked directory contains it; a run over the project root itself (or a folder
  above it) sees every launcher among its own files and searches nothing.
- **Searching** walks the root with the discovery rules of a run (the ``exclude`` patterns,
  ``.gitignore``, hidden and tool folders), reads each file's bytes and keeps those that
  mention the library and an estimator (``smpfix.job.linking.may_be_launcher``): nothing
  that cannot be a launcher is decoded or parsed. With the result cache, a file whose size
  and modification time have not changed is not read again, and what each launcher says is
  kept keyed on its bytes, so an unchanged launcher is parsed once.
- ``[tool.smpfix] launchers = ["jobs/*.py"]`` names the launchers instead (globs relative to
  the configuration file): exactly those configure scripts, in every run, and nothing is
  walked. ``--no-launcher-search`` turns both off: only the launchers among the checked
  files count, and a file's job may then depend on what else was named.
- A searched root also becomes one of the run's roots, so the sibling modules a script
  imports are read as in a whole-project run.

``project_links(root, LauncherSearch.of(config), cache)`` answers the same question for one
project, for front ends that check a buffer (the language server); ``project_root`` says
which project a path is in.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from smpfix.base import source
from smpfix.engine.discovery import SOURCE_SUFFIXES, Excluder, discover
from smpfix.job.linking import LaunchRecord, LinkedScript, may_be_launcher
from smpfix.job.project_root import project_root
from smpfix.job.shell_launcher import SHELL_SUFFIX

if TYPE_CHECKING:
    import libcst as cst

    from smpfix.base.walker import NodeIndex
    from smpfix.engine.cache import ResultCache
    from smpfix.engine.config import Config
    from smpfix.job.project import Project


@dataclass(frozen=True)
class LauncherSearch:
    """How a run finds launchers beyond the checked files (from ``[tool.smpfix]`` and the CLI)."""

    # Globs naming the launchers, relative to ``config_root``; empty: walk the project.
    named: tuple[str, ...] = ()
    config_root: str = "."
    # The run's ``exclude`` patterns (relative to ``config_root``) and ``respect-gitignore``.
    exclude: tuple[str, ...] = ()
    respect_gitignore: bool = True

    @classmethod
    def of(cls, config: Config, exclude: Sequence[str] = ()) -> LauncherSearch:
        """The search ``[tool.smpfix]`` asks for, with extra ``exclude`` patterns
        (``--exclude``)."""
        return cls(
            config.launchers,
            str(config.root),
            (*config.exclude, *exclude),
            config.respect_gitignore,
        )

    def excluder(self) -> Excluder:
        return Excluder(self.exclude, Path(self.config_root))


def with_launchers(
    files: Sequence[tuple[str, Optional[bytes]]],
    project: Project,
    search: Optional[LauncherSearch],
    cache: Optional[ResultCache] = None,
) -> Project:
    """``project`` with the launchers that configure ``files`` (the checked files that may
    involve the library, with their bytes; None when unreadable).

    Without ``search``, the launchers among ``files``. With it, those plus the launchers of
    each project root no checked directory covers, and those roots replace the checked
    paths under them as the project's roots; when ``search.named`` names the launchers,
    exactly those (a checked file they do not name is checked, but configures nothing).
    A launcher among ``files`` is read from the bytes given (a buffer on stdin may differ
    from the file on disk).
    """
    digests: dict[str, Optional[str]] = {}
    checked = {os.path.abspath(path): (path, raw) for path, raw in files}
    if search is None or not search.named:
        launchers = [(path, raw) for path, raw in files]
    else:
        launchers = [checked.get(os.path.abspath(path), (path, None)) for path in _named(search)]
    searched: list[str] = []
    if search is not None:
        readable = [
            path for path, raw in files if raw is not None
        ]  # an unreadable file needs no job
        searched = sorted(
            {root for root in map(project_root, readable) if not project.contains(root)}
        )
        if not search.named:
            for root in searched:
                launchers += [
                    found
                    for found in _candidates(root, search, cache)
                    if os.path.abspath(found[0]) not in checked
                ]
        if searched:
            kept = [
                root for root in project.roots if not any(_inside(root, top) for top in searched)
            ]
            project = project.with_roots([*kept, *searched])
    if search is None or not search.named:
        # Shell launchers are never checked files: those under the checked folders count as
        # the checked Python files do (the searched roots' were walked above).
        launchers += _shell_launchers(
            [root for root in project.roots if not any(_inside(root, top) for top in searched)],
            search or LauncherSearch(),
            cache,
        )
    links: list[LinkedScript] = []
    for path, raw in launchers:
        data = raw if raw is not None else source.read_bytes(path)
        # A launcher that is checked too is parsed once for both (``_read_records``).
        links.extend(
            _links(path, data, cache, digests, os.path.abspath(path) in checked)
            if data is not None
            else ()
        )
    return project.with_links(links)


def project_links(
    root: str, search: LauncherSearch = LauncherSearch(), cache: Optional[ResultCache] = None
) -> list[LinkedScript]:
    """Every link the launchers of the project at ``root`` declare (named ones with
    ``search.named``), in launcher order: what a run gives any script of that project."""
    digests: dict[str, Optional[str]] = {}
    links: list[LinkedScript] = []
    launchers = (
        [(path, None) for path in _named(search)]
        if search.named
        else _candidates(root, search, cache)
    )
    for path, raw in launchers:
        data = raw if raw is not None else source.read_bytes(path)
        links.extend(_links(path, data, cache, digests) if data is not None else ())
    return sorted(links, key=lambda link: (link.launcher, link.line, link.script))


def _shell_launchers(
    roots: Sequence[str], search: LauncherSearch, cache: Optional[ResultCache]
) -> list[tuple[str, Optional[bytes]]]:
    """The shell scripts under the checked folders ``roots`` that may be launchers."""
    found: list[tuple[str, Optional[bytes]]] = []
    for root in roots:
        if os.path.isdir(root):
            found += _candidates(root, search, cache, (SHELL_SUFFIX,))
    return found


# What the index remembers of each walked file: its size and modification time when last
# read, and whether its bytes could make it a launcher then.
_Seen = tuple[int, int, bool]


def _candidates(
    root: str,
    search: LauncherSearch,
    cache: Optional[ResultCache],
    suffixes: tuple[str, ...] = (*SOURCE_SUFFIXES, SHELL_SUFFIX),
) -> list[tuple[str, Optional[bytes]]]:
    """The files under ``root`` that may be launchers, with their bytes when they were read.

    Every file the walk finds passes the byte prefilter; with a cache, a file whose size and
    modification time are those of the last run is not read again (its verdict is kept), so
    a warm run costs a walk and a ``stat`` per file.
    """
    key = (
        cache.key(
            root,
            b"",
            {
                "launcher_index": [
                    search.exclude,
                    search.respect_gitignore,
                    search.config_root,
                    suffixes,
                ]
            },
        )
        if cache
        else None
    )
    known: dict[str, _Seen] = {}
    if cache is not None and key is not None:
        known = cache.load_value(key, dict[str, _Seen]) or {}
    seen: dict[str, _Seen] = {}
    found: list[tuple[str, Optional[bytes]]] = []
    for path in _walk([root], search, suffixes):
        try:
            status = os.stat(path)
        except OSError:
            continue
        before = known.get(path)
        if before is not None and before[:2] == (status.st_size, status.st_mtime_ns):
            seen[path] = before
            if before[2]:
                found.append((path, None))
            continue
        raw = source.read_bytes(
            path
        )  # after the stat: a file changed meanwhile is read again next time
        candidate = raw is not None and may_be_launcher(raw, path)
        seen[path] = (status.st_size, status.st_mtime_ns, candidate)
        if candidate:
            found.append((path, raw))
    if cache is not None and key is not None and seen != known:
        cache.store_value(key, seen)
    return found


def _links(
    path: str,
    raw: bytes,
    cache: Optional[ResultCache],
    digests: dict[str, Optional[str]],
    checked: bool = False,
) -> list[LinkedScript]:
    linked = (record.linked() for record in _records(path, raw, cache, digests, checked))
    return [link for link in linked if link is not None]


def _records(
    path: str,
    raw: bytes,
    cache: Optional[ResultCache],
    digests: dict[str, Optional[str]],
    checked: bool = False,
) -> tuple[LaunchRecord, ...]:
    """What the launcher at ``path`` says (nothing when it cannot be one), from the cache when
    its bytes, project root and the JSON files it reads are unchanged. ``checked``: the run
    checks the launcher too."""
    if not may_be_launcher(raw, path):
        return ()
    root = project_root(path)
    key = cache.key(path, raw, {"launcher_records": root}) if cache is not None else None
    if cache is not None and key is not None:
        cached = cache.load_value(key, tuple[LaunchRecord, ...], digests)
        if cached is not None:
            return tuple(cached)
    records = _read_records(path, raw, root, checked)
    if cache is not None and key is not None:
        cache.store_value(
            key, records, [dependency for record in records for dependency in record.dependencies]
        )
    return records


def _read_records(path: str, raw: bytes, root: str, checked: bool) -> tuple[LaunchRecord, ...]:
    """``read_launcher``; a launcher the run checks too is parsed, with its facts, into the
    process's shared store, where its check (here, or in a worker forked later) finds it."""
    from smpfix.base.nesting import recursion_headroom
    from smpfix.job.linking import Parse, read_launcher

    parse: Optional[Parse] = None
    if checked:
        from smpfix.program.project.local_modules import SHARED_STORE

        def parse(code: str) -> Optional[tuple[cst.Module, Optional[NodeIndex]]]:
            linked = SHARED_STORE.remember(path, code)
            return (linked.module, linked.index) if linked is not None else None

    try:
        text = source.decode(path, raw).text
        with recursion_headroom():
            return tuple(read_launcher(path, text, root, parse))
    except (
        Exception
    ):  # one launcher the linker chokes on must not stop the run; checking it reports why
        return ()


def _walk(roots: Iterable[str], search: LauncherSearch, suffixes: Sequence[str]) -> list[str]:
    excluder = search.excluder()
    return [found.path for found in discover(roots, excluder, search.respect_gitignore, suffixes)]


def _named(search: LauncherSearch) -> list[str]:
    """The files the ``launchers`` globs match, minus those ``exclude`` matches."""
    base, excluder = Path(search.config_root), search.excluder()
    found: set[str] = set()
    for pattern in search.named:
        for path in base.glob(pattern):
            if path.is_file() and not excluder.matches(path):
                found.add(str(path))
    return sorted(found)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
