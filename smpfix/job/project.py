"""The checked project as one run sees it: its roots, and what launchers say about each script.

A launcher next to a training script configures its job; the run links them once
(``smpfix.job.linking``) and every file's analysis asks this for its script's declared job,
its hyperparameters, and where its sibling modules may be found
(``smpfix.program.project.local_modules`` reads them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from smpfix.job.jobfacts import DeclaredJob, Role, Setting
from smpfix.job.linking import LinkedScript

# What a launcher's job says of its container (``smpfix.job.jobfacts._smp_version``), and the
# keys among them that name a release.
_CONTAINER_KEYS = ("framework", "framework_version", "smp_version")
_RELEASE_KEYS = ("framework_version", "smp_version")


@dataclass(frozen=True)
class Project:
    """What the whole run knows: the checked roots and what launchers say about each script."""

    roots: tuple[str, ...] = ()
    links: Mapping[str, tuple[LinkedScript, ...]] = field(default_factory=dict)
    # ``search_dirs`` by importer: asked for every import of every analysis, and each answer
    # costs a system call per root.
    _search_dirs: dict[str, tuple[str, ...]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    # ``module_candidates`` by (importer, module) and ``holds_file`` by path: every analysis
    # resolves the imports of the helpers it follows, so one run asks the same again and again
    # (a run sees one state of the disk; the language server makes a project per check).
    _candidates: dict[tuple[str, str], tuple[str, ...]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    _files: dict[str, bool] = field(default_factory=dict, init=False, compare=False, repr=False)
    # The files and folders of each folder ``holds_file`` looked in (None: it could not be
    # listed). An import is looked for in every search folder, as ``x.py`` and ``x/__init__.py``:
    # thousands of paths per run, in a few dozen folders that exist, so the run lists each folder
    # once instead of asking the file system about each path.
    _listings: dict[str, Optional[_Listing]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    @classmethod
    def of(cls, paths: tuple[str, ...]) -> Project:
        return cls(tuple(os.path.abspath(p) for p in paths if p != "-"))

    def with_links(self, links: Sequence[LinkedScript]) -> Project:
        """The project with these launchers; each script's in launcher order, whichever way
        they were found.

        A shell script's launch reached through a chain (a notebook runs the shell script)
        counts once, as the chain's; a launch that configures nothing (``python run.py``
        under no ``SM_HP_MP_PARAMETERS``) counts only when nothing that configures the
        script starts it too."""
        chained = {(link.launcher, link.line, link.script) for link in links if link.started_by}
        grouped: dict[str, list[LinkedScript]] = {}
        for link in sorted(links, key=lambda link: (link.launcher, link.line, link.script)):
            if not link.started_by and (link.launcher, link.line, link.script) in chained:
                continue
            found = grouped.setdefault(link.script, [])
            # The same launch found twice (checked and searched) counts once; two rows of a
            # parametrized test at one line are two launches (their sources differ).
            if not any(
                other.launcher == link.launcher
                and other.line == link.line
                and other.job.source == link.job.source
                for other in found
            ):
                found.append(link)
        return Project(
            self.roots, {script: _configuring(found) for script, found in grouped.items()}
        )

    def with_roots(self, roots: Sequence[str]) -> Project:
        return Project(tuple(roots), self.links)

    def launchers_of(self, path: str) -> tuple[LinkedScript, ...]:
        return self.links.get(os.path.abspath(path), ())

    def contains(self, path: str) -> bool:
        absolute = os.path.abspath(path)
        for root in self.roots:
            if absolute == root or absolute.startswith(root.rstrip(os.sep) + os.sep):
                return True
        return False

    def declared_for(self, path: str) -> tuple[DeclaredJob, ...]:
        """The launcher's job for ``path``; settings on which several launchers disagree are
        unknown. A launcher in a branch its file's values do not take (``DeclaredJob.untaken``)
        only offers its values when another launcher runs the script; when none does, its job
        is the script's, marked as offered."""
        links = self.launchers_of(path)
        if not links:
            return ()
        taken = [link.job for link in links if not link.job.untaken]
        untaken = [link.job for link in links if link.job.untaken]
        jobs = taken or untaken
        merged = _merged(jobs)
        if taken and untaken:
            merged = replace(merged, offered={**_as_offered(untaken), **merged.offered})
        return (merged,)

    def container_for(self, path: str) -> tuple[DeclaredJob, ...]:
        """The library release of a script no launcher starts, beside scripts one does (an
        older variant next to the launched ``train.py``): SageMaker uploads their folder into
        the launcher's container, so that container's release is the only one the script runs
        there. Only the release: the configuration is the launched script's own. None when the
        launchers of its folder name no container, or disagree."""
        if self.launchers_of(path):
            return ()
        folder = os.path.dirname(os.path.abspath(path))
        jobs = [
            job
            for script in sorted(self.links)
            if os.path.dirname(script) == folder
            for job in self.declared_for(script)
        ]
        containers = {
            tuple((key, job.settings[key]) for key in _CONTAINER_KEYS if key in job.settings)
            for job in jobs
        }
        if len(containers) != 1:
            return ()
        settings = dict(containers.pop())
        if not any(key in settings for key in _RELEASE_KEYS):
            return ()
        sources = ", ".join(dict.fromkeys(job.source for job in jobs))
        return (
            DeclaredJob(
                f"the container of {sources}, which uploads this folder", settings, complete=False
            ),
        )

    def hyperparameters_for(self, path: str) -> Mapping[str, Any]:
        links = self.launchers_of(path)
        return links[0].hyperparameters if len(links) == 1 else {}

    def search_dirs(self, importer: str) -> list[str]:
        """Where ``import x`` in ``importer`` may find ``x.py``: its folder, the folder above
        its package, then the roots."""
        known = self._search_dirs.get(importer)
        if known is None:
            folder = os.path.dirname(os.path.abspath(importer))
            folders = [folder, *self._package_root(folder)]
            folders += [
                root if os.path.isdir(root) else os.path.dirname(root) for root in self.roots
            ]
            seen: list[str] = []
            for folder in folders:
                if folder not in seen:
                    seen.append(folder)
            known = self._search_dirs[importer] = tuple(seen)
        return list(known)

    def _package_root(self, folder: str) -> list[str]:
        """The folder that holds the outermost package around ``folder`` (``src`` for
        ``src/training/main.py`` with ``src/training/__init__.py``), when that is inside the
        project: a module of a package is run as ``python -m training.main`` from there, or
        installed, and imports its siblings absolutely (``from training.data import ...``)."""
        top = None
        while self.contains(folder) and self.holds_file(os.path.join(folder, "__init__.py")):
            top = folder
            folder = os.path.dirname(folder)
        if top is None or not self.contains(folder):
            return []
        return [folder]

    def _named_package_parents(self, importer: str, module_name: str) -> list[str]:
        """The folders holding a folder of ``importer``'s own path named as ``module_name``'s
        first part: ``src/training/main.py`` importing ``training.distributed`` without any
        ``__init__.py`` (a namespace package) runs with ``src`` on the path, or the import would
        fail."""
        first = module_name.split(".", 1)[0]
        found: list[str] = []
        folder = os.path.dirname(os.path.abspath(importer))
        while self.contains(folder) and os.path.dirname(folder) != folder:
            if os.path.basename(folder) == first:
                found.append(os.path.dirname(folder))
            folder = os.path.dirname(folder)
        return found

    def is_package_module(self, path: str) -> bool:
        """``path`` is a module of a package of the project (its folder has ``__init__.py``)."""
        folder = os.path.dirname(os.path.abspath(path))
        return self.holds_file(os.path.join(folder, "__init__.py"))

    def module_candidates(self, importer: str, module_name: str) -> list[str]:
        """The files ``import module_name`` in ``importer`` may load, in the order Python looks
        (``model``, ``pkg.data``, ``.data``): for each folder of ``module_folders``, ``x.py``
        then ``x/__init__.py``. One definition for the analysis (``LocalModules``) and the
        prefilter's look at the project's helpers (``smpfix.engine.helper_reach``)."""
        known = self._candidates.get((importer, module_name))
        if known is None:
            relative = module_name.lstrip(".").replace(".", os.sep)
            known = self._candidates[(importer, module_name)] = tuple(
                candidate
                for folder in self.module_folders(importer, module_name)
                for candidate in (
                    os.path.join(folder, relative + ".py"),
                    os.path.join(folder, relative, "__init__.py"),
                )
            )
        return list(known)

    def holds_file(self, path: str) -> bool:
        """Whether ``path`` is a file of the project (a module an import may load)."""
        known = self._files.get(path)
        if known is None:
            known = self._files[path] = self.contains(path) and self._is_file(path)
        return known

    def _is_file(self, path: str) -> bool:
        """``os.path.isfile(path)``, answered from the listing of its folder."""
        folder, name = os.path.split(os.path.abspath(path))
        listing = self._listing(folder)
        return name in listing.files if listing is not None else os.path.isfile(path)

    def _listing(self, folder: str) -> Optional[_Listing]:
        """The files and folders in ``folder`` (an absolute, normalised path); empty when it is
        no folder, which the listing of its parent tells for a folder inside the project (most
        folders an import is looked for in do not exist); None when it cannot be listed."""
        if folder in self._listings:
            return self._listings[folder]
        parent, name = os.path.split(folder)
        above = self._listing(parent) if name and self.contains(parent) else None
        if above is not None and name not in above.folders:
            found: Optional[_Listing] = _NOTHING
        else:
            found = _listed(folder)
        self._listings[folder] = found
        return found

    def module_folders(self, importer: str, module_name: str) -> list[str]:
        """The folders ``import module_name`` in ``importer`` searches: for a relative import
        the importer's package (one folder up per extra dot), else ``search_dirs``."""
        level = len(module_name) - len(module_name.lstrip("."))
        if not level:
            searched = self.search_dirs(importer)
            named = self._named_package_parents(importer, module_name)
            return searched + [folder for folder in named if folder not in searched]
        base = os.path.dirname(os.path.abspath(importer))
        for _ in range(level - 1):
            base = os.path.dirname(base)
        return [base]


