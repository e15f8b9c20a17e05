"""Which project a file belongs to: where its launchers and sibling modules are looked for.

pre-commit names only the changed files and an editor checks one buffer, so smpfix finds the
rest of the project from the file itself (``smpfix.engine.launcher_index``), by walking the
project root. A root that is too wide to walk (``is_too_wide``: the filesystem root, the
home folder, a temporary-files root) is never a project root, however a file got there.
"""

from __future__ import annotations

import functools
import os
import tempfile

# What marks the top folder of a project (a repository, a package).
PROJECT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")
# Temporary-files roots besides the platform's own (``tempfile.gettempdir()``, ``$TMPDIR``).
_TEMPORARY_ROOTS = ("/tmp", "/var/tmp", "/dev/shm")


def project_root(path: str) -> str:
    """The project ``path`` (a file, or a name given with ``--stdin-filename``) belongs to.

    The nearest folder at or above the file's folder that holds ``pyproject.toml``,
    ``setup.cfg``, ``setup.py`` or ``.git``; without one, the current folder when the file is
    inside it, else the file's own folder. A folder ``is_too_wide`` is never a project root
    (a dotfiles repository in ``~`` must not make smpfix index a whole home, nor a scratch
    file in ``/tmp`` all of ``/tmp``): a file directly in one is a project by itself, and its
    root is the file's own path, so a search of the root finds that file alone.
    """
    path = os.path.abspath(path)
    root = _root_of(os.path.dirname(path), os.getcwd())
    return path if root in _too_wide() else root


def project_folder(root: str, path: str) -> str:
    """The folder of ``path``'s project ``root``: the root, or for a file that is a project by
    itself (``project_root`` gave its own path), the file's folder."""
    path = os.path.abspath(path)
    return os.path.dirname(path) if root == path else root


def is_too_wide(folder: str) -> bool:
    """Whether ``folder`` is the filesystem root, the home folder or a temporary-files root:
    never a project root, never walked to find a project's files."""
    return os.path.abspath(folder) in _too_wide()


@functools.lru_cache(maxsize=1)
def _too_wide() -> frozenset[str]:
    folders = {os.sep, os.path.expanduser("~"), tempfile.gettempdir(), *_TEMPORARY_ROOTS}
    if os.environ.get("TMPDIR"):
        folders.add(os.environ["TMPDIR"])
    return frozenset(
        form for folder in folders for form in (os.path.abspath(folder), os.path.realpath(folder))
    )


@functools.lru_cache(maxsize=1024)
def _root_of(folder: str, cwd: str) -> str:
    too_wide = _too_wide()
    current = folder
    while current not in too_wide:
        if any(os.path.exists(os.path.join(current, marker)) for marker in PROJECT_MARKERS):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    if cwd not in too_wide and (folder == cwd or folder.startswith(cwd.rstrip(os.sep) + os.sep)):
        return cwd
    return folder
