"""From the paths on the command line to the files to check.

Directories are walked without following symbolic links to directories (so a link loop
terminates), skipping hidden and tool folders, the ``exclude`` patterns, and what
``.gitignore`` files ignore. A file named explicitly is always checked unless the user's own
``exclude`` matches it, so that a pre-commit hook, which names files, honours the
configuration.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from smpfix.base.safe_read import CONFIGURATION_LIMIT, read_regular

if TYPE_CHECKING:
    import pathspec

SOURCE_SUFFIXES = (".py", ".ipynb")
DEFAULT_EXCLUDED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "build",
        "dist",
        "__pycache__",
        "node_modules",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".smpfix_cache",
        "site-packages",
    }
)


@dataclass(frozen=True)
class DiscoveredFile:
    """A file to check. ``writable`` is False for a link that leads out of the checked tree."""

    path: str
    explicit: bool
    writable: bool = True
    # Whether the walk found it as a symbolic link (known from the directory listing).
    link: bool = False


def _is_hidden(name: str) -> bool:
    return name.startswith(".") and name not in (".", "..")


def _load_gitignore(folder: Path) -> Optional[pathspec.PathSpec]:
    ignore_file = folder / ".gitignore"
    try:
        raw = read_regular(str(ignore_file), CONFIGURATION_LIMIT)
    except OSError:  # absent, unreadable, or not a small regular file
        return None
    lines = raw.decode("utf-8", errors="replace").splitlines()
    return _gitignore_spec(lines)


def _gitignore_spec(lines: Iterable[str]) -> pathspec.PathSpec:
    """Patterns in ``.gitignore`` syntax, compiled. ``pathspec`` is imported only then: it
    costs about 20 ms, and a tree without ``.gitignore`` or ``exclude`` never needs it."""
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(lines)


def _ancestor_gitignores(folder: Path) -> list[tuple[Path, pathspec.PathSpec]]:
    """The .gitignore files above ``folder`` up to the repository root, outermost first."""
    found: list[tuple[Path, pathspec.PathSpec]] = []
    current = folder.absolute()
    for parent in [current, *current.parents]:
        if parent != current:
            spec = _load_gitignore(parent)
            if spec is not None:
                found.append((parent, spec))
        if (parent / ".git").exists():
            break
    return list(reversed(found))


def _ignored(path: Path, is_dir: bool, specs: Sequence[tuple[Path, pathspec.PathSpec]]) -> bool:
    for base, spec in specs:
        try:
            relative = path.absolute().relative_to(base).as_posix()
        except ValueError:
            continue
        if spec.match_file(relative + ("/" if is_dir else "")):
            return True
    return False


class Excluder:
    """Answers "does the user's ``exclude`` list match this path?" relative to the project root."""

    def __init__(self, patterns: Sequence[str], root: Path) -> None:
        self.root = root.absolute()
        self.spec = _gitignore_spec(patterns) if patterns else None

    def matches(self, path: Path, is_dir: bool = False) -> bool:
        if self.spec is None:
            return False
        absolute = path.absolute()
        try:
            relative = absolute.relative_to(self.root).as_posix()
        except ValueError:
            relative = absolute.as_posix().lstrip("/")
        return self.spec.match_file(relative + ("/" if is_dir else "")) or self.spec.match_file(
            path.name
        )


def _inside(path: Path, root: Path) -> bool:
    """Whether ``path``, links followed, lies under ``root``; False for a link loop (os.path
    never raises on one, where ``Path.resolve`` does)."""
    target, top = os.path.realpath(path), os.path.realpath(root)
    try:
        return os.path.commonpath([target, top]) == top
    except ValueError:  # different drives
        return False


def _special(entry: os.DirEntry[str]) -> bool:
    """A FIFO, socket, device or folder behind a ``.py`` name: reading a FIFO would block the
    run forever. A dangling or looping link is not special: reading it reports why it fails."""
    try:
        if (
            entry.is_file()
        ):  # a regular file (or a link to one): the listing says so, no system call
            return False
        return not stat.S_ISREG(entry.stat(follow_symlinks=True).st_mode)
    except OSError:
        return False


def discover(
    paths: Iterable[str],
    excluder: Excluder,
    respect_gitignore: bool = True,
    suffixes: Sequence[str] = SOURCE_SUFFIXES,
) -> Iterator[DiscoveredFile]:
    """Yield the files to check under ``paths``, each once, in a stable (sorted) order."""
    seen: set[str] = set()
    real_folders: dict[str, str] = {}
    for raw in paths:
        root = Path(raw)
        if root.is_dir():
            for found in _walk(root, excluder, respect_gitignore, suffixes):
                # A link to a file also found under its own name is checked (and written) once.
                key = os.path.normcase(_real_path(found.path, found.link, real_folders))
                if key not in seen:
                    seen.add(key)
                    yield found
        else:
            key = os.path.normcase(os.path.realpath(raw))
            if key in seen or excluder.matches(root):
                continue
            seen.add(key)
            yield DiscoveredFile(path=raw, explicit=True)


def _real_path(path: str, link: bool, real_folders: dict[str, str]) -> str:
    """``os.path.realpath(path)``, resolving each folder once: the files of one folder share
    it, and realpath costs a system call per path component."""
    if link:
        return os.path.realpath(path)
    folder, name = os.path.split(path)
    real = real_folders.get(folder)
    if real is None:
        real = real_folders[folder] = os.path.realpath(folder or os.curdir)
    return os.path.join(real, name)


def _walk(
    root: Path, excluder: Excluder, respect_gitignore: bool, suffixes: Sequence[str]
) -> Iterator[DiscoveredFile]:
    specs = _ancestor_gitignores(root) if respect_gitignore else []
    stack: list[tuple[Path, list[tuple[Path, pathspec.PathSpec]]]] = [(root, specs)]
    while stack:
        folder, inherited = stack.pop()
        local = list(inherited)
        if respect_gitignore:
            spec = _load_gitignore(folder)
            if spec is not None:
                local.append((folder.absolute(), spec))
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError:
            continue
        subfolders: list[Path] = []
        for entry in entries:
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if entry.name in DEFAULT_EXCLUDED_DIRS or _is_hidden(entry.name):
                    continue
                if excluder.matches(path, is_dir=True) or _ignored(path, True, local):
                    continue
                subfolders.append(path)
            elif entry.name.endswith(tuple(suffixes)):
                if excluder.matches(path) or _ignored(path, False, local) or _special(entry):
                    continue
                link = entry.is_symlink()
                yield DiscoveredFile(
                    path=str(path),
                    explicit=False,
                    writable=not link or _inside(path, root),
                    link=link,
                )
        stack.extend((sub, local) for sub in reversed(subfolders))
