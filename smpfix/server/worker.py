"""What runs in the analysis process: checks, fixes and the workspace they read.

The server hands each check to a process of its own (``analysis``): LibCST's native parser
holds the interpreter lock for seconds on a large one-line document, which froze every
thread of the server, and only a process can be stopped whatever it is doing. This module is
that process's side: it keeps what the workspace knows warm between jobs (the
configurations, the launchers of each project and the unsaved text of open launchers), runs
one job at a time, and answers with pickled results.

The processes read nothing from the editor's stream: their standard input is ``/dev/null``
and their standard output is discarded, so a launcher naming ``"parameters": "/dev/stdin"`` (or a
rule that prints) cannot take or corrupt a protocol message. They run at a lower priority
than the server, and end when the server is gone.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any, Optional, Union

from smpfix.base import safe_read
from smpfix.engine.analysis import Analysis
from smpfix.engine.config import CONFIG_FILE_NAMES, Config
from smpfix.job.linking import may_be_launcher
from smpfix.job.project import Project
from smpfix.job.shell_launcher import SHELL_SUFFIX
from smpfix.server.documents import Checked, FixedText, Snapshot, check, fix_all
from smpfix.server.launchers import Launchers, Stamp, stamp_of
from smpfix.server.reparse import Reparser
from smpfix.server.settings import ClientSettings, Configurations, DocumentSettings, resolve

# LibCST recurses in native code once per nesting level (``base.nesting`` bounds the depth for
# an 8 MiB stack); the jobs run on a thread with room to spare.
_STACK_BYTES = 64 * 1024 * 1024
# The analysis yields the processor to the server (and to the editor) when both want it.
_NICENESS = 5
_PARENT_POLL_SECONDS = 0.5
# How many documents' last analysis is kept for their fixes.
_ANALYSES_KEPT = 8
# At most this many jobs in a row run without a garbage collection between them.
_JOBS_BETWEEN_COLLECTIONS = 8


class Workspace:
    """What the jobs share: configurations and launchers, read once and kept current."""

    def __init__(self) -> None:
        self.configurations = Configurations()
        self.launchers = Launchers()
        self.reparser = Reparser()
        # Bumped whenever a file the settings or the launchers come from changed: an analysis
        # made before is not fixed from.
        self.generation = 0
        # The last analysis of each recently checked document, which its fix-all starts from.
        self.analyses: dict[str, tuple[Snapshot, ClientSettings, int, Analysis]] = {}

    def keep(self, checked: Checked, settings: ClientSettings) -> None:
        path = checked.snapshot.path
        self.analyses.pop(path, None)
        if checked.analysis is not None:
            self.analyses[path] = (checked.snapshot, settings, self.generation, checked.analysis)
            while len(self.analyses) > _ANALYSES_KEPT:
                del self.analyses[next(iter(self.analyses))]

    def analysis_of(self, snapshot: Snapshot, settings: ClientSettings) -> Optional[Analysis]:
        """The kept analysis of exactly this snapshot, checked with these settings and what
        the workspace holds now."""
        kept = self.analyses.get(snapshot.path)
        if kept is None or kept[:3] != (snapshot, settings, self.generation):
            return None
        return kept[3]

    def resolve(self, snapshot: Snapshot, settings: ClientSettings) -> DocumentSettings:
        def project_of(config: Config) -> Project:
            return self.launchers.project(snapshot.path, config)

        return resolve(snapshot.path, settings, self.configurations, project_of)

    def refresh(self) -> None:
        """Before a check: launchers changed on disk since they were read are read again
        (an editor that watches no files tells nothing of them)."""
        if self.launchers.refresh():
            self.generation += 1

    def watched(self, path: str, config: Config) -> dict[str, Stamp]:
        """The files on disk the check of ``path`` read its job from (its project's launchers,
        its configuration), with their stamps when read: the server watches them."""
        watched = self.launchers.stamps(path)
        if config.path is not None:
            watched[str(config.path)] = stamp_of(str(config.path))
        return watched

    def file_changed(self, path: str, text: Optional[str]) -> frozenset[str]:
        """A file's text changed (in the editor, or on disk): the paths to re-check the
        dependents of ("*": every open document)."""
        self.generation += 1
        if os.path.basename(path) in CONFIG_FILE_NAMES:
            self.configurations.forget()
            self.launchers.forget()
            return frozenset({"*"})
        if path.endswith((".py", ".ipynb", SHELL_SUFFIX)) and self.launchers.update(path, text):
            return frozenset({"*"})
        return frozenset({path})


@dataclass(frozen=True)
class CheckJob:
    """Check a document: its findings, and where the job settings they depend on were read."""

    snapshot: Snapshot
    settings: ClientSettings

    def run(self, workspace: Workspace) -> Checked:
        workspace.refresh()
        resolved = workspace.resolve(self.snapshot, self.settings)
        checked = check(self.snapshot, resolved, workspace.reparser)
        workspace.keep(checked, self.settings)
        # The options (with the project's launchers) stay here: the server needs only where
        # the job came from, and which files to watch.
        return replace(
            checked,
            resolved=None,
            analysis=None,
            job_locations=_job_locations(checked),
            watched=workspace.watched(self.snapshot.path, resolved.config),
        )


@dataclass(frozen=True)
class FixAllJob:
    """Every safe fix of a document, as ``--apply`` would write it (nothing is written)."""

    snapshot: Snapshot
    settings: ClientSettings

    def run(self, workspace: Workspace) -> FixedText:
        workspace.refresh()
        resolved = workspace.resolve(self.snapshot, self.settings)
        return fix_all(self.snapshot, resolved, workspace.analysis_of(self.snapshot, self.settings))


@dataclass(frozen=True)
class FileChangedJob:
    """``path`` changed: ``text`` is its unsaved text, None to read it from disk."""

    path: str
    text: Optional[str] = None

    def run(self, workspace: Workspace) -> frozenset[str]:
        return workspace.file_changed(self.path, self.text)


@dataclass(frozen=True)
class BuffersJob:
    """The unsaved text of open launchers, for a process that starts after they changed."""

    texts: Mapping[str, str]

    def run(self, workspace: Workspace) -> frozenset[str]:
        for path, text in self.texts.items():
            workspace.launchers.update(path, text)
        return frozenset()


Job = Union[CheckJob, FixAllJob, FileChangedJob, BuffersJob]


def is_launcher_text(text: str) -> bool:
    """Whether an editor's text may declare a job (worth telling the analysis process)."""
    return may_be_launcher(text.encode("utf-8", "surrogatepass"))


