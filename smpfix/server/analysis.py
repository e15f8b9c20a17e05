"""The analysis process, seen from the server: one job at a time, stopped when nobody waits.

Checks and fixes run in a child process (``worker``), so that nothing a document costs can
stop the server from reading the next message: LibCST's native parser holds the interpreter
lock (a 2 MB one-line document froze a server that checked on a thread for 22 s), and only a
process can be ended whatever it is doing. Jobs wait in a queue and go to the process one at a
time; the process keeps its caches between them.

A job is given up (the process killed, and started again for the next job) when:

- nobody wants its result any more (its document changed or closed, the request was
  cancelled) and it has run for ``STALE_GRACE_SECONDS`` (a quick job is let finish: a new
  process starts with empty caches);
- it has run for ``CHECK_SECONDS``: ``AnalysisFailed`` says so;
- the server ends (``stop``): at once, whatever runs.

A job nobody wants any more by the time its turn comes is not sent at all. A process that
dies (killed for memory, crashed in native code) fails its job with ``AnalysisFailed``; the
next job starts a new one.

Analysis processes are forked, already warm, by one process the server starts once
(``worker.main``): starting an interpreter from the server, whose threads it stalls, held up
pings for a quarter of a second on a busy machine. That process runs its own interpreter
with a boot line that takes the current folder off ``sys.path`` before anything is imported
(as ``python -P`` does), so that no module of the user's project can shadow one smpfix
imports.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Callable, Optional

from smpfix.server.worker import BuffersJob, Job

# A check running this long is given up: the editor shows why, and the other documents wait
# no longer for it.
CHECK_SECONDS = 30.0
STALE_GRACE_SECONDS = 0.5
# How often a running job's watcher looks whether it is still wanted.
_WATCH_SECONDS = 0.05
_BOOT = (
    "import sys\n"
    "if sys.path and sys.path[0] in ('', '.'): del sys.path[0]\n"
    "from smpfix.server.worker import main\n"
    "main(int(sys.argv[1]))\n"
)


class AnalysisFailed(Exception):
    """A job that did not finish: the reason, for the editor's log."""


class Stale(Exception):
    """A job given up because nobody wants its result any more."""


@dataclass
class _Queued:
    job: Job
    wanted: Callable[[], bool]
    limit: float
    result: asyncio.Future[Any]


