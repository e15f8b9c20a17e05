"""Commands a Python launcher or a notebook starts: the first step of a launch chain.

Not every job is started by an estimator. A notebook cell or a launcher script may run the
training itself, often through a shell script of the repository::

    subprocess.run(["bash", "scripts/train.sh", "--epochs", "3"], check=True)
    !bash scripts/train.sh

(or ``os.system`` with the command as a string).

This module reads such commands as the shell would see them, without running anything:
``subprocess.run/call/check_call/check_output/Popen`` with a list of words or, under
``shell=True``, a string; ``os.system`` and ``os.popen`` with a string; ``cmd.split()`` and
``shlex.split(cmd)``; a notebook's ``!`` lines and ``%%bash`` cells. Each command is evaluated
by the launcher's replay (``smpfix.job.launcher.replay_calls``), so names bound earlier,
``+`` and f-strings count; a part smpfix cannot know becomes ``${?}``, which the shell reader
treats as unknown (``smpfix.job.shell_launcher``): a script whose name is unknown starts
nothing smpfix can link, an unknown argument leaves the hyperparameters incomplete.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Any, Callable, Optional

import libcst as cst

from smpfix.base.imports import ImportTable
from smpfix.base.literals import UNKNOWN
from smpfix.job.launcher import Located, replay_calls

# What smpfix cannot know in a command: the shell reader takes any word with ``$`` as unknown.
UNKNOWN_PART = "${?}"

_SUBPROCESS = frozenset(
    {
        "subprocess.run",
        "subprocess.call",
        "subprocess.check_call",
        "subprocess.check_output",
        "subprocess.Popen",
    }
)
_SHELL_CALLS = frozenset({"os.system", "os.popen"})
_MARKERS = ("subprocess", "os.system", "os.popen")


@dataclass(frozen=True)
class StartedCommand:
    """One command the launcher runs: its shell text, where it is, and the folder it runs in
    (None: the launcher's own)."""

    node: Optional[cst.CSTNode]
    text: str
    line: int = 0
    cwd: Optional[str] = None


def may_start_commands(text: str) -> bool:
    """Whether a launcher's code may run a command through Python (most do not: no replay)."""
    return any(marker in text for marker in _MARKERS)


def started_commands(module: cst.Module, imports: ImportTable, path: str) -> list[StartedCommand]:
    """The commands ``module`` runs through ``subprocess`` and ``os``, in the order it runs them."""
    found: list[StartedCommand] = []

    def on_call(call: cst.Call, value: Callable[[cst.BaseExpression], Located]) -> None:
        qualified = imports.qualified_name(call.func) or ""
        if qualified in _SHELL_CALLS:
            shell = True
        elif qualified in _SUBPROCESS:
            shell = _keyword(call, "shell", value) is True
        else:
            return
        command = _command_argument(call)
        if command is None:
            return
        text = _text(command, value) if shell else _words(command, value, imports)
        if text is None:
            return
        cwd = _keyword(call, "cwd", value)
        found.append(StartedCommand(call, text, cwd=cwd if isinstance(cwd, str) else None))

    replay_calls(module, imports, path, on_call)
    return found


def _command_argument(call: cst.Call) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None or arg.keyword.value in ("args", "command", "cmd"):
            return arg.value
    return None


def _keyword(call: cst.Call, name: str, value: Callable[[cst.BaseExpression], Located]) -> Any:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return value(arg.value).plain()
    return None


def _words(
    node: cst.BaseExpression, value: Callable[[cst.BaseExpression], Located], imports: ImportTable
) -> Optional[str]:
    """A list command as shell text (each word quoted), or a split string's text."""
    if type(node) is cst.Call:
        if imports.qualified_name(node.func) == "shlex.split" and len(node.args) == 1:
            return _text(node.args[0].value, value)
        if type(node.func) is cst.Attribute and node.func.attr.value == "split" and not node.args:
            return _text(node.func.value, value)
        return None
    if type(node) in (cst.List, cst.Tuple):
        elements = node.elements  # type: ignore[attr-defined]
        if any(type(element) is cst.StarredElement for element in elements):
            return None
        return shlex.join(_text(element.value, value) or UNKNOWN_PART for element in elements)
    found = value(node)
    if isinstance(found.value, list):
        return shlex.join(_plain_text(item) for item in found.value)
    return None


def _plain_text(item: Located) -> str:
    plain = item.plain()
    return str(plain) if isinstance(plain, (str, int, float)) else UNKNOWN_PART


def _text(
    node: cst.BaseExpression, value: Callable[[cst.BaseExpression], Located]
) -> Optional[str]:
    """The string ``node`` builds, with ``${?}`` for each part smpfix cannot know; None when
    it is no string at all."""
    if type(node) is cst.FormattedString:
        pieces = []
        for part in node.parts:
            if type(part) is cst.FormattedStringText:
                pieces.append(part.value.replace("{{", "{").replace("}}", "}"))
                continue
            assert type(part) is cst.FormattedStringExpression
            known = value(part.expression).plain()
            usable = isinstance(known, (str, int, float)) and part.format_spec is None
            pieces.append(str(known) if usable else UNKNOWN_PART)
        return "".join(pieces)
    if (
        type(node) is cst.Call
        and type(node.func) is cst.Name
        and node.func.value == "str"
        and len(node.args) == 1
        and node.args[0].keyword is None
        and not node.args[0].star
    ):
        return _text(node.args[0].value, value)  # ``str(EPOCHS)``
    if type(node) is cst.BinaryOperation and type(node.operator) is cst.Add:
        left, right = _text(node.left, value), _text(node.right, value)
        return left + right if left is not None and right is not None else None
    found = value(node)
    plain = found.plain()
    if isinstance(plain, str):
        return plain
    if isinstance(plain, (int, float)) and not isinstance(plain, bool):
        return str(plain)
    if plain is UNKNOWN and found.node is not None and found.node is not node:
        # A command built earlier from parts some of which are unknown (``cmd = f"..."``).
        if type(found.node) in (cst.FormattedString, cst.BinaryOperation):
            return _text(found.node, value)  # type: ignore[arg-type]
    return UNKNOWN_PART if plain is UNKNOWN else None


def notebook_commands(code: str) -> list[StartedCommand]:
    """A notebook's ``!`` lines and ``%%bash`` cells, with IPython's ``{name}`` and ``$name``
    expansions unknown."""
    from smpfix.base.notebook import shell_lines

    return [
        StartedCommand(None, _expansions_unknown(text), line) for line, text in shell_lines(code)
    ]


def _expansions_unknown(text: str) -> str:
    out, depth = [], 0
    for char in text:
        if char == "{":
            depth += 1
            if depth == 1:
                out.append(UNKNOWN_PART)
            continue
        if char == "}" and depth:
            depth -= 1
            continue
        if not depth:
            out.append(char)
    return "".join(out)


def working_dir(command: StartedCommand, launcher_path: str) -> str:
    """The folder the command runs in: its ``cwd=`` against the launcher's folder."""
    folder = os.path.dirname(os.path.abspath(launcher_path))
    return os.path.normpath(os.path.join(folder, command.cwd)) if command.cwd else folder