def _job_locations(checked: Checked) -> dict[str, tuple[str, int]]:
    """Where the job sources of a checked document are (their name -> path, 1-based line):
    its launchers, and the ``[tool.smpfix.job]`` table."""
    known: dict[str, tuple[str, int]] = {}
    resolved = checked.resolved
    if resolved is None:
        return known
    project = resolved.options.project
    for link in project.launchers_of(checked.snapshot.path) if project is not None else ():
        line = 1 if link.launcher.endswith(".ipynb") else link.line
        known[link.job.source] = (link.launcher, line)
    config = resolved.config
    if config.path is not None and config.job:
        known[config.job_source] = (str(config.path), _table_line(str(config.path)))
    return known


def _table_line(path: str) -> int:
    try:
        raw = safe_read.read_regular(path, safe_read.CONFIGURATION_LIMIT)
    except OSError:
        return 1
    lines = raw.decode("utf-8", "replace").splitlines()
    # ``[tool.smpfix.job]`` in a pyproject.toml, ``[job]`` in an smpfix.toml.
    header = "[tool.smpfix.job]" if os.path.basename(path) == "pyproject.toml" else "[job]"
    for number, line in enumerate(lines, start=1):
        if line.strip().replace(" ", "") == header:
            return number
    return 1


def main(requests: int) -> None:
    """The parent of the analysis processes, started once by the server: on each byte from
    the socket ``requests``, it forks an analysis process (already warm: LibCST and the
    rules are imported here once) and sends back its pid and the socket to talk to it.

    The server never starts a process itself after this one: starting an interpreter from a
    process with threads stalls them all (a quarter of a second on a busy machine). It ends
    when the server closes ``requests``; its analysis processes end with it.
    """
    for ignored in (signal.SIGINT, signal.SIGCHLD):  # the server handles ^C; children reap
        signal.signal(ignored, signal.SIG_IGN)
    try:
        os.nice(_NICENESS)
    except OSError:
        pass
    _warm()
    server = socket.socket(fileno=requests)
    while server.recv(1):
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            server.close()
            ours.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _analysis_process(theirs.detach())
            os._exit(0)
        theirs.close()
        socket.send_fds(server, [pid.to_bytes(8, "big")], [ours.fileno()])
        ours.close()


def _warm() -> None:
    import libcst

    from smpfix.rules.registry import all_rules

    all_rules()
    libcst.parse_module("import smdistributed.modelparallel.torch as smp\n")


def _analysis_process(handle: int) -> None:
    """Jobs from the connection ``handle``, one at a time, until the server closes it or the
    process that forked this one is gone."""
    connection = Connection(handle)
    threading.Thread(target=_end_with, args=(os.getppid(),), daemon=True).start()
    threading.stack_size(_STACK_BYTES)
    worker = threading.Thread(target=_serve, args=(connection,), name="smpfix-analysis")
    worker.start()
    worker.join()


def _serve(connection: Connection) -> None:
    workspace = Workspace()
    connection.send((0, True, None))  # ready: everything is imported
    # The garbage collector runs between jobs, not inside one: a check of a large document
    # makes hundreds of thousands of nodes, and a full collection over the trees the
    # workspace keeps took a quarter of a second, inside every other re-check.
    gc.disable()
    uncollected = 0
    while True:
        try:
            ident, job = connection.recv()
        except (EOFError, OSError):
            return
        answer: tuple[int, bool, Any]
        try:
            answer = (ident, True, job.run(workspace))
        except Exception as exc:  # the server reports it; the next job runs as usual
            answer = (ident, False, f"internal error: {type(exc).__name__}: {exc}")
        try:
            connection.send(answer)
        except (EOFError, OSError):
            return
        except Exception as exc:  # a result that does not pickle
            connection.send((ident, False, f"internal error: {type(exc).__name__}: {exc}"))
        uncollected += 1
        # While the next job waits, it goes first, but never for long.
        if not connection.poll(0) or uncollected >= _JOBS_BETWEEN_COLLECTIONS:
            gc.collect()
            uncollected = 0


def _end_with(parent: int) -> None:
    """End the process when its parent is gone (the server ended, or was killed and closed
    nothing), even in the middle of a job."""
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL_SECONDS)
    os._exit(0)
