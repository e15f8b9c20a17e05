"""The launchers of each project an open document belongs to, and the job each declares.

A script's job facts come from the launcher that starts it, which is another file of its
project. The server asks the launcher index exactly as a one-file ``smpfix check`` does
(``engine.launcher_index.project_links``: the project root of the document, walked with
the run's exclusions, or the launchers ``[tool.smpfix] launchers`` names), so a script
shows in the editor the findings the command line gives it. The index of a project is
built when one of its documents is first checked and kept; afterwards only the launcher
that changed is read again: an open launcher's unsaved text counts over its file on disk,
and a save or a change on disk is read from disk. A change on disk is seen even when the
editor reports none: each launcher read from disk is kept with its modification time and
size (``Stamp``), compared before every check (``refresh``) and, by the server, every half
second while documents are open.

The project root is the command line's (``job.project_root``: never the filesystem root, the
home folder or a temporary-files root) with one difference: a file with no project marker
above it is a project of its own folder, never of the server's current folder, which an
editor picks for reasons of its own (``search_root``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from smpfix.base import source
from smpfix.base.nesting import recursion_headroom
from smpfix.engine.config import Config
from smpfix.engine.launcher_index import LauncherSearch, project_links
from smpfix.job.linking import LinkedScript, link, may_be_launcher
from smpfix.job.project import Project
from smpfix.job.project_root import PROJECT_MARKERS, is_too_wide, project_root

# What tells a file changed on disk: its modification time (ns) and size; None when absent.
Stamp = Optional[tuple[int, int]]


@dataclass
class _Index:
    """One project's launchers: how they are found, and what each says (by launcher path)."""

    search: LauncherSearch
    links: dict[str, tuple[LinkedScript, ...]] = field(default_factory=dict)
    # The launchers read from disk (not from an editor's buffer), as they were when read.
    stamps: dict[str, Stamp] = field(default_factory=dict)

    def counts(self, path: str) -> bool:
        """Whether ``path`` may configure scripts of this project (with named launchers, only
        those)."""
        if not self.search.named:
            return True
        base = Path(self.search.config_root)
        return any(
            os.path.abspath(found) == path
            for pattern in self.search.named
            for found in base.glob(pattern)
        )


class Launchers:
    """Project root -> its launchers, plus the unsaved text of open launchers."""

    def __init__(self) -> None:
        self._indexes: dict[str, _Index] = {}
        self._buffers: dict[str, str] = {}

    def forget(self) -> None:
        """A configuration changed (``exclude``, ``launchers``): index every project again."""
        self._indexes.clear()

    def project(self, path: str, config: Config) -> Project:
        """The project of the document at ``path``, with the links of its launchers."""
        root = search_root(path)
        index = self._index(root, config)
        return Project((root,)).with_links(
            [found for links in index.links.values() for found in links]
        )

    def stamps(self, path: str) -> dict[str, Stamp]:
        """The launchers of the project of the document at ``path`` that were read from disk,
        with their stamps then (none before the project is indexed)."""
        index = self._indexes.get(search_root(path))
        return dict(index.stamps) if index is not None else {}

    def refresh(self) -> bool:
        """Read again every launcher whose file changed on disk since it was read (unless an
        editor holds its unsaved text); whether what the launchers say may have changed."""
        changed = False
        for path in {path for index in self._indexes.values() for path in index.stamps}:
            if path in self._buffers:
                continue
            now = stamp_of(path)
            if any(index.stamps.get(path, now) != now for index in self._indexes.values()):
                changed = self.update(path) or changed
        return changed

    def update(self, path: str, text: Optional[str] = None) -> bool:
        """``path`` changed: ``text`` is its unsaved text in the editor, None to read it from
        disk (saved, closed, or changed by another program). Returns whether what the
        launchers say may have changed: a launcher of a project not indexed here may change
        what an earlier analysis process told the server."""
        key = os.path.abspath(path)
        if text is None:
            self._buffers.pop(key, None)
        else:
            self._buffers[key] = text
        changed = covered = False
        for root, index in self._indexes.items():
            if not (key + os.sep).startswith(root.rstrip(os.sep) + os.sep) or not index.counts(key):
                continue
            covered = True
            stamp = stamp_of(key) if text is None else None  # before reading: a later write differs
            found = _link(key, text if text is not None else _read(key), root)
            # A file read from disk that launches, or launched, something is watched.
            if text is not None:
                index.stamps.pop(key, None)
            elif found or key in index.stamps:
                index.stamps[key] = stamp
            if found != index.links.get(key, ()):
                changed = True
            if found:
                index.links[key] = found
            else:
                index.links.pop(key, None)
        if not covered:  # the editor sends unsaved text only for documents that may launch
            return text is not None or _read(key) is not None
        return changed

    def _index(self, root: str, config: Config) -> _Index:
        index = self._indexes.get(root)
        if index is None:
            search = LauncherSearch.of(config)
            index = _Index(search)
            for found in project_links(root, search):
                index.links[found.launcher] = (*index.links.get(found.launcher, ()), found)
                index.stamps[found.launcher] = stamp_of(found.launcher)
            for key, text in self._buffers.items():  # open launchers with unsaved changes
                if (key + os.sep).startswith(root.rstrip(os.sep) + os.sep) and index.counts(key):
                    index.stamps.pop(key, None)
                    buffered = _link(key, text, root)
                    if buffered:
                        index.links[key] = buffered
                    else:
                        index.links.pop(key, None)
            self._indexes[root] = index
        return index


def search_root(path: str) -> str:
    """Where the launchers of the document at ``path`` are searched: the nearest folder above
    it with a project marker; without one, its own folder; a file directly in a folder too
    wide to walk (``/tmp``, ``~``, ``/``) is searched alone."""
    path = os.path.abspath(path)
    root, folder = project_root(path), os.path.dirname(path)
    if root in (path, folder) or _marked(root):
        return root
    return path if is_too_wide(folder) else folder


def stamp_of(path: str) -> Stamp:
    """``path``'s modification time and size now (None when it cannot be read)."""
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    return (status.st_mtime_ns, status.st_size)


def _marked(folder: str) -> bool:
    return any(os.path.exists(os.path.join(folder, marker)) for marker in PROJECT_MARKERS)


def _read(path: str) -> Optional[str]:
    raw = source.read_bytes(path)
    if raw is None or not may_be_launcher(raw, path):
        return None
    try:
        return source.decode(path, raw).text
    except source.SourceError:
        return None


def _link(path: str, text: Optional[str], root: str) -> tuple[LinkedScript, ...]:
    """The scripts ``path`` launches; a launcher the linker chokes on launches none."""
    if text is None or not may_be_launcher(text.encode("utf-8", "surrogatepass"), path):
        return ()
    try:
        with recursion_headroom():
            return tuple(link([(path, text)], root))
    except Exception:
        return ()
