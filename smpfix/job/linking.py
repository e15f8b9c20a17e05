"""Linking launchers to the scripts they launch, before the scripts are checked.

The runner calls this once per run, in the main process, on the files that may be launchers
(they mention ``smdistributed`` and an estimator's ``distribution``). Each estimator whose
``entry_point`` is a literal declares the job of that script: its modelparallel
``parameters`` (a complete configuration, as the library sees it: keys left out take the
defaults), the ``mpi`` processes per host, the instance type and count, and the
hyperparameters, which scripts often read through argparse.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from smpfix.base.flavour import Flavour
from smpfix.job.jobfacts import DeclaredJob, known_keys

_LAUNCHER_MARKERS = (b"distribution", b"Estimator", b"PyTorch(", b"HuggingFace(", b"TensorFlow(")


@dataclass(frozen=True)
class LinkedScript:
    """What one launcher says about one script."""

    script: str
    job: DeclaredJob
    hyperparameters: Mapping[str, Any]
    launcher: str
    line: int
    # False when the launcher passes hyperparameters smpfix cannot read (a call, a variable
    # from elsewhere): a key missing from ``hyperparameters`` may then still be passed.
    hyperparameters_complete: bool = True


def may_be_launcher(raw: bytes) -> bool:
    return b"smdistributed" in raw and any(marker in raw for marker in _LAUNCHER_MARKERS)


def declared_job(launcher: Any, source: str) -> DeclaredJob:
    """The job a launcher declares: resolved keys, keys it sets to unknowable values, completeness."""
    from smpfix.base.literals import (
        UNKNOWN,  # imports LibCST, which the CLI must not do at start-up
    )
    from smpfix.job.framework_versions import launcher_flavour, pytorch_version, tensorflow_version

    flavour = launcher_flavour(launcher)
    known = known_keys(flavour)
    settings: dict[str, Any] = {}
    unknown: set[str] = set()
    parameters = launcher.parameters
    complete = False
    if parameters is not None and isinstance(parameters.value, dict):
        enabled = launcher.modelparallel.get("enabled") if launcher.modelparallel is not None else None
        complete = enabled is not None and enabled.plain() is True
        for key, located in parameters.value.items():
            value = located.plain()
            if key not in known:
                continue
            if value is UNKNOWN or isinstance(value, (dict, list)):
                unknown.add(key)
            else:
                settings[key] = value
    mpi = launcher.mpi
    per_host = mpi.get("processes_per_host") if mpi is not None else None
    for key, located in (("processes_per_host", per_host), ("instance_type", launcher.keyword("instance_type")),
                         ("instance_count", launcher.keyword("instance_count"))):
        if located is None:
            continue
        value = located.plain()
        if value is UNKNOWN:
            unknown.add(key)
        else:
            settings[key] = value
    settings["framework"] = flavour.value
    version = tensorflow_version(launcher) if flavour is Flavour.TENSORFLOW else pytorch_version(launcher)
    if version is not None:
        settings["framework_version"] = version.text
    return DeclaredJob(source, settings, complete=complete, unknown=frozenset(unknown))


def _literal_items(values: Any) -> dict[str, Any]:
    """The hyperparameters smpfix can read: plain literal values under string keys."""
    if not isinstance(values, dict):
        return {}
    return {k: v for k, v in values.items() if isinstance(k, str) and isinstance(v, (bool, int, float, str))}


def link(files: Iterable[tuple[str, str]]) -> list[LinkedScript]:
    """Launchers among ``(path, text)`` pairs (notebooks included) and the scripts they start."""
    import libcst as cst

    from smpfix.base import nesting
    from smpfix.base.imports import ImportTable
    from smpfix.base.positions import Positions
    from smpfix.job.launcher import find_launchers

    linked: list[LinkedScript] = []
    for path, text in files:
        code = text
        if path.endswith(".ipynb"):
            from smpfix.base import notebook

            try:
                code = notebook.parse(text).joined()[0]
            except notebook.NotebookError:
                continue
        if nesting.refusal(code) is not None:  # LibCST would crash on it; reported when checked
            continue
        try:
            module = cst.parse_module(code)
        except Exception:  # a syntax error, or syntax this LibCST cannot represent
            continue
        launchers = find_launchers(module, ImportTable.of_module(module), path)
        if not launchers:
            continue
        positions = Positions(module, code)
        for launcher in launchers:
            script = launcher.script
            if script is None:
                continue
            line = positions.position(positions.span(launcher.call)[0]).line
            shown = os.path.relpath(path)
            shown = path if shown.startswith("..") else shown
            where = shown if path.endswith(".ipynb") else f"{shown}:{line}"
            hyper = launcher.literal("hyperparameters")
            linked.append(
                LinkedScript(
                    script=os.path.abspath(script),
                    job=declared_job(launcher, f"launcher {where}"),
                    hyperparameters=_literal_items(hyper),
                    launcher=os.path.abspath(path),
                    line=line,
                    hyperparameters_complete=hyper is None or (isinstance(hyper, dict) and len(_literal_items(hyper)) == len(hyper)),
                )
            )
    return linked