@dataclass(frozen=True)
class _Listing:
    """The names in a folder: its files and its folders (symbolic links followed)."""

    files: frozenset[str]
    folders: frozenset[str]


_NOTHING = _Listing(frozenset(), frozenset())


def _listed(folder: str) -> Optional[_Listing]:
    """``folder``'s listing; empty when it does not exist or is no folder, None when it cannot be
    listed (then each path in it is asked about on its own)."""
    files, folders = [], []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    if entry.is_file():
                        files.append(entry.name)
                    elif entry.is_dir():
                        folders.append(entry.name)
                except OSError:
                    continue
    except (FileNotFoundError, NotADirectoryError):
        return _NOTHING
    except OSError:
        return None
    return _Listing(frozenset(files), frozenset(folders))


def _configuring(links: Sequence[LinkedScript]) -> tuple[LinkedScript, ...]:
    """The links that configure the script, when any does; else all of them."""
    configuring = tuple(link for link in links if link.job.configures)
    return configuring or tuple(links)


def _as_offered(jobs: Sequence[DeclaredJob]) -> dict[str, Setting]:
    """The settings of the jobs in untaken branches, as offers naming their branch."""
    return {
        key: Setting(key, value, job.source)
        for job in reversed(jobs)
        for key, value in job.settings.items()
        if key != "framework"
    }


def _merged(jobs: Sequence[DeclaredJob]) -> DeclaredJob:
    """One job of several launchers of a script: what they disagree on is unknown."""
    first = jobs[0]
    if len(jobs) == 1:
        return first
    disagree = frozenset(
        key
        for job in jobs[1:]
        for key in set(first.settings) | set(job.settings)
        if first.settings.get(key) != job.settings.get(key)
    )
    names = ", ".join(job.source for job in jobs)
    settings = {k: v for k, v in first.settings.items() if k not in disagree}
    return DeclaredJob(
        names,
        settings,
        all(job.complete for job in jobs),
        first.unknown | disagree,
        conflicting=disagree,
        role=Role.LAUNCHER,
        manual_init=all(job.manual_init for job in jobs),
        smp_v2=first.smp_v2 if all(job.smp_v2 for job in jobs) else None,
        offered={key: s for job in reversed(jobs) for key, s in job.offered.items()},
        untaken=first.untaken if all(job.untaken for job in jobs) else "",
    )
