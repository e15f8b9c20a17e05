"""The other files of the checked project that one file's analysis may look into.

A training script often keeps its model class in ``model.py`` and its DataLoader in
``data.py``, and a launcher next to it configures the job. Rules that follow the model class
or the data pipeline across files resolve the script's own imports here, to files inside
the project's roots only (the checked paths, and the project root of a file checked without
the rest of its project: ``smpfix.engine.launcher_index``), parsing each file at most once
per analysis. Nothing outside those roots is read, and nothing is ever imported or executed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from smpfix.job.project import Project

if TYPE_CHECKING:
    import libcst as cst

    from smpfix.program.facts import FileFacts


@dataclass(frozen=True)
class LinkedModule:
    """Another file of the project, parsed, with its facts."""

    path: str
    text: str
    module: cst.Module
    facts: FileFacts


class LocalModules:
    """Resolves a file's imports of sibling modules to parsed project files.

    Holds the files it parsed for the duration of one file's analysis (so two rules asking
    for ``model.py`` parse it once); it is created per analysis, never shared between runs.
    """

    def __init__(self, project: Project, importer: str) -> None:
        self.project = project
        self.importer = importer
        self._loaded: dict[str, Optional[LinkedModule]] = {}
        self._consulted: dict[str, None] = {}

    def for_importer(self, importer: str) -> LocalModules:
        """The same parsed files, resolving imports from ``importer`` instead (a launcher looking
        into the script it starts): what it reads still counts as this analysis's dependencies."""
        other = LocalModules(self.project, importer)
        other._loaded = self._loaded
        other._consulted = self._consulted
        return other

    def find_file(self, module_name: str) -> Optional[str]:
        """The project file for a module name (``model``, ``pkg.data``, ``.data``)."""
        level = len(module_name) - len(module_name.lstrip("."))
        dotted = module_name.lstrip(".")
        if level:
            base = os.path.dirname(os.path.abspath(self.importer))
            for _ in range(level - 1):
                base = os.path.dirname(base)
            folders = [base]
        else:
            folders = self.project.search_dirs(self.importer)
        relative = dotted.replace(".", os.sep)
        for folder in folders:
            for candidate in (os.path.join(folder, relative + ".py"), os.path.join(folder, relative, "__init__.py")):
                self._consulted[candidate] = None
                if os.path.isfile(candidate) and self.project.contains(candidate):
                    return candidate
        return None

    def load(self, path: str) -> Optional[LinkedModule]:
        self._consulted[path] = None
        if path not in self._loaded:
            self._loaded[path] = _parse(path)
        return self._loaded[path]

    def consulted(self) -> tuple[str, ...]:
        """Every file this analysis looked for or read, found or not: the result cache reuses
        the file's result only while each of them is unchanged (or still absent)."""
        return tuple(self._consulted)

    def definition(self, qualified: str) -> Optional[tuple[LinkedModule, str]]:
        """For ``model.GPT`` (a name the file imported): the module defining it and ``GPT``."""
        parts = qualified.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module_name, rest = ".".join(parts[:cut]), parts[cut:]
            if not module_name.strip("."):
                continue
            path = self.find_file(module_name)
            if path is not None and len(rest) == 1:
                linked = self.load(path)
                if linked is not None:
                    return linked, rest[0]
        return None

    def imported_closure(self, path: str, facts: FileFacts, depth: int = 2) -> list[LinkedModule]:
        """The project modules ``path`` imports, and theirs, up to ``depth`` levels (``path``
        itself excluded): the code a script runs beside its own."""
        found: dict[str, Optional[LinkedModule]] = {os.path.abspath(path): None}
        frontier = [(path, facts)]
        for _ in range(depth):
            following = []
            for importer, importer_facts in frontier:
                for linked in self.for_importer(importer).imported_modules(importer_facts):
                    key = os.path.abspath(linked.path)
                    if key not in found:
                        found[key] = linked
                        following.append((linked.path, linked.facts))
            frontier = following
        return [linked for linked in found.values() if linked is not None]

    def imported_modules(self, facts: FileFacts) -> list[LinkedModule]:
        """Every project file this file imports (``import data``, ``from model import GPT``)."""
        found: dict[str, LinkedModule] = {}
        for qualified in facts.imports.bindings.values():
            dots = len(qualified) - len(qualified.lstrip("."))
            parts = qualified[dots:].split(".")
            for cut in range(len(parts), 0, -1):
                path = self.find_file("." * dots + ".".join(parts[:cut]))
                if path is None:
                    continue
                if os.path.abspath(path) != os.path.abspath(self.importer):
                    linked = self.load(path)
                    if linked is not None:
                        found.setdefault(path, linked)
                break
        return list(found.values())


def _parse(path: str) -> Optional[LinkedModule]:
    import libcst as cst

    from smpfix.base import nesting, source
    from smpfix.program.facts import collect

    try:
        src = source.read(path)
        if nesting.refusal(src.text) is not None:  # LibCST would crash on it
            return None
        module = cst.parse_module(src.text)
        return LinkedModule(path, src.text, module, collect(module))
    except Exception:  # unreadable, a syntax error, or syntax this LibCST cannot represent
        return None
