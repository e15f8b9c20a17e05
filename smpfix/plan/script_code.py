"""The code a configuration runs, for the plan: the launched script and the project modules
it imports, parsed, with the words that say where something was found (``train.py:746``)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Optional

import libcst as cst

from smpfix.base.parents import ParentIndex
from smpfix.base.positions import Positions
from smpfix.plan.script_flow import branches
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import ParsedFile


class ScriptCode:
    """``modules[0]`` is the script itself, ``name`` how messages show it; positions are
    computed only for what is quoted."""

    def __init__(
        self, name: str, modules: Sequence[ParsedFile], project: Optional[LocalModules] = None
    ) -> None:
        self.name = name
        self.modules = tuple(modules)
        self.project = project
        self._positions: dict[str, Positions] = {}

    def read_json(self, written: str) -> Optional[object]:
        """The JSON file a script opens by the path ``written`` (``bert_config.json``): relative
        to the script's folder, where the job runs it; None when it cannot be read."""
        if self.project is None or self.script is None or not written:
            return None
        folder = os.path.dirname(os.path.abspath(self.script.path))
        return self.project.read_json(os.path.normpath(os.path.join(folder, written)))

    @property
    def script(self) -> Optional[ParsedFile]:
        return self.modules[0] if self.modules else None

    def calls(self) -> Iterator[tuple[ParsedFile, cst.Call]]:
        """Every call, file by file, in source order."""
        for linked in self.modules:
            for call in linked.facts.call_order:
                yield linked, call

    def where(self, linked: ParsedFile, node: cst.CSTNode) -> str:
        positions = self._positions.get(linked.path)
        if positions is None:
            positions = self._positions[linked.path] = Positions(
                linked.module, linked.text, linked.index
            )
        try:
            line = positions.position(positions.span(node)[0]).line
        except KeyError:
            return os.path.basename(linked.path)
        return f"{os.path.basename(linked.path)}:{line}"

    def parents(self, linked: ParsedFile) -> ParentIndex:
        return linked.parents

    def branches(
        self, linked: ParsedFile, node: cst.CSTNode
    ) -> Iterator[tuple[cst.BaseExpression, bool]]:
        """The ``if`` tests around ``node``, innermost first, each with the value it must have
        for ``node`` to run (True in the body, False in the ``else`` or an ``elif``)."""
        return branches(self.parents(linked), node)


def load_script(
    modules: LocalModules, path: str, shown: str, depth: int = 2
) -> Optional[ScriptCode]:
    """The script at ``path`` with the project modules it imports (``depth`` levels), when it
    is inside the checked paths and parses; None otherwise. What it reads is recorded by
    ``modules`` as a dependency of the analysis (the result cache checks it)."""
    found = modules.script_with_imports(os.path.abspath(path), depth)
    return ScriptCode(shown, found, modules) if found is not None else None
