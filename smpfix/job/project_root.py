"""Which project a file belongs to: where its launchers and sibling modules are looked for.

pre-commit names only the changed files and an editor checks one buffer, so smpfix finds the
rest of the project from the file itself (``smpfix.engine.launcher_index``).
"""

from __future__ import annotations

import functools
import os

# What marks the top folder of a project (a repository, a package).
PROJECT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")


def project_root(path: str) -> str:
    """The project ``path`` (a file, or a name given with ``--stdin-filename``) belongs to.

    The nearest folder at or above the file's folder that holds ``pyproject.toml``,
    ``setup.cfg``, ``setup.py`` or ``.git``; without one, the current folder when the file is
    inside it, else the file's own folder. The home folder and the filesystem root are never
    a project root (a dotfiles repository in ``~`` must not make smpfix index a whole home).
    """
    return _root_of(os.path.dirname(os.path.abspath(path)), os.getcwd())


@functools.lru_cache(maxsize=1024)
def _root_of(folder: str, cwd: str) -> str:
    too_wide = {os.path.abspath(os.sep), os.path.abspath(os.path.expanduser("~"))}
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
