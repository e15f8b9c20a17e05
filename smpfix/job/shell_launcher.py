"""Shell entry points that configure the library themselves and start a script with MPI.

The SageMaker container tests run a training script in model parallel mode without an
estimator: a shell script exports the modelparallel parameters as JSON and starts the script
with ``mpirun``::

    export SM_HP_MP_PARAMETERS='{"partitions": 2, "microbatches": 4, "ddp": true}'
    mpirun --allow-run-as-root -np 8 python smp_pt_mnist.py --data-dir data/training

That variable is what the estimator's ``parameters`` become on SageMaker, and the library
reads it whatever starts the script: ``ModelParallelConfig.__init__`` loads
``json.loads(os.environ.get("SM_HP_MP_PARAMETERS", default="{}"))`` and writes each key over
the ``smp.init`` dict (SMP 1.12.1 ``backend/config.py``; under ``mpirun`` the 1.12 library
also initialises itself on import when the variable is set, ``torch/__init__.py``). So such
a shell script is a launcher of the script its ``mpirun`` line runs, with that configuration,
complete as an estimator's is (keys it leaves out take the library's defaults); the
arguments after the script are its hyperparameters.

A shell script that starts a script without that variable (``python run.py``, ``torchrun
--nproc_per_node 8 run.py``, ``mpirun -np 8 python run.py``, ``deepspeed run.py``) launches it
too: the script then configures the library itself (its ``smp.init({...})`` dict), and the link
makes it an entry script whose job says where it was started from. A line that runs another
shell script (``bash scripts/train.sh``, ``./train.sh``) is a step of a launch chain
(``smpfix.job.launch_chains``), which reads that script in turn with the variables exported.

Reading is deliberately small: logical lines (``\\`` continuations joined), split as the
shell would (``shlex``), ``export NAME=VALUE``, ``NAME=VALUE`` before a command, ``mpirun -x
NAME=VALUE`` and ``cd DIR``; nothing is expanded, so a value with ``$`` is unknown. Only files
that mention a Python runner are decoded (``may_be_shell_launcher``). Nothing is ever run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from smpfix.base.flavour import Flavour
from smpfix.job.jobfacts import DeclaredJob, Role, known_keys

SHELL_SUFFIX = ".sh"
_VARIABLE = "SM_HP_MP_PARAMETERS"
_MPI_RUNNERS = frozenset({"mpirun", "mpiexec", "smddpmprun"})
# Programs that start a Python script given as their first ``.py`` word.
_SCRIPT_RUNNERS = frozenset({"torchrun", "deepspeed"})
# ``python -m <module> ... script.py``: modules that start the script given after their options.
_MODULE_RUNNERS = frozenset(
    {"torch.distributed.launch", "torch.distributed.run", "mpi4py", "deepspeed.launcher.runner"}
)
# Shells that run a script file given as their first word (``source`` and ``.`` in this shell).
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "source", "."})
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_SEPARATORS = frozenset({";", "&&", "||", "|", "&"})
_RUNNER_MARKERS = (b"python", b"torchrun", b"mpirun", b"deepspeed")


def may_be_shell_launcher(raw: bytes) -> bool:
    """Whether a shell script's bytes may start a Python script (and so launch one)."""
    return any(marker in raw for marker in _RUNNER_MARKERS)


@dataclass(frozen=True)
class ShellLaunch:
    """One command that starts a Python script (``mpirun ... python script.py ...``,
    ``torchrun ... script.py``) or another shell script (``bash train.sh``: ``script`` ends
    in ``.sh``), and the configuration it runs under."""

    line: int
    script: str
    working_dir: str
    parameters: Optional[str]
    arguments: tuple[str, ...]
    environment: Mapping[str, str] = field(default_factory=dict)

    @property
    def starts_shell_script(self) -> bool:
        return self.script.endswith(SHELL_SUFFIX)


