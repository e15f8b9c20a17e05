"""The other files of the checked project that one file's analysis may look into.

A training script often keeps its model class in ``model.py`` and its DataLoader in
``data.py``, and a launcher next to it configures the job. Rules that follow the model class
or the data pipeline across files resolve the script's own imports here, to files inside
the project's roots only (the checked paths, and the project root of a file checked without
the rest of its project: ``smpfix.engine.launcher_index``). Nothing outside those roots is
read, and nothing is ever imported or executed.

Several scripts of a project import the same helpers (``model.py``, ``data_pipeline.py``),
often a thousand lines each: parsing them again for every script cost more than the scripts
themselves. A ``ModuleStore`` keeps the parsed helpers (tree, facts and node index) for the
life of the process (one run, one worker, or the language server), bounded in size, and
hands one out again only while the file's text is exactly the text it was parsed from; the
file is read every time, so an edited helper is parsed again, and every analysis still
records the files it consulted (the result cache's dependencies) as before.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import TYPE_CHECKING, Optional

from smpfix.job.project import Project
from smpfix.program.project.parsed_file import ParsedFile, parse_file

if TYPE_CHECKING:
    from smpfix.program.facts import FileFacts


# Characters of source the shared store keeps parsed. A run parses its launchers first (to link
# them to their scripts) and checks them later: a store smaller than the project parses them,
# and the helpers pushed out meanwhile, a second time (6% of all parsing on 2 million
# characters of real SMP code with 1 million here). With this budget that project is parsed
# once, at a peak of 185 MB for the whole process against 154 MB; a tree is about 45 bytes per
# character at most (with its facts and index), so this bounds the store near 135 MB.
_STORE_BUDGET = 3_000_000


class ModuleStore:
    """Parsed project files, reused while their text is unchanged (least recently used first
    out)."""

    def __init__(self, budget: int = _STORE_BUDGET) -> None:
        self.budget = budget
        self._entries: OrderedDict[str, tuple[str, Optional[ParsedFile]]] = OrderedDict()
        self._size = 0

    def load(self, path: str) -> Optional[ParsedFile]:
        """``path`` parsed, with its facts; None when it cannot be read or parsed."""
        from smpfix.base import source

        try:
            text = source.read(path).text
        except Exception:  # unreadable or undecodable: the file's own check reports why
            return None
        return self.remember(path, text)

    def remember(self, path: str, text: str) -> Optional[ParsedFile]:
        """``text``, the code of the file at ``path``, parsed with its facts and kept (a
        launcher read for linking, which the run checks next); None when it does not parse."""
        key = os.path.abspath(path)
        entry = self._entries.get(key)
        if entry is not None and entry[0] == text:
            self._entries.move_to_end(key)
            return entry[1].renamed(path) if entry[1] is not None else None
        linked = parse_file(path, text)
        self._keep(key, text, linked)
        return linked

    def parsed(self, path: str, text: str) -> Optional[ParsedFile]:
        """The stored parse of exactly ``text`` at ``path``, if there is one (a helper that is
        also checked as a file of its own)."""
        entry = self._entries.get(os.path.abspath(path))
        if entry is None or entry[0] != text or entry[1] is None:
            return None
        return entry[1].renamed(path)

    def offer(self, linked: ParsedFile, launched: bool = False) -> None:
        """Keep a file parsed for its own check when another file of the run may read it: a
        module that never calls ``smp.init()`` (a helper a script imports; a script
        initialises the library itself), or a script a launcher starts (``launched``: the
        launcher's check looks into it)."""
        if not linked.path.endswith(".py") or (linked.facts.smp_init_calls and not launched):
            return
        self._keep(os.path.abspath(linked.path), linked.text, linked)

    def _keep(self, key: str, text: str, linked: Optional[ParsedFile]) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._size -= len(old[0])
        if len(text) > self.budget:
            return
        self._entries[key] = (text, linked)
        self._size += len(text)
        while self._size > self.budget:
            _, (dropped, _) = self._entries.popitem(last=False)
            self._size -= len(dropped)


# The store every analysis in this process shares (see the module docstring).
SHARED_STORE = ModuleStore()


class LocalModules:
    """Resolves a file's imports of sibling modules to parsed project files.

    Created per analysis: it records what the analysis consulted, and holds what it loaded
    (so two rules asking for ``model.py`` read it once); the parsing itself is shared
    between analyses through ``store``.
    """

    def __init__(
        self, project: Project, importer: str, store: Optional[ModuleStore] = None
    ) -> None:
        self.project = project
        self.importer = importer
        self.store = store if store is not None else SHARED_STORE
        self._loaded: dict[str, Optional[ParsedFile]] = {}
        self._consulted: dict[str, None] = {}
        # The candidate files of a module name -> the one found; shared like ``_loaded``, and
        # the same by (importer, module name), which every import of every file asks again.
        self._found: dict[tuple[str, ...], Optional[str]] = {}
        self._by_name: dict[tuple[str, str], Optional[str]] = {}
        self._imports: dict[tuple[str, int], list[ParsedFile]] = {}

    def for_importer(self, importer: str) -> LocalModules:
        """The same parsed files, resolving imports from ``importer`` instead (a launcher looking
        into the script it starts): what it reads still counts as this analysis's dependencies."""
        other = LocalModules(self.project, importer, self.store)
        other._loaded = self._loaded
        other._consulted = self._consulted
        other._found = self._found
        other._by_name = self._by_name
        other._imports = self._imports
        return other

    def find_file(self, module_name: str) -> Optional[str]:
        """The project file for a module name (``model``, ``pkg.data``, ``.data``)."""
        key = (self.importer, module_name)
        if key in self._by_name:
            return self._by_name[key]
        candidates = tuple(self.project.module_candidates(self.importer, module_name))
        if candidates in self._found:
            found = self._found[candidates]
        else:
            found = self._found[candidates] = self._search(candidates)
        self._by_name[key] = found
        return found

    def _search(self, candidates: tuple[str, ...]) -> Optional[str]:
        for candidate in candidates:
            self._consulted[candidate] = None
            if self.project.holds_file(candidate):
                return candidate
        return None

    def load(self, path: str) -> Optional[ParsedFile]:
        self._consulted[path] = None
        if path not in self._loaded:
            self._loaded[path] = self.store.load(path)
        linked = self._loaded[path]
        if linked is not None:
            # Searches of its nodes (``iter_nodes``) then replay its index.
            from smpfix.base.walker import also_indexed

            also_indexed(linked.index)
        return linked

    def read_json(self, path: str) -> Optional[object]:
        """The JSON data file at ``path`` inside the project (a model's ``config.json`` that a
        script reads), or None when it is absent, outside, unreadable or not JSON. It counts as
        a dependency of the analysis, as a module does."""
        import json

        from smpfix.base import source

        self._consulted[path] = None
        if not os.path.isfile(path) or not self.project.contains(path):
            return None
        raw = source.read_bytes(path)
        try:
            return json.loads(raw.decode("utf-8-sig")) if raw is not None else None
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None

    def consulted(self) -> tuple[str, ...]:
        """Every file this analysis looked for or read, found or not: the result cache reuses
        the file's result only while each of them is unchanged (or still absent)."""
        return tuple(self._consulted)

    def definition(self, qualified: str) -> Optional[tuple[ParsedFile, str]]:
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

    def script_with_imports(self, path: str, depth: int = 2) -> Optional[tuple[ParsedFile, ...]]:
        """The script at ``path`` (first) and the project modules it imports, ``depth`` levels
        deep, resolved from the script's own folder; None when it is outside the project or
        does not parse. What it reads counts as this analysis's dependencies."""
        if not self.project.contains(path):
            return None
        resolver = self.for_importer(path)
        linked = resolver.load(path)
        if linked is None:
            return None
        return (linked, *resolver.imported_closure(linked, depth))

    def imported_closure(self, file: ParsedFile, depth: int = 2) -> list[ParsedFile]:
        """The project modules ``path`` imports, and theirs, up to ``depth`` levels (``path``
        itself excluded): the code a script runs beside its own."""
        path, facts = file.path, file.facts
        found: dict[str, Optional[ParsedFile]] = {os.path.abspath(path): None}
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

    def launched_importers(self, path: str, depth: int = 3) -> list[ParsedFile]:
        """The scripts a launcher starts that import ``path``, directly or through the
        project's modules ``depth`` levels deep: the helper module runs in their processes.
        Only scripts in ``path``'s folder or a folder above it are read (Python finds what a
        script imports in its own folder and below), and no folder is listed: the launched
        scripts are known. What is read counts as a dependency of this analysis."""
        target = os.path.abspath(path)
        folder = os.path.dirname(target)
        found: list[ParsedFile] = []
        for script in sorted(self.project.links):
            home = os.path.dirname(script)
            if script == target or not (folder == home or folder.startswith(home + os.sep)):
                continue
            closure = self.script_with_imports(script, depth)
            if closure and any(os.path.abspath(m.path) == target for m in closure[1:]):
                found.append(closure[0])
        return found

    def sibling_importers(self, path: str, limit: int = 64) -> list[ParsedFile]:
        """The project's files in ``path``'s folder that import it: a wrapper module is judged
        with the scripts that use it. Only files whose text names the module are parsed, and at
        most ``limit`` of the folder's files are looked at; each one counts as a dependency of
        this analysis."""
        from smpfix.base.safe_read import SOURCE_LIMIT, read_regular

        folder = os.path.dirname(os.path.abspath(path))
        stem = os.path.splitext(os.path.basename(path))[0].encode()
        try:
            names = sorted(name for name in os.listdir(folder) if name.endswith(".py"))
        except OSError:
            return []
        found: list[ParsedFile] = []
        for name in names[:limit]:
            candidate = os.path.join(folder, name)
            if candidate == os.path.abspath(path) or not self.project.contains(candidate):
                continue
            self._consulted[candidate] = None
            try:
                if stem not in read_regular(candidate, SOURCE_LIMIT):
                    continue
            except OSError:
                continue
            linked = self.load(candidate)
            if linked is not None and any(
                os.path.abspath(module.path) == os.path.abspath(path)
                for module in self.for_importer(candidate).imported_modules(linked.facts)
            ):
                found.append(linked)
        return found

    def imported_modules(self, facts: FileFacts) -> list[ParsedFile]:
        """Every project file this file imports (``import data``, ``from model import GPT``)."""
        key = (self.importer, id(facts))
        if key not in self._imports:
            self._imports[key] = self._imported_modules(facts)
        return self._imports[key]

    def _imported_modules(self, facts: FileFacts) -> list[ParsedFile]:
        found: dict[str, ParsedFile] = {}
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
