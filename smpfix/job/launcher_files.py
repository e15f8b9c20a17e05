"""JSON and YAML files a launcher (or a script) reads its configuration from.

Launchers keep the role, the network settings and often the whole ``distribution`` in a file
of the repository, next to the launcher::

    with open("config.json") as f:
        config = json.loads(f.read())
    distribution = {"smdistributed": {"modelparallel": config["smp_options"]}, ...}

or ``json.load(open("config/smp.json"))``, and as often in YAML:
``yaml.safe_load(open("configs/smp.yaml"))``, ``yaml.load(f, Loader=yaml.SafeLoader)``,
``OmegaConf.load("configs/smp.yaml")``. The launcher's replay (``smpfix.job.launcher``)
asks this module which file such a call reads and what it holds, so the values in the file
configure the job as if they were written in the launcher. The file is read as data, never
run: YAML only with ``yaml.safe_load`` (which builds plain values and never calls code, whatever
loader the code names), and a document whose aliases would make it larger than
``_MOST_VALUES`` values when expanded is not read. Only a regular file inside the launcher's
project, of at most ``JSON_LIMIT`` bytes. A file that is missing, refused or not valid
leaves the values it would give unknown: smpfix says nothing from it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Optional

import libcst as cst

from smpfix.base.safe_read import JSON_LIMIT, RefusedFile, read_regular
from smpfix.job.project_root import project_folder, project_root

# What a configuration file may expand to (YAML aliases can repeat a subtree many times).
_MOST_VALUES = 100_000
_YAML_LOADERS = frozenset(
    {"yaml.safe_load", "yaml.load", "yaml.full_load", "yaml.unsafe_load", "ruamel.yaml.safe_load"}
)
_OMEGACONF_LOADERS = frozenset({"omegaconf.OmegaConf.load"})


@dataclass(frozen=True)
class OpenFile:
    """The value of ``f`` in ``with open("config.json") as f:``: the path as written, and
    how the call that reads it parses it (``json`` or ``yaml``)."""

    path: str
    format: str = "json"


def opened(call: cst.BaseExpression, evaluate: Callable[[cst.BaseExpression], Any]) -> Any:
    """``OpenFile`` for ``open(path, ...)`` with a known path (read mode), else None."""
    if type(call) is not cst.Call or type(call.func) is not cst.Name or call.func.value != "open":
        return None
    if not call.args or call.args[0].keyword is not None or call.args[0].star:
        return None
    for arg in call.args[1:]:
        if arg.keyword is None or arg.keyword.value == "mode":
            mode = evaluate(arg.value)
            if not isinstance(mode, str) or "r" not in mode:
                return None
            break
    path = evaluate(call.args[0].value)
    return OpenFile(path) if isinstance(path, str) else None


def loaded_file(
    call: cst.Call, qualified: str, evaluate: Callable[[cst.BaseExpression], Any]
) -> Optional[OpenFile]:
    """The file ``json.load(f)``, ``json.load(open(p))``, ``json.loads(f.read())``,
    ``json.loads(open(p).read())`` reads, or their YAML kin (``yaml.safe_load(f)``,
    ``yaml.load(open(p), Loader=...)``, ``OmegaConf.load(p)``); None for any other call."""
    if not call.args or call.args[0].keyword is not None or call.args[0].star:
        return None
    argument = call.args[0].value
    if qualified in _OMEGACONF_LOADERS:
        path = evaluate(argument)
        if isinstance(path, str):
            return OpenFile(path, "yaml")
    elif qualified in _YAML_LOADERS:
        if type(argument) is cst.Call and _reads_whole(argument):
            argument = argument.func.value  # type: ignore[attr-defined]
    elif qualified in ("json.load", "json.loads") and len(call.args) == 1:
        if qualified == "json.loads":
            if not (type(argument) is cst.Call and _reads_whole(argument)):
                return None
            argument = argument.func.value  # type: ignore[attr-defined]
    else:
        return None
    handle = opened(argument, evaluate)
    if handle is None:
        handle = evaluate(argument)
    if not isinstance(handle, OpenFile):
        return None
    return OpenFile(handle.path, "json" if qualified.startswith("json.") else "yaml")


def _reads_whole(call: cst.Call) -> bool:
    """``f.read()``: the whole file as text."""
    return not call.args and type(call.func) is cst.Attribute and call.func.attr.value == "read"


def read_json(handle: OpenFile, launcher_path: str) -> Optional[Any]:
    """The file's value (JSON, or YAML read with ``yaml.safe_load``), resolved against the
    launcher's folder (where a notebook or a launcher script is run from), then its project
    folder; None when it is missing, refused or not valid."""
    if not launcher_path:
        return None
    folder = project_folder(project_root(launcher_path), launcher_path)
    for candidate in _candidates(handle, launcher_path, folder):
        try:
            raw = read_regular(candidate, JSON_LIMIT, inside=folder)
        except (OSError, RefusedFile):
            continue
        return _parsed(raw, handle.format)
    return None


def _candidates(handle: OpenFile, launcher_path: str, folder: str) -> list[str]:
    beside = os.path.join(os.path.dirname(os.path.abspath(launcher_path)), handle.path)
    at_root = os.path.join(folder, handle.path)
    return [beside] if os.path.normpath(beside) == os.path.normpath(at_root) else [beside, at_root]


def _parsed(raw: bytes, format: str) -> Optional[Any]:
    import yaml  # LibCST's dependency; imported only when a launcher reads a file

    try:
        text = raw.decode("utf-8")
        if format == "yaml":
            data = yaml.safe_load(text)
            return data if _bounded(data) else None
        return json.loads(text)
    except (ValueError, RecursionError, yaml.YAMLError):
        return None


def _bounded(data: Any) -> bool:
    """Whether ``data`` expands to at most ``_MOST_VALUES`` values (aliases counted each time
    they are used, as reading the values walks them)."""
    left = _MOST_VALUES
    stack = [data]
    while stack:
        value = stack.pop()
        left -= 1
        if left < 0:
            return False
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return True


def json_path(handle: OpenFile, launcher_path: str) -> str:
    """The file the launcher reads, as read (beside it, else at its project's root)."""
    folder = project_folder(project_root(launcher_path), launcher_path)
    candidates = _candidates(handle, launcher_path, folder)
    found = next((c for c in candidates if os.path.isfile(c)), candidates[0])
    return os.path.normpath(found)
