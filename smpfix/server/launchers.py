"""The launchers of the open workspace, and the job each says its script runs.

A script's job facts come from the launcher that starts it (an estimator's
``distribution``), which is another file: the server reads every launcher in the workspace
folders when it starts (the files that mention ``smdistributed`` and an estimator, as the
command line finds them among the checked files), keeps the text of each, and links them
again when one is edited, saved, created or deleted. An open launcher's unsaved text counts
over its file on disk.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Optional

from smpfix.base import source
from smpfix.base.nesting import recursion_headroom
from smpfix.engine.discovery import Excluder, discover
from smpfix.job.linking import LinkedScript, link, may_be_launcher
from smpfix.job.project import Project

# A workspace this large is not scanned for launchers (a home folder opened by mistake).
MAX_FILES = 20_000


class Launchers:
    """Launcher path -> the scripts it launches, for the workspace folders."""

    def __init__(self) -> None:
        self._links: dict[str, tuple[LinkedScript, ...]] = {}

    def scan(self, roots: Sequence[str]) -> int:
        """Read every launcher under ``roots``; returns how many files were looked at."""
        self._links.clear()
        seen = 0
        folders = [root for root in roots if os.path.isdir(root)]
        for task in discover(folders, Excluder([], Path(folders[0]))) if folders else ():
            seen += 1
            if seen > MAX_FILES:
                break
            self.update(task.path)
        return seen

    def update(self, path: str, text: Optional[str] = None) -> bool:
        """``path`` changed (``text``: its unsaved text; None: read it from disk, if it still
        exists). Returns whether what the launchers say changed."""
        key = os.path.abspath(path)
        before = self._links.get(key, ())
        if text is None:
            text = _read_launcher(key)
        elif not may_be_launcher(text.encode("utf-8", "surrogatepass")):
            text = None
        found = _link(key, text) if text is not None else ()
        if found:
            self._links[key] = found
        else:
            self._links.pop(key, None)
        return found != before

    def is_launcher(self, path: str) -> bool:
        return os.path.abspath(path) in self._links

    def links(self) -> Iterable[LinkedScript]:
        for found in self._links.values():
            yield from found

    def project(self, roots: Sequence[str]) -> Project:
        return Project(tuple(os.path.abspath(root) for root in roots)).with_links(list(self.links()))


def _read_launcher(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    if not may_be_launcher(raw):
        return None
    try:
        return source.decode(path, raw).text
    except source.SourceError:
        return None


def _link(path: str, text: str) -> tuple[LinkedScript, ...]:
    """The scripts ``path`` launches; a launcher the linker chokes on launches none."""
    try:
        with recursion_headroom():
            return tuple(link([(path, text)]))
    except Exception:
        return ()
