"""Linking launchers to the scripts they launch, before the scripts are checked.

Once per run, in the main process, the launcher index (``smpfix.engine.launcher_index``)
reads the files that may be launchers (they mention ``smdistributed`` and an estimator):
those checked, and those of each project a checked file belongs to. Each estimator whose
``entry_point`` smpfix can read declares the job of that script: its modelparallel
``parameters`` (a complete configuration, as the library sees it: keys left out take the
defaults), the ``mpi`` processes per host, the instance type and count, and the
hyperparameters, which scripts often read through argparse.

Where the script is depends on the folder the launcher runs in, which the code does not
say: the launcher's own folder and then its project root are tried, and the first
candidate that exists is the script (``Launcher.script_candidates``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Optional

from smpfix.base.flavour import Flavour
from smpfix.job.config_keys import misspelled
from smpfix.job.jobfacts import (
    V2_KNOWN_KEYS,
    DeclaredJob,
    Role,
    Setting,
    known_keys,
    normalize_key,
)
from smpfix.job.launch_chains import follow
from smpfix.job.project_root import project_folder, project_root
from smpfix.job.shell_launcher import (
    SHELL_SUFFIX,
    ShellLaunch,
    declared_shell_job,
    may_be_shell_launcher,
    shell_hyperparameters,
    shell_launches,
)

if TYPE_CHECKING:
    import libcst as cst

    from smpfix.base.imports import ImportTable
    from smpfix.base.walker import NodeIndex
    from smpfix.job.command_launches import StartedCommand

_LAUNCHER_MARKERS = (b"distribution", b"Estimator", b"PyTorch(", b"HuggingFace(", b"TensorFlow(")
# A Python launcher that starts a command (``smpfix.job.command_launches``); a notebook's shell
# lines too (``"!bash run.sh"`` in its JSON). The command names a runner or a shell script in
# a string (``["python", ...]``, ``"bash scripts/train.sh"``, a notebook's ``"!torchrun ...``).
_COMMAND_MARKERS = (b"subprocess", b"os.system", b"os.popen")
_NOTEBOOK_COMMAND_MARKERS = (*_COMMAND_MARKERS, b'"!', b"%%bash", b"%%sh")
_QUOTED_RUNNER = re.compile(
    rb"(?:\"\"\"\s*|'''\s*|[\"'])[^\"'\n]*?"
    rb"\b(?:python[\d.]*|torchrun|mpirun|mpiexec|deepspeed|[\w./-]+\.sh)\b"
)


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
    # Why the parameters file the launcher names was not read (a FIFO, a device, outside the
    # project, too large), for a one-line diagnostic when only the script is checked; the
    # estimator call's column (``line`` is its line).
    refusal: Optional[str] = None
    column: int = 1
    # The launcher that started ``launcher`` (a shell script) in a launch chain, as sources name
    # it (``launch.ipynb``), else "": the chain's link replaces the shell script's own.
    started_by: str = ""
    # Configuration files the launcher loads that could not be read (``-v`` names them).
    unread: tuple[str, ...] = ()


def may_be_launcher(raw: bytes, path: str = "") -> bool:
    """Whether a file's bytes may make it a launcher: a Python file or notebook that mentions
    the library and an estimator, or a shell script that exports the library's parameters
    and starts Python (``smpfix.job.shell_launcher``)."""
    if path.endswith(SHELL_SUFFIX):
        return may_be_shell_launcher(raw)
    if b"smdistributed" in raw and any(marker in raw for marker in _LAUNCHER_MARKERS):
        return True
    markers = _NOTEBOOK_COMMAND_MARKERS if path.endswith(".ipynb") else _COMMAND_MARKERS
    return any(marker in raw for marker in markers) and _QUOTED_RUNNER.search(raw) is not None


def declared_job(
    launcher: Any, source: str, where: Optional[Callable[[cst.CSTNode], str]] = None
) -> DeclaredJob:
    """The job a launcher declares: resolved keys, keys it sets to unknowable values,
    completeness, and the values its parameters dict offers in commented-out lines
    (``smpfix.job.offers``; ``where`` names a comment's place, ``source`` by default)."""
    from smpfix.base.literals import (
        UNKNOWN,  # imports LibCST, which the CLI must not do at start-up
    )
    from smpfix.job.framework_versions import launcher_flavour, pytorch_version, tensorflow_version
    from smpfix.job.launch_environment import sets_manual_init
    from smpfix.job.smp_v2 import launcher_v2

    flavour = launcher_flavour(launcher)
    smp_v2 = launcher_v2(launcher, source)
    # An SMP v2 launcher's parameters are v2's keys (``hybrid_shard_degree``, ...).
    known = V2_KNOWN_KEYS if smp_v2 is not None else known_keys(flavour)
    settings: dict[str, Any] = {}
    unknown: set[str] = set()
    parameters = launcher.parameters
    complete = False
    if parameters is not None and isinstance(parameters.value, dict):
        enabled = (
            launcher.modelparallel.get("enabled") if launcher.modelparallel is not None else None
        )
        complete = enabled is not None and enabled.plain() is True
        # A misspelled key (SMP812) leaves the setting it meant unknown, not at its default;
        # a key of SMP v1 in an SMP v2 launcher is no misspelling of a v2 key (SMP003).
        written = {normalize_key(key) for key in parameters.value if isinstance(key, str)}
        candidates = written - known_keys(flavour) if smp_v2 is not None else written
        unknown.update(misspelled(candidates, known) - written)
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
    for key, located in (
        ("processes_per_host", per_host),
        ("instance_type", launcher.keyword("instance_type")),
        ("instance_count", launcher.keyword("instance_count")),
    ):
        if located is None:
            continue
        value = located.plain()
        if value is UNKNOWN:
            unknown.add(key)
        else:
            settings[key] = value
    settings["framework"] = flavour.value
    version = (
        tensorflow_version(launcher) if flavour is Flavour.TENSORFLOW else pytorch_version(launcher)
    )
    if version is not None:
        settings["framework_version"] = version.text
    offered = _offered(parameters, known, where or (lambda _: source))
    if launcher.untaken:
        # In a branch its file's own values do not take: the job is one the code offers. Its
        # values are the job's when no launcher runs the script, and only offered beside one
        # that does (``Project.declared_for``).
        source = f"{source}, in the branch `{launcher.untaken}` that the launcher does not take"
    return DeclaredJob(
        source,
        settings,
        complete=complete,
        unknown=frozenset(unknown),
        role=Role.LAUNCHER,
        manual_init=sets_manual_init(launcher),
        smp_v2=smp_v2,
        offered=offered,
        untaken=launcher.untaken,
    )


def _offered(
    parameters: Any, known: frozenset[str], where: Callable[[cst.CSTNode], str]
) -> dict[str, Setting]:
    """The settings a parameters dict display offers in commented-out entries it does not
    also set, each with its comment and line."""
    if parameters is None or not isinstance(parameters.value, dict) or parameters.node is None:
        return {}
    from smpfix.job.offers import commented_entries

    offered: dict[str, Setting] = {}
    for entry in commented_entries(parameters.node, known - set(parameters.value)):
        text = entry.comment.value.strip()
        offered.setdefault(
            entry.key,
            Setting(entry.key, entry.value, f"`{text}` in {where(entry.comment)}, commented out"),
        )
    return offered


def _literal_items(values: Any) -> dict[str, Any]:
    """The hyperparameters smpfix can read: plain literal values under string keys."""
    if not isinstance(values, dict):
        return {}
    return {
        k: v
        for k, v in values.items()
        if isinstance(k, str) and isinstance(v, (bool, int, float, str))
    }


@dataclass(frozen=True)
class LaunchRecord:
    """What one estimator call of a launcher says, before its script is looked for on disk.

    A pure function of the launcher's text, its path and its project root (plus the JSON
    file ``parameters`` may name, in ``dependencies``), so the launcher index can keep it in
    the result cache; which candidate is the script is decided when it is used.
    """

    launcher: str
    line: int
    candidates: tuple[str, ...]
    job: DeclaredJob
    hyperparameters: Mapping[str, Any]
    hyperparameters_complete: bool
    dependencies: tuple[str, ...] = ()
    refusal: Optional[str] = None
    column: int = 1
    started_by: str = ""
    unread: tuple[str, ...] = ()

    def linked(self) -> Optional[LinkedScript]:
        """The link to the first candidate that exists (else the likeliest); None without one."""
        if not self.candidates:
            return None
        script = next((c for c in self.candidates if os.path.isfile(c)), self.candidates[0])
        return LinkedScript(
            script,
            self.job,
            self.hyperparameters,
            self.launcher,
            self.line,
            self.hyperparameters_complete,
            self.refusal,
            self.column,
            self.started_by,
            self.unread,
        )


def shown_path(path: str, root: str) -> str:
    """A launcher as job-fact sources name it: relative to its project root, so that the
    source reads the same from any working directory (absolute when outside the root)."""
    shown = os.path.relpath(path, project_folder(root, path))
    return os.path.abspath(path) if shown.startswith("..") else shown


# Launcher code -> its tree and node index (None: no index yet); None when it does not parse.
Parse = Callable[[str], Optional[tuple["cst.Module", Optional["NodeIndex"]]]]


def read_launcher(
    path: str, text: str, root: Optional[str] = None, parse: Optional[Parse] = None
) -> list[LaunchRecord]:
    """The estimator calls of one launcher (a ``.py`` file or a notebook), read with LibCST.

    ``root`` is the launcher's project root (by default found from ``path``,
    ``smpfix.job.project_root``). A notebook's cells that do not parse are left out, as the
    check leaves them out; a launcher that does not parse declares nothing. ``parse`` turns
    the launcher's code into a tree and its node index (by default a plain parse): a run
    that checks the launcher too parses it once for both.
    """
    if path.endswith(SHELL_SUFFIX):
        return read_shell_launcher(path, text, root)
    from smpfix.base import nesting
    from smpfix.base.imports import ImportTable
    from smpfix.base.positions import Positions
    from smpfix.base.walker import NodeIndex, indexed
    from smpfix.job.launcher import find_launchers

    code = text
    if path.endswith(".ipynb"):
        from smpfix.base import notebook

        try:
            code = notebook.parse(text).checkable()[0].joined()[0]
        except notebook.NotebookError:
            return []
    if nesting.refusal(code) is not None:  # LibCST would crash on it; reported when checked
        return []
    parsed = (parse or _parse)(code)
    if parsed is None:
        return []
    module, index = parsed
    # The replay searches each statement for calls: with the tree indexed, a slice of it.
    index = index if index is not None else NodeIndex(module)
    imports = ImportTable.of_module(module)
    with indexed(module, index):
        launchers = find_launchers(module, imports, path)
        commands = _started_commands(module, imports, path, code)
    if not launchers and not commands:
        return []
    # Through the node index, each call is located by generating its statement alone.
    positions = Positions(module, code, index)
    root = root if root is not None else project_root(path)

    def line_of(node: cst.CSTNode) -> int:
        return positions.position(positions.span(node)[0]).line

    records = [
        launch_record(launcher, path, at.line, root, at.column, line_of)
        for launcher in launchers
        for at in (positions.position(positions.span(launcher.call)[0]),)
    ]
    found = [record for record in records if record is not None]
    return found + _command_records(path, commands, root, line_of)


def _started_commands(
    module: cst.Module, imports: ImportTable, path: str, code: str
) -> list[StartedCommand]:
    """The commands a Python launcher runs (``subprocess``, ``os.system``; a notebook's shell
    lines too), for ``_command_records``."""
    from smpfix.job.command_launches import (
        may_start_commands,
        notebook_commands,
        started_commands,
    )

    commands = started_commands(module, imports, path) if may_start_commands(code) else []
    if path.endswith(".ipynb"):
        commands += notebook_commands(code)
    return commands


def _command_records(
    path: str,
    commands: Sequence[StartedCommand],
    root: str,
    line_of: Callable[[cst.CSTNode], int],
) -> list[LaunchRecord]:
    """The launches the commands of the Python launcher ``path`` start, directly or through
    the shell scripts they run (``smpfix.job.launch_chains``)."""
    from smpfix.job.command_launches import working_dir

    launches = []
    for command in commands:
        line = line_of(command.node) if command.node is not None else command.line
        for launch in shell_launches(path, command.text, working_dir(command, path)):
            launches.append(replace(launch, line=line))
    return _chained_records(path, launches, root)


def read_shell_launcher(path: str, text: str, root: Optional[str] = None) -> list[LaunchRecord]:
    """The launches of a shell script (``smpfix.job.shell_launcher``): its own, and those of
    the shell scripts it runs. A launch under ``SM_HP_MP_PARAMETERS`` declares that
    configuration; one without it configures nothing (the script's ``smp.init`` dict does),
    but still makes the script an entry script started from here."""
    root = root if root is not None else project_root(path)
    return _chained_records(path, shell_launches(path, text), root)


def _chained_records(path: str, launches: Sequence[ShellLaunch], root: str) -> list[LaunchRecord]:
    """A record for each Python launch ``launches`` (of the file ``path``) lead to, with the
    chain that reaches it in its source (``launcher train.sh:3, started by launch.ipynb``)."""

    folder = project_folder(root, path)

    def where(holder: str, line: int) -> str:
        shown = shown_path(os.path.abspath(holder), root)
        return shown if holder.endswith(".ipynb") or not line else f"{shown}:{line}"

    records = []
    for chained in follow(os.path.abspath(path), launches, folder, where):
        launch = chained.launch
        source = f"launcher {where(chained.holder, launch.line)}"
        if chained.started_by:
            source = f"{source}, started by {chained.started_by}"
        candidates = [os.path.normpath(os.path.join(launch.working_dir, launch.script))]
        for base in (os.path.dirname(chained.holder), folder):
            candidate = os.path.normpath(os.path.join(base, launch.script))
            if candidate not in candidates:
                candidates.append(candidate)
        hyperparameters, complete = shell_hyperparameters(launch.arguments)
        records.append(
            LaunchRecord(
                launcher=chained.holder,
                line=launch.line,
                candidates=tuple(candidates),
                job=declared_shell_job(launch, source),
                hyperparameters=hyperparameters,
                hyperparameters_complete=complete,
                dependencies=chained.read,
                started_by=chained.started_by,
            )
        )
    return records


def _parse(code: str) -> Optional[tuple[cst.Module, Optional[NodeIndex]]]:
    from smpfix.base.parse import parse_module

    try:
        return parse_module(code), None
    except Exception:  # a syntax error, or syntax this LibCST cannot represent
        return None


def launch_record(
    launcher: Any,
    path: str,
    line: Optional[int],
    root: Optional[str] = None,
    column: int = 1,
    line_of: Optional[Callable[[cst.CSTNode], int]] = None,
) -> Optional[LaunchRecord]:
    """What the estimator ``launcher``, at ``line`` of the launcher file ``path``, says; None
    when its ``entry_point`` cannot be read. ``line_of`` gives the line of a node of the
    launcher (a commented-out value's, for its source)."""
    root = root if root is not None else project_root(path)
    candidates = launcher.script_candidates(root)
    if not candidates:
        return None
    shown = shown_path(os.path.abspath(path), root)
    notebook = path.endswith(".ipynb")
    where = shown if notebook or line is None else f"{shown}:{line}"
    # One launch of a parametrized test: pytest's id of its values names it.
    variant = f"[{launcher.variant}]" if launcher.variant else ""

    def place(node: cst.CSTNode) -> str:
        return (
            f"launcher {shown}"
            if notebook or line_of is None
            else f"launcher {shown}:{line_of(node)}"
        )

    hyper = launcher.literal("hyperparameters")
    parameters_file = launcher.parameters_file
    return LaunchRecord(
        launcher=os.path.abspath(path),
        line=line or 0,
        candidates=tuple(candidates),
        job=declared_job(launcher, f"launcher {where}{variant}", place),
        hyperparameters=_literal_items(hyper),
        hyperparameters_complete=hyper is None
        or (isinstance(hyper, dict) and len(_literal_items(hyper)) == len(hyper)),
        # The files its values come from: a cached record is stale when one changes.
        dependencies=tuple(
            sorted({*launcher.files_read(), *((parameters_file,) if parameters_file else ())})
        ),
        refusal=launcher.parameters_refusal,
        column=column,
        unread=launcher.unread_files(),
    )


def linked_script(launcher: Any, path: str, line: Optional[int]) -> Optional[LinkedScript]:
    """What the estimator ``launcher``, at ``line`` of the launcher file ``path``, says about
    the script it starts; None when its ``entry_point`` cannot be read."""
    record = launch_record(launcher, path, line)
    return record.linked() if record is not None else None


def link(files: Iterable[tuple[str, str]], root: Optional[str] = None) -> list[LinkedScript]:
    """Launchers among ``(path, text)`` pairs (notebooks included) and the scripts they start.

    ``root`` is the project root; by default each launcher's own.
    """
    linked: list[LinkedScript] = []
    for path, text in files:
        for record in read_launcher(path, text, root):
            found = record.linked()
            if found is not None:
                linked.append(found)
    return linked
