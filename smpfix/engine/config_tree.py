"""Which configuration each checked file takes, and what it checks that file with.

As in Ruff, a file takes the closest configuration file at or above it
(``smpfix.engine.config.in_folder`` says which file of a folder counts), and only that one:
settings are not merged across folders (``extend`` says so explicitly). A folder's answer is
its own file, else its parent's, so each folder is looked up once and each file read once,
in the main process: a run over thousands of files reads a few configuration files, and the
workers get the settings ready (``RunOptions.per_file``).

What a file is checked with (``FileOptions``) is its configuration's rule selection with the
command line's (or the editor's) on top, its ``per-file-ignores``, and its declared jobs: the
command line's ``--job``, the overrides whose ``paths`` match it, ``[tool.smpfix.job]``.
The settings that concern the whole run (``fail-on``, ``show-hints``, ``respect-gitignore``,
``launchers``, the cache folder) come from the run's configuration: the one ``--config``
names, else the closest to the checked paths.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from smpfix.engine.config import Config, ConfigError, in_folder, load
from smpfix.engine.discovery import Excluder
from smpfix.engine.selection import enabled
from smpfix.job.jobfacts import DeclaredJob, Value


@dataclass(frozen=True)
class Overlay:
    """The command line's settings over each file's configuration (in the server, the
    editor's): ``select`` replaces the configured one, the rest add to it, ``job`` beats it."""

    select: Optional[tuple[str, ...]] = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    job: Mapping[str, Value] = field(default_factory=dict)
    job_source: str = "command line --job"


@dataclass(frozen=True)
class FileOptions:
    """What one file is checked with: the enabled rules before ``per-file-ignores``, the
    patterns of ``per-file-ignores`` and the folder they are relative to, the declared jobs
    (highest precedence first)."""

    select: frozenset[str]
    declared_jobs: tuple[DeclaredJob, ...]
    per_file_ignores: Mapping[str, tuple[str, ...]]
    root: Path


def file_options(
    path: Optional[str], config: Config, overlay: Overlay, rule_names: Mapping[str, str]
) -> FileOptions:
    """``path``'s options under ``config`` (None: no override applies); raises
    ``SelectionError`` for an unknown selector."""
    codes = enabled(
        rule_names,
        overlay.select if overlay.select is not None else config.select,
        [*config.extend_select, *overlay.extend_select],
        [*config.ignore, *overlay.ignore],
    )
    declared = [DeclaredJob.stated(overlay.job_source, overlay.job)] if overlay.job else []
    declared.extend(config.declared_jobs(path))
    return FileOptions(
        codes, tuple(declared), config.per_file_ignores, config.base_of("per-file-ignores")
    )


class ConfigTree:
    """The configuration of every folder, looked up once each; with ``explicit`` (``--config``)
    that one file for every folder, as in Ruff.

    ``recheck`` (the server, which lives long): a configuration file changed on disk, or one
    it extends, is read again when next asked for."""

    def __init__(self, explicit: Optional[Config] = None, recheck: bool = False) -> None:
        self._explicit = explicit
        self._recheck = recheck
        self._files: dict[str, Optional[Path]] = {}
        self._loaded: dict[Path, tuple[tuple[Optional[int], ...], Config]] = {}
        # A folder as the files of a run name it -> absolute (the files of a folder share it).
        self._absolute: dict[str, str] = {}

    def forget(self) -> None:
        """A configuration file was created, changed or deleted: look again."""
        self._files.clear()
        self._loaded.clear()
        self._absolute.clear()

    def file_of(self, folder: str) -> Optional[Path]:
        """The configuration file that applies in ``folder`` (an absolute path)."""
        climbed: list[str] = []
        current = folder
        while current not in self._files:
            climbed.append(current)
            found = in_folder(Path(current))
            if found is not None:
                self._files[current] = found
                break
            parent = os.path.dirname(current)
            if parent == current:
                self._files[current] = None
                break
            current = parent
        answer = self._files[current]
        for seen in climbed:
            self._files[seen] = answer
        return answer

    def for_path(self, path: str) -> Config:
        """The configuration of the file ``path`` (``-``: standard input, in the current
        folder); raises ``ConfigError`` for a broken one."""
        folder = os.path.dirname(path) if path != "-" else ""
        absolute = self._absolute.get(folder)
        if absolute is None:
            absolute = self._absolute[folder] = os.path.abspath(folder or os.curdir)
        return self.for_folder(absolute)

    def for_folder(self, folder: str) -> Config:
        """The configuration of the files in ``folder`` (an absolute path)."""
        if self._explicit is not None:
            return self._explicit
        found = self.file_of(folder)
        return self.load(found) if found is not None else Config()

    def load(self, found: Path) -> Config:
        cached = self._loaded.get(found)
        if cached is not None and (
            not self._recheck or cached[0] == _stamps((found, *cached[1].extends))
        ):
            return cached[1]
        config = load(found)
        self._loaded[found] = (_stamps((found, *config.extends)), config)
        return config


def _stamps(paths: Sequence[Path]) -> tuple[Optional[int], ...]:
    stamps: list[Optional[int]] = []
    for path in paths:
        try:
            stamps.append(path.stat().st_mtime_ns)
        except OSError:
            stamps.append(None)
    return tuple(stamps)


class TreeExcluder(Excluder):
    """``exclude`` as Ruff applies it in a tree of configurations: a path is excluded by the
    patterns of the configuration of its folder (relative to the file that wrote them), and by
    the command line's (relative to the run's root)."""

    def __init__(self, tree: ConfigTree, extra: Sequence[str], root: Path) -> None:
        super().__init__(extra, root)
        self._tree = tree
        self._by_config: dict[Optional[Path], tuple[Excluder, ...]] = {}
        # By folder as the walk names it: asked for every entry of every folder.
        self._by_folder: dict[str, tuple[Excluder, ...]] = {}

    def matches(self, path: Path, is_dir: bool = False) -> bool:
        if super().matches(path, is_dir):
            return True
        folder = os.path.dirname(path)
        excluders = self._by_folder.get(folder)
        if excluders is None:
            excluders = self._by_folder[folder] = self._of_folder(folder)
        return any(excluder.matches(path, is_dir) for excluder in excluders)

    def _of_folder(self, folder: str) -> tuple[Excluder, ...]:
        try:
            config = self._tree.for_folder(os.path.abspath(folder))
        except ConfigError:
            return ()  # reported when the file's settings are resolved
        excluders = self._by_config.get(config.path)
        if excluders is None:
            excluders = self._by_config[config.path] = tuple(
                Excluder(patterns, base) for patterns, base in config.exclude_groups() if patterns
            )
        return excluders