def shell_launches(
    path: str,
    text: str,
    working_dir: Optional[str] = None,
    inherited: Optional[Mapping[str, str]] = None,
) -> list[ShellLaunch]:
    """The launches of Python scripts (and the shell scripts run) in the shell script
    ``path``, in order, each with the ``SM_HP_MP_PARAMETERS`` it sees (None when it sees
    none). ``working_dir`` is the folder the script runs in (its own by default);
    ``inherited`` the environment it is started with (a chain's exported variables)."""
    working_dir = working_dir or os.path.dirname(os.path.abspath(path))
    variables: dict[str, str] = dict(inherited or {})
    exported: set[str] = set(inherited or {})
    found: list[ShellLaunch] = []
    for line, tokens in _logical_lines(text):
        for command in _commands(tokens):
            prefix: dict[str, str] = {}
            while command and (assigned := _ASSIGNMENT.match(command[0])) is not None:
                prefix[assigned[1]] = assigned[2]
                command = command[1:]
            if not command:
                variables.update(prefix)
                continue
            if command[0] == "export":
                for item in command[1:]:
                    assigned = _ASSIGNMENT.match(item)
                    if assigned is not None:
                        variables[assigned[1]] = assigned[2]
                    exported.add(assigned[1] if assigned is not None else item)
                continue
            if command[0] == "cd" and len(command) == 2 and "$" not in command[1]:
                working_dir = os.path.normpath(os.path.join(working_dir, command[1]))
                continue
            environment = {name: variables[name] for name in exported if name in variables}
            environment.update(prefix)
            launch = command_launch(command, environment, line, working_dir)
            if launch is not None:
                found.append(launch)
    return found


def shell_commands(text: str) -> Iterator[list[str]]:
    """Every simple command of a shell text as its words, the ``NAME=VALUE`` before it left
    out (a line of assignments alone yields nothing)."""
    for _, tokens in _logical_lines(text):
        for command in _commands(tokens):
            while command and _ASSIGNMENT.match(command[0]) is not None:
                command = command[1:]
            if command:
                yield command


