"""``--watch``: which files a check depends on, and when one of them changes.

A standard-library polling watcher, so smpfix needs no watcher package: every half second
it looks at the size and modification time (``os.stat``) of the files a check depends on,
and a change (a file edited, created or removed) starts the next check. The set is worked
out again at every look, so a new script is seen too:

- the checked files, as discovery finds them under the checked paths;
- the project's launchers: the Python files, notebooks and shell scripts of each checked
  file's project (``[tool.smpfix] launchers`` when it names them), unless the launcher
  search is off;
- the configuration: every ``pyproject.toml`` and ``smpfix.toml`` at or above the checked
  paths (one that appears counts too), and the file ``--config`` names.

Polling costs a walk of the project and a ``stat`` per file each time: on a project of a
few thousand files, a few milliseconds per look.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from smpfix.engine.discovery import SOURCE_SUFFIXES, Excluder, discover

POLL_SECONDS = 0.5
_CONFIGURATION_NAMES = ("pyproject.toml", "smpfix.toml")
_LAUNCHER_SUFFIXES = (*SOURCE_SUFFIXES, ".sh")

# A file's state: its size and modification time, or None when it does not exist.
State = Optional[tuple[int, int]]


@dataclass(frozen=True)
class WatchedSet:
    """What one check depends on, from the checked paths and the run's configuration."""

    paths: tuple[str, ...]
    exclude: tuple[str, ...]
    root: Path
    respect_gitignore: bool = True
    # Globs naming the launchers (relative to ``root``); empty: the projects are walked.
    launchers: tuple[str, ...] = ()
    search_launchers: bool = True
    config_path: Optional[str] = None

    def files(self) -> set[str]:
        excluder = Excluder(self.exclude, self.root)
        found = {
            os.path.abspath(item.path)
            for item in discover(self.paths, excluder, self.respect_gitignore, _LAUNCHER_SUFFIXES)
        }
        if self.search_launchers and self.launchers:
            for pattern in self.launchers:
                found.update(str(path.resolve()) for path in self.root.glob(pattern))
        elif self.search_launchers:
            from smpfix.job.project_root import project_root

            roots = {project_root(path) for path in self.paths if os.path.exists(path)}
            roots = {root for root in roots if os.path.isdir(root)}
            found.update(
                os.path.abspath(item.path)
                for item in discover(
                    sorted(roots), excluder, self.respect_gitignore, _LAUNCHER_SUFFIXES
                )
            )
        found.update(self._configuration())
        return found

    def _configuration(self) -> Iterable[str]:
        if self.config_path is not None:
            yield os.path.abspath(self.config_path)
        folders: set[Path] = set()
        for path in self.paths:
            start = Path(os.path.abspath(path))
            folders.update([start, *start.parents] if start.is_dir() else start.parents)
        for folder in folders:
            for name in _CONFIGURATION_NAMES:
                yield str(folder / name)


def states(files: Iterable[str]) -> dict[str, State]:
    """Each file's size and modification time (None: it does not exist)."""
    found: dict[str, State] = {}
    for path in files:
        try:
            status = os.stat(path)
        except OSError:
            found[path] = None
            continue
        found[path] = (status.st_size, status.st_mtime_ns)
    return found


def changed(before: Mapping[str, State], after: Mapping[str, State]) -> list[str]:
    """The files created, removed or changed between two looks, sorted."""
    return sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))


def wait_for_change(
    watched: WatchedSet,
    before: Mapping[str, State],
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Look at ``watched`` every ``POLL_SECONDS`` until something differs from ``before``;
    the files that changed. Ctrl-C (``KeyboardInterrupt``) ends the wait."""
    while True:
        sleep(POLL_SECONDS)
        found = changed(before, states(watched.files()))
        if found:
            return found


def shown(paths: Sequence[str], limit: int = 3) -> str:
    """Changed files for a header: relative to this folder, at most ``limit`` named."""
    names = []
    for path in paths[:limit]:
        relative = os.path.relpath(path)
        names.append(path if relative.startswith(os.pardir) else relative)
    more = f" and {len(paths) - limit} more" if len(paths) > limit else ""
    return ", ".join(names) + more
