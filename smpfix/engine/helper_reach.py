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
# Matched from the start of a line that holds the word ``import`` (found first by a plain
# search, far cheaper than trying the pattern at every line of a long module).
_IMPORT = re.compile(
    rb"[ \t]*(?:import[ \t]+([\w. \t,]+)"
    rb"|from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[\w. \t,]+))"
)
_AS = re.compile(r"\s+as\s+\w+")
# The script's imports, and theirs: ``utils/__init__.py`` re-exporting ``.dist``, or a wrapper
# module importing the project's own ``smp_utils``. A third level cost a library tree without
# the library five times the byte prefilter (``benchmarks/run.py``), for chains no real
# project showed.
_DEPTH = 2


class HelperReach:
    """Per run: which files reach the library through the project modules they import."""

    def __init__(self, project: Optional[Project]) -> None:
        self.project = project if project is not None else Project()
        self._names: dict[str, frozenset[str]] = {}
        # A module's answer, and the depth of imports it was worked out to.
        self._modules: dict[str, tuple[bool, int]] = {}
        self._found: dict[tuple[str, str], Optional[str]] = {}
        # The modules a file imports, and whether its own bytes name the library, for the
        # files already read (the run's files: ``index``), so none is read twice.
        self._imports: dict[str, list[str]] = {}
        self._named: dict[str, bool] = {}

    def index(self, path: str, raw: bytes, named: bool) -> None:
        """Record a file of the run as the prefilter read it: ``named`` when its bytes name
        the library. Call it for every file before asking ``reaches`` of any."""
        absolute = os.path.abspath(path)
        self._named[absolute] = named
        if not named and path.endswith(".py"):
            self._imports[absolute] = _imported_names(raw) if b"import" in raw else []

    def reaches(self, path: str, raw: Optional[bytes] = None) -> bool:
        """Whether the file at ``path`` imports a project module that names the library,
        directly or through its own imports; ``raw``: its bytes, unless ``index`` had them."""
        importer = os.path.abspath(path)
        names = self._imports.get(importer)
        if names is None:
            if raw is None or b"import" not in raw:
                return False
            names = _imported_names(raw)
        return self._imports_naming(importer, names, _DEPTH, {importer})[0]

    def _imports_naming(
        self, importer: str, names: list[str], depth: int, seen: set[str]
    ) -> tuple[bool, bool]:
        """Whether one of the modules ``names`` names the library, and whether the answer is
        final (no module was passed over because the search is already inside it)."""
        final = True
        folder = os.path.dirname(importer)
        for module_name in names:
            found = self._find(importer, folder, module_name)
            if found is None:
                continue
            if found in seen:
                final = False
                continue
            seen.add(found)
            named, complete = self._names_library(found, depth - 1, seen)
            if named:
                return True, True
            final = final and complete
        return False, final

    def _names_library(self, path: str, depth: int, seen: set[str]) -> tuple[bool, bool]:
        known = self._modules.get(path)
        if known is not None and (known[0] or known[1] >= depth):
            return known[0], True
        found, final = self._named.get(path), True
        names = self._imports.get(path)
        if found is None or (not found and depth > 0 and names is None):
            from smpfix.base import source

            raw = source.read_bytes(path)
            if raw is None:
                return False, True
            found = self._named[path] = prefilter.may_involve_smp(raw)
            names = self._imports[path] = (
                _imported_names(raw) if not found and b"import" in raw else []
            )
        if not found and depth > 0 and names:
            found, final = self._imports_naming(path, names, depth, seen)
        if final:
            self._modules[path] = (found, depth)
        return found, final

    def _find(self, importer: str, folder: str, module_name: str) -> Optional[str]:
        """The project file of ``module_name`` imported from ``importer`` (in ``folder``), or
        None; a name whose first part is no file or folder of the folders searched costs no
        system call."""
        key = (folder, module_name)
        if key in self._found:
            return self._found[key]
        parts = module_name.lstrip(".").split(".")
        found = None
        if parts[0]:
            relative = os.path.join(*parts)
            for searched in self.project.module_folders(importer, module_name):
                if parts[0] not in self._listing(searched):
                    continue
                # Not only inside the run's roots: a script checked alone sees its project's
                # root only later (``launcher_index``), and Python imports it from its folder.
                for candidate in (
                    os.path.join(searched, relative + ".py"),
                    os.path.join(searched, relative, "__init__.py"),
                ):
                    if os.path.isfile(candidate):
                        found = candidate
                        break
                if found is not None:
                    break
        self._found[key] = found
        return found

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


def _imported_names(raw: bytes) -> list[str]:
    """Every module an import statement of ``raw`` may load, longest first for each statement
    (``from utils import dist`` may load ``utils.dist`` or ``utils``)."""
    found: list[str] = []
    for match in _statements(raw):
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


def _statements(raw: bytes) -> list[re.Match[bytes]]:
    """The import statements of ``raw`` that start a line."""
    found = []
    line = -1
    position = raw.find(b"import")
    while position >= 0:
        start = raw.rfind(b"\n", 0, position) + 1
        if start != line:
            line = start
            match = _IMPORT.match(raw, start)
            if match is not None:
                found.append(match)
        position = raw.find(b"import", position + 6)
    return found
