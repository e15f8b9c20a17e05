"""Launch chains: a launcher that starts a shell script that starts the training script.

Repositories rarely start training in one step. A notebook cell runs
``subprocess.run(["bash", "scripts/train.sh"])``, the shell script exports a few variables
and runs ``torchrun --nproc_per_node 8 run.py --config configs/smp.yaml``, and ``run.py``
configures the library in its own ``smp.init({...})``. Each step is read as data
(``smpfix.job.command_launches`` for the Python side, ``smpfix.job.shell_launcher`` for the
shell side); this module follows the steps through the repository's shell scripts until each
command starts a Python script, carrying what the shell would carry: the variables exported
so far and the working folder (a script run as ``bash scripts/train.sh`` runs in its
caller's folder, not its own).

A shell script is followed only when it is a regular file inside the project, read with the
same caps as any configuration file, at most ``MAX_DEPTH`` steps deep and never twice in one
chain (a script that runs itself ends there). Nothing is ever run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Callable, Optional

from smpfix.base.safe_read import RefusedFile, read_regular
from smpfix.job.shell_launcher import ShellLaunch, shell_launches

MAX_DEPTH = 4
# Shell scripts are small; one larger than this is not a launcher worth reading.
_SHELL_LIMIT = 1 << 20


@dataclass(frozen=True)
class ChainedLaunch:
    """A command that starts a Python script, found at the end of a chain: the file holding
    it (a shell script, or the Python launcher itself), what started that file (its shown
    source, "" for the first step) and the shell scripts read on the way."""

    holder: str
    launch: ShellLaunch
    started_by: str = ""
    read: tuple[str, ...] = ()


def follow(
    holder: str,
    launches: Sequence[ShellLaunch],
    folder: str,
    where: Callable[[str, int], str],
) -> Iterator[ChainedLaunch]:
    """The Python launches ``launches`` (of the file ``holder``) lead to, through the shell
    scripts they run. ``folder`` is the project folder files must lie in; ``where(path,
    line)`` names a line of a file the way job sources do (``launch.ipynb``, ``run.sh:4``)."""
    yield from _follow(holder, launches, folder, where, "", (holder,), ())


def _follow(
    holder: str,
    launches: Sequence[ShellLaunch],
    folder: str,
    where: Callable[[str, int], str],
    started_by: str,
    chain: tuple[str, ...],
    read: tuple[str, ...],
) -> Iterator[ChainedLaunch]:
    for launch in launches:
        if not launch.starts_shell_script:
            yield ChainedLaunch(holder, launch, started_by, read)
            continue
        if len(chain) > MAX_DEPTH:
            continue
        found = shell_script(launch, holder, folder)
        if found is None or found[0] in chain:
            continue
        path, text = found
        step = where(holder, launch.line)
        inner = shell_launches(path, text, launch.working_dir, launch.environment)
        yield from _follow(
            path,
            inner,
            folder,
            where,
            f"{step}, started by {started_by}" if started_by else step,
            (*chain, path),
            (*read, path),
        )


def shell_script(launch: ShellLaunch, holder: str, folder: str) -> Optional[tuple[str, str]]:
    """The shell script a launch runs and its text: relative to the folder the command runs
    in, else to the file that runs it; None when neither is a readable file of the project."""
    candidates = [os.path.normpath(os.path.join(launch.working_dir, launch.script))]
    beside = os.path.normpath(os.path.join(os.path.dirname(holder), launch.script))
    if beside not in candidates:
        candidates.append(beside)
    for candidate in candidates:
        if not os.path.isfile(candidate):
            continue
        try:
            raw = read_regular(candidate, _SHELL_LIMIT, inside=folder)
        except (OSError, RefusedFile):
            return None
        return candidate, raw.decode("utf-8", errors="replace")
    return None
