"""The ``smp.init`` configuration a script builds before passing it, often from a file.

Scripts started without an estimator configure the library themselves, and many keep the
configuration in a file of the repository rather than in a dict display::

    with open(args.config) as handle:          # --config configs/smp.yaml
        config = yaml.safe_load(handle)
    smp.init(config["smp"])

The script is replayed like a launcher (``smpfix.job.launcher.evaluate_argument``), so the
files it reads count as in a launcher (``smpfix.job.launcher_files``: JSON, and YAML through
``yaml.safe_load`` only); ``attribute`` gives the command-line values the script's launchers
pass (``args.config``). What cannot be read leaves the dict's keys unknown, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.imports import ImportTable
from smpfix.base.literals import UNKNOWN
from smpfix.job.jobfacts import Value
from smpfix.job.launcher import Attribute, evaluate_argument


@dataclass(frozen=True)
class BuiltConfig:
    """The settings an ``smp.init(config)`` call receives that smpfix can read, and the files
    they came from (empty when the script built them in code)."""

    settings: Mapping[str, Value]
    files: tuple[str, ...]


def built_config(
    module: cst.Module,
    imports: ImportTable,
    call: cst.Call,
    path: str,
    attribute: Optional[Attribute] = None,
) -> Optional[BuiltConfig]:
    """What ``call`` (an ``smp.init`` whose argument is not a dict display) passes, when it
    is a dict smpfix can build; None otherwise."""
    located = evaluate_argument(module, imports, call, path, attribute)
    if located is None or not isinstance(located.value, dict):
        return None
    settings: dict[str, Value] = {}
    files: set[str] = set()
    for key, item in located.value.items():
        value = item.plain()
        if value is UNKNOWN or not isinstance(value, (bool, int, float, str)):
            continue
        settings[key] = value
        if item.source_file is not None:
            files.add(item.source_file)
    if located.source_file is not None:
        files.add(located.source_file)
    return BuiltConfig(settings, tuple(sorted(files))) if settings else None
