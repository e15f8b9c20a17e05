"""The other files of the checked project that one file's analysis may look into.

A training script often keeps its model class in ``model.py`` and its DataLoader in
``data.py``, and a launcher next to it configures the job. Rules that follow the model class
or the data pipeline across files resolve the script's own imports here, to files inside
the checked paths only, parsing each file at most once per analysis. Nothing outside the
checked paths is read, and nothing is ever imported or executed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from smpfix.jobfacts import DeclaredJob
from smpfix.linking import LinkedScript

if TYPE_CHECKING:  # the CLI builds a Project before knowing whether LibCST is needed at all
    import libcst as cst

    from smpfix.facts import FileFacts


@dataclass(frozen=True)
class Project:
    """What the whole run knows: the checked roots and what launchers say about each script."""

    roots: tuple[str, ...] = ()
    links: Mapping[str, tuple[LinkedScript, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, paths: tuple[str, ...]) -> Project:
        return cls(tuple(os.path.abspath(p) for p in paths if p != "-"))

    def with_links(self, links: Sequence[LinkedScript]) -> Project:
        grouped: dict[str, list[LinkedScript]] = {}
        for link in links:
            grouped.setdefault(link.script, []).append(link)
        return Project(self.roots, {script: tuple(found) for script, found in grouped.items()})

    def launchers_of(self, path: str) -> tuple[LinkedScript, ...]:
        return self.links.get(os.path.abspath(path), ())

    def contains(self, path: str) -> bool:
        absolute = os.path.abspath(path)
        for root in self.roots:
            if absolute == root or absolute.startswith(root.rstrip(os.sep) + os.sep):
                return True
        return False

    def declared_for(self, path: str) -> tuple[DeclaredJob, ...]:
        """The launcher's job for ``path``; settings on which several launchers disagree are unknown."""
        links = self.launchers_of(path)
        if not links:
            return ()
        first = links[0].job
        if len(links) == 1:
            return (first,)
        disagree = {
            key for link in links[1:] for key in set(first.settings) | set(link.job.settings)
            if first.settings.get(key) != link.job.settings.get(key)
        }
        names = ", ".join(link.job.source for link in links)
        settings = {k: v for k, v in first.settings.items() if k not in disagree}
        return (DeclaredJob(names, settings, all(link.job.complete for link in links), first.unknown | frozenset(disagree)),)

    def hyperparameters_for(self, path: str) -> Mapping[str, Any]:
        links = self.launchers_of(path)
        return links[0].hyperparameters if len(links) == 1 else {}

    def search_dirs(self, importer: str) -> list[str]:
        """Where ``import x`` in ``importer`` may find ``x.py``: its folder, then the roots."""
        folders = [os.path.dirname(os.path.abspath(importer))]
        folders += [root if os.path.isdir(root) else os.path.dirname(root) for root in self.roots]
        seen: list[str] = []
        for folder in folders:
            if folder not in seen:
                seen.append(folder)
        return seen


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

    from smpfix import nesting, source
    from smpfix.facts import collect

    try:
        src = source.read(path)
        if nesting.refusal(src.text) is not None:  # LibCST would crash on it
            return None
        module = cst.parse_module(src.text)
        return LinkedModule(path, src.text, module, collect(module))
    except Exception:  # unreadable, a syntax error, or syntax this LibCST cannot represent
        return None
