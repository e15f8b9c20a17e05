"""JSON files a launcher reads its configuration from.

Launchers keep the role, the network settings and often the whole ``distribution`` in a file
of the repository, next to the launcher::

    with open("config.json") as f:
        config = json.loads(f.read())
    distribution = {"smdistributed": {"modelparallel": config["smp_options"]}, ...}

or ``json.load(open("config/smp.json"))``. The launcher's replay (``smpfix.job.launcher``)
asks this module which file such a call reads and what it holds, so the values in the file
configure the job as if they were written in the launcher. The file is read as data, never
run; only a regular file inside the launcher's project, of at most ``JSON_LIMIT`` bytes.
YAML files are not read (the standard library has no YAML parser).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Optional

import libcst as cst

from smpfix.base.safe_read import JSON_LIMIT, RefusedFile, read_regular
from smpfix.job.project_root import project_folder, project_root


@dataclass(frozen=True)
class OpenFile:
    """The value of ``f`` in ``with open("config.json") as f:``: the path as written."""

    path: str


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
    """The file ``json.load(f)``, ``json.load(open(p))``, ``json.loads(f.read())`` or
    ``json.loads(open(p).read())`` reads; None for any other call."""
    if qualified not in ("json.load", "json.loads") or len(call.args) != 1:
        return None
    argument = call.args[0].value
    if qualified == "json.loads":
        if not (
            type(argument) is cst.Call
            and not argument.args
            and type(argument.func) is cst.Attribute
            and argument.func.attr.value == "read"
        ):
            return None
        argument = argument.func.value
    handle = opened(argument, evaluate)
    if handle is None:
        handle = evaluate(argument)
    return handle if isinstance(handle, OpenFile) else None


def read_json(handle: OpenFile, launcher_path: str) -> Optional[Any]:
    """The file's JSON value, resolved against the launcher's folder (where a notebook or a
    launcher script is run from); None when it is missing, refused or not JSON."""
    if not launcher_path:
        return None
    candidate = os.path.join(os.path.dirname(os.path.abspath(launcher_path)), handle.path)
    try:
        raw = read_regular(
            candidate, JSON_LIMIT, inside=project_folder(project_root(launcher_path), launcher_path)
        )
        return json.loads(raw.decode("utf-8"))
    except (OSError, RefusedFile, ValueError, RecursionError):
        return None


def json_path(handle: OpenFile, launcher_path: str) -> str:
    return os.path.normpath(
        os.path.join(os.path.dirname(os.path.abspath(launcher_path)), handle.path)
    )