def _logical_lines(text: str) -> Iterator[tuple[int, list[str]]]:
    """Each command line (continuations joined) with its first line number, split as the
    shell splits words; a line ``shlex`` cannot split (an open quote) is skipped."""
    pending: list[str] = []
    first = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not pending:
            first = number
        if raw.endswith("\\") and not raw.endswith("\\\\"):
            pending.append(raw[:-1])
            continue
        pending.append(raw)
        joined = " ".join(pending)
        pending = []
        lexer = shlex.shlex(joined, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            tokens = list(lexer)
        except ValueError:
            continue
        if tokens:
            yield first, tokens


def _commands(tokens: list[str]) -> Iterator[list[str]]:
    command: list[str] = []
    for token in tokens:
        if token in _SEPARATORS:
            if command:
                yield command
            command = []
        else:
            command.append(token)
    if command:
        yield command


def command_launch(
    command: Sequence[str], environment: Mapping[str, str], line: int, working_dir: str
) -> Optional[ShellLaunch]:
    """The script one command's words start: ``[mpirun [options]] python [options] script.py
    [arguments]``, ``python -m torch.distributed.run [options] script.py``, ``torchrun`` or
    ``deepspeed [options] script.py``, or a shell script (``bash x.sh``, ``./x.sh``); None for
    anything else (``pip install``, ``python -c``, a script whose name is not literal)."""
    if not command:
        return None
    environment = dict(environment)
    head = os.path.basename(command[0])
    suffix = ".py"
    if head in _MPI_RUNNERS:
        position = 1
        while position < len(command) and not _PYTHON.match(os.path.basename(command[position])):
            if command[position] == "-x" and position + 1 < len(command):
                assigned = _ASSIGNMENT.match(command[position + 1])
                if assigned is not None:
                    environment[assigned[1]] = assigned[2]
            position += 1
        found = _python_script(command, position + 1) if position < len(command) else None
    elif _PYTHON.match(head):
        found = _python_script(command, 1)
    elif head in _SCRIPT_RUNNERS:
        found = _first_script(command, 1)
    elif head in _SHELLS:
        found, suffix = _shell_script(command), SHELL_SUFFIX
    else:
        found, suffix = (0 if head.endswith(SHELL_SUFFIX) else None), SHELL_SUFFIX
    if found is None or found >= len(command):
        return None
    script = command[found]
    if not script.endswith(suffix) or "$" in script:
        return None
    return ShellLaunch(
        line,
        script,
        working_dir,
        environment.get(_VARIABLE),
        tuple(command[found + 1 :]),
        environment,
    )


def _python_script(command: Sequence[str], position: int) -> Optional[int]:
    """Where the script is in ``python [options] script.py``, from ``position`` (just after
    the interpreter); ``-m`` of a module that starts a script (``torch.distributed.run``)."""
    while position < len(command) and command[position].startswith("-"):
        if command[position] == "-c":
            return None
        if command[position] == "-m":
            module = command[position + 1] if position + 1 < len(command) else ""
            return _first_script(command, position + 2) if module in _MODULE_RUNNERS else None
        position += 1
    return position


def _first_script(command: Sequence[str], position: int) -> Optional[int]:
    """The first ``.py`` word from ``position`` that is not an option (``torchrun
    --nproc_per_node 8 train.py``: the runner's options may take values)."""
    for index in range(position, len(command)):
        if command[index].endswith(".py") and not command[index].startswith("-"):
            return index
    return None


def _shell_script(command: Sequence[str]) -> Optional[int]:
    """Where the script is in ``bash [options] script.sh`` (``bash -c`` runs no file)."""
    position = 1
    while position < len(command) and command[position].startswith("-"):
        if command[position] == "-c":
            return None
        position += 1
    return position


def declared_shell_job(launch: ShellLaunch, source: str) -> DeclaredJob:
    """The job a shell launch declares: its ``SM_HP_MP_PARAMETERS`` as a complete
    configuration; without it, a job that configures nothing (``DeclaredJob.configures``):
    the script's own ``smp.init`` dict then applies, and the job names where it started."""
    if launch.parameters is None:
        return DeclaredJob(
            source,
            {},
            complete=False,
            role=Role.LAUNCHER,
            manual_init=launch.environment.get("SMP_MANUAL_INIT") == "1",
        )
    settings: dict[str, Any] = {}
    unknown: set[str] = set()
    try:
        parameters = None if "$" in launch.parameters else json.loads(launch.parameters)
    except ValueError:
        parameters = None
    complete = isinstance(parameters, dict)
    if isinstance(parameters, dict):
        known = known_keys(Flavour.PYTORCH)
        for key, value in parameters.items():
            if key not in known:
                continue
            if isinstance(value, (bool, int, float, str)):
                settings[key] = value
            else:
                unknown.add(key)
    return DeclaredJob(
        source,
        settings,
        complete=complete,
        unknown=frozenset(unknown),
        role=Role.LAUNCHER,
        manual_init=launch.environment.get("SMP_MANUAL_INIT") == "1",
    )


def shell_hyperparameters(arguments: tuple[str, ...]) -> tuple[dict[str, Any], bool]:
    """The ``--key value`` arguments after the script, as hyperparameters (numbers read as
    numbers), and whether every argument was read."""
    found: dict[str, Any] = {}
    complete = True
    position = 0
    while position < len(arguments):
        argument = arguments[position]
        if not argument.startswith("--") or "$" in argument:
            complete = False
            position += 1
            continue
        key, equals, value = argument[2:].partition("=")
        if not equals:
            following = arguments[position + 1] if position + 1 < len(arguments) else None
            if following is None or following.startswith("--"):
                complete = False
                position += 1
                continue
            value = following
            position += 1
        position += 1
        if "$" in value:
            complete = False
            continue
        found[key] = _number(value)
    return found, complete


def _number(text: str) -> Any:
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text