class _Spawner:
    """The process that forks analysis processes (``worker.main``), started on first need.

    Used from the threads of ``_Process`` (a lock keeps their requests apart).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._popen: Optional[subprocess.Popen[bytes]] = None
        self._socket: Optional[socket.socket] = None

    def spawn(self) -> tuple[int, int]:
        """A new analysis process: its pid, and the descriptor of a socket connected to it."""
        with self._lock:
            if self._socket is None or self._popen is None or self._popen.poll() is not None:
                self._start()
            assert self._socket is not None
            self._socket.sendall(b"+")
            message, fds, _, _ = socket.recv_fds(self._socket, 8, 1)
            if len(message) != 8 or not fds:
                for fd in fds:
                    os.close(fd)
                raise OSError("the process that starts it ended")
            return int.from_bytes(message, "big"), fds[0]

    def stop(self) -> None:
        if self._popen is not None:
            self._popen.kill()

    def _start(self) -> None:
        if self._socket is not None:
            self._socket.close()
        ours, theirs = socket.socketpair()
        try:
            self._popen = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
            )
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        self._socket = ours


class _Process:
    """One analysis process: its connection, and the answers it owes.

    The server's loop never waits on it: it is asked for, written to and read from on
    threads of its own (writing a large document to a process that is slow to read it must
    not hold up a ping).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, spawner: _Spawner) -> None:
        self.loop = loop
        self.ready: asyncio.Future[None] = _future(loop)
        self.answers: dict[int, asyncio.Future[Any]] = {}
        self.ended = False
        # Whether it was told the unsaved text of open launchers.
        self.primed = False
        self._spawner = spawner
        self._pid: Optional[int] = None
        self._killed = False
        self._gone = False
        self._outbox: queue.SimpleQueue[Optional[tuple[int, Job]]] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="smpfix-analysis-answers", daemon=True).start()

    def ask(self, ident: int, job: Job) -> asyncio.Future[Any]:
        answer = self.answers[ident] = _future(self.loop)
        self._outbox.put((ident, job))
        return answer

    def kill(self) -> None:
        self._killed = True
        # Once its connection ended, the process is gone (and reaped): its pid may be another's.
        if self._pid is not None and not self._gone:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except OSError:
                pass

    def _run(self) -> None:
        """Have the process started, then take its answers as they come, then its end."""
        try:
            self._pid, fd = self._spawner.spawn()
        except OSError as exc:
            self._post(self._ended, f"it could not start: {exc}")
            return
        if self._killed:
            self.kill()
        connection = Connection(fd)
        threading.Thread(
            target=self._write, args=(connection,), name="smpfix-analysis-jobs", daemon=True
        ).start()
        try:
            while True:
                self._post(self._answered, *connection.recv())
        except (EOFError, OSError):
            self._gone = True
        except Exception:  # an answer that does not unpickle: this process is done for
            self.kill()
            self._gone = True
        self._post(self._ended, "")
        self._outbox.put(None)

    def _write(self, connection: Connection) -> None:
        while True:
            item = self._outbox.get()
            if item is None:
                break
            try:
                connection.send(item)
            except OSError:  # the process is gone: ``_run`` fails its answers
                break
        connection.close()

    def _post(self, callback: Callable[..., None], *args: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the server's loop is closed: it is ending
            pass

    def _answered(self, ident: int, ok: bool, value: Any) -> None:
        if ident == 0:
            if not self.ready.done():
                self.ready.set_result(None)
            return
        answer = self.answers.pop(ident, None)
        if answer is None or answer.done():
            return
        if ok:
            answer.set_result(value)
        else:
            answer.set_exception(AnalysisFailed(str(value)))

    def _ended(self, how: str) -> None:
        self.ended = True
        failure = AnalysisFailed(f"the analysis process ended{f': {how}' if how else ''}")
        for answer in [self.ready, *self.answers.values()]:
            if not answer.done():
                answer.set_exception(failure)
        self.answers.clear()


def _future(loop: asyncio.AbstractEventLoop) -> asyncio.Future[Any]:
    """A future whose failure nobody has to read: a job given up leaves its answer unread."""
    future = loop.create_future()
    future.add_done_callback(lambda done: done.cancelled() or done.exception())
    return future


class Analysis:
    """The queue of jobs and the process that runs them.

    ``buffers`` gives the unsaved text of open launchers, sent to every new process first.
    """

    def __init__(self, buffers: Callable[[], Mapping[str, str]]) -> None:
        self._buffers = buffers
        self._queue: Optional[asyncio.Queue[_Queued]] = None
        self._runner: Optional[asyncio.Task[None]] = None
        self._process: Optional[_Process] = None
        self._spawner = _Spawner()
        self._ids = itertools.count(1)

    def start(self) -> None:
        """Start the process now (on the server's loop), so that the first check finds it ready."""
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._runner = asyncio.ensure_future(self._run_queue())
        if self._process is None:
            self._process = _Process(asyncio.get_running_loop(), self._spawner)

    async def run(
        self, job: Job, wanted: Callable[[], bool] = lambda: True, limit: Optional[float] = None
    ) -> Any:
        """``job``'s result. Raises ``Stale`` when ``wanted()`` turned false and the job was
        given up, ``AnalysisFailed`` when it could not finish. Cancelling the caller cancels
        the job (as ``wanted`` turning false does)."""
        self.start()
        assert self._queue is not None
        result: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Queued(job, wanted, limit or CHECK_SECONDS, result))
        return await result

    def stop(self) -> None:
        """End the process now, whatever it runs; the server is ending."""
        if self._process is not None:
            self._process.kill()
            self._process = None
        self._spawner.stop()
        if self._runner is not None:
            self._runner.cancel()

    async def _run_queue(self) -> None:
        assert self._queue is not None
        while True:
            queued = await self._queue.get()
            if queued.result.done():
                continue
            if not queued.wanted():
                queued.result.set_exception(Stale())
                continue
            try:
                value = await self._run_one(queued)
            except (AnalysisFailed, Stale) as failure:
                if not queued.result.done():
                    queued.result.set_exception(failure)
                continue
            if not queued.result.done():
                queued.result.set_result(value)

    async def _run_one(self, queued: _Queued) -> Any:
        process = await self._ready()
        answer = process.ask(next(self._ids), queued.job)
        loop = asyncio.get_running_loop()
        started = loop.time()
        while True:
            await asyncio.wait({answer}, timeout=_WATCH_SECONDS)
            if answer.done():
                return answer.result()
            ran = loop.time() - started
            if ran >= STALE_GRACE_SECONDS and (queued.result.done() or not queued.wanted()):
                self._kill(process)
                raise Stale()
            if ran >= queued.limit:
                self._kill(process)
                raise AnalysisFailed(f"not analyzed within {queued.limit:g} s")

    async def _ready(self) -> _Process:
        """The running process, started (and told the open launchers' text) if needed."""
        if self._process is None or self._process.ended:
            self._process = _Process(asyncio.get_running_loop(), self._spawner)
        process = self._process
        await process.ready
        if not process.primed:
            process.primed = True
            buffers = dict(self._buffers())
            if buffers:
                await process.ask(next(self._ids), BuffersJob(buffers))
        return process

    def _kill(self, process: _Process) -> None:
        process.kill()
        if self._process is process:
            self._process = None
