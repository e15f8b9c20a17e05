"""The prefilter's second question: does a file that never names the library import a project
module that does?

An entry script may reach SMP only through the project's own helpers (``from utils.dist
import init_distributed, wrap_model`` where ``utils/dist.py`` imports
``smdistributed.modelparallel.torch``); the byte prefilter alone would skip it. This reads
the file's imports as text (no parse), resolves each module name to a project file the way
the analysis does (``Project.module_candidates``), and asks whether that file names the
library, through the helpers' own imports up to ``_DEPTH`` levels. Whether the script then
uses anything of the library through those helpers is the analysis's question
(``smpfix.program.project.wrappers``); this only decides what is parsed, and like the byte
test it may let an irrelevant file through but never skips a relevant one.

One ``HelperReach`` serves one run: a module imported by a hundred files is read once, and a
folder's listing is read once, so a name that is no file of the project (``numpy``,
``torch``) is ruled out by a set lookup instead of file-system calls.
"""

from __future__ import annotations

import os
import re
from typing import Optional

from smpfix.engine import prefilter
from smpfix.job.project import Project

# ``import a.b as c, d`` and ``from .a import (b, c)``: the module names and, for ``from``,
# the imported names (which may be submodules: ``from utils import dist``).
_IMPORT = re.compile(
    rb"^[ \t]*(?:import[ \t]+([\w. \t,]+)"
    rb"|from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[\w. \t,]+))",
    re.MULTILINE,
)
_AS = re.compile(r"\s+as\s+\w+")
# Helpers of helpers: a wrapper module importing the project's own ``smp_utils``.
_DEPTH = 3


class HelperReach:
    """Per run: which files reach the library through the project modules they import."""

    def __init__(self, project: Optional[Project]) -> None:
        self.project = project if project is not None else Project()
        self._names: dict[str, frozenset[str]] = {}
        self._modules: dict[str, bool] = {}

    def reaches(self, path: str, raw: bytes) -> bool:
        """Whether the file at ``path`` (``raw``: its bytes) imports a project module that names
        the library, directly or through its own imports."""
        if b"import" not in raw:
            return False
        return self._imports_naming(path, raw, _DEPTH, {os.path.abspath(path)})

    def _imports_naming(self, path: str, raw: bytes, depth: int, seen: set[str]) -> bool:
        for module_name in _imported_names(raw):
            found = self._find(path, module_name)
            if found is None or found in seen:
                continue
            seen.add(found)
            if self._names_library(found, depth - 1, seen):
                return True
        return False

    def _names_library(self, path: str, depth: int, seen: set[str]) -> bool:
        known = self._modules.get(path)
        if known is not None:
            return known
        from smpfix.base import source

        raw = source.read_bytes(path)
        if raw is None:
            return False
        found = prefilter.may_involve_smp(raw) or (
            depth > 0 and self._imports_naming(path, raw, depth, seen)
        )
        # Only a yes is final: a no reached at the depth bound may be a yes from nearer.
        if found or depth == _DEPTH - 1:
            self._modules[path] = found
        return found

    def _find(self, importer: str, module_name: str) -> Optional[str]:
        """The project file of ``module_name`` imported from ``importer``, or None; a name
        whose first part is no file or folder of the folders searched costs no system call."""
        head = module_name.lstrip(".").split(".")[0]
        candidates = self.project.module_candidates(importer, module_name)
        for candidate in candidates:
            folder = _folder_of(candidate, module_name)
            if head and head not in self._listing(folder):
                continue
            # Not only inside the run's roots: a script checked alone sees its project's
            # root only later (``launcher_index``), and Python imports it from its folder.
            if os.path.isfile(candidate):
                return os.path.abspath(candidate)
        return None

    def _listing(self, folder: str) -> frozenset[str]:
        known = self._names.get(folder)
        if known is None:
            try:
                entries = os.listdir(folder)
            except OSError:
                entries = []
            known = self._names[folder] = frozenset(
                name[:-3] if name.endswith(".py") else name for name in entries
            )
        return known


def _folder_of(candidate: str, module_name: str) -> str:
    """The searched folder a candidate file of ``module_name`` lies in."""
    parts = module_name.lstrip(".").count(".") + 1
    folder = os.path.dirname(candidate)
    if candidate.endswith("__init__.py"):
        folder = os.path.dirname(folder)
    for _ in range(parts - 1):
        folder = os.path.dirname(folder)
    return folder


def _imported_names(raw: bytes) -> list[str]:
    """Every module an import statement of ``raw`` may load, longest first for each statement
    (``from utils import dist`` may load ``utils.dist`` or ``utils``)."""
    found: list[str] = []
    for match in _IMPORT.finditer(raw):
        plain, module, names = match.groups()
        if plain is not None:
            for item in _AS.sub("", plain.decode("ascii", "replace")).split(","):
                dotted = item.strip()
                # ``import a.b.c`` loads ``a``, ``a.b`` and ``a.b.c``.
                parts = dotted.split(".")
                found.extend(".".join(parts[:cut]) for cut in range(len(parts), 0, -1) if dotted)
            continue
        base = module.decode("ascii", "replace")
        listed = _AS.sub("", names.decode("ascii", "replace").strip("()"))
        for item in listed.split(","):
            name = item.strip()
            if name and name != "*":
                found.append(f"{base}{name}" if base.strip(".") == "" else f"{base}.{name}")
        if base.strip("."):
            lead = len(base) - len(base.lstrip("."))
            parts = base[lead:].split(".")
            found.extend("." * lead + ".".join(parts[:cut]) for cut in range(len(parts), 0, -1))
    return found
