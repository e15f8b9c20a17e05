"""``-v``/``--verbose``: what a run decided and why, as Ruff's debug lines on stderr.

A run says which configuration file it read, which files it found and which the prefilter
skipped, which results came from the cache, which launcher gave each script its job, and how
long each stage took. Off by default, and then free: no ``logging`` import on a plain run
(about 5 ms of start-up), one boolean test per message, and the messages of a loop are built
only when they are written. Only the main process writes (workers never do), so lines never
interleave.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

_on = False


def enable() -> None:
    """Write debug lines from now on (the ``-v`` flag; for the rest of the process)."""
    global _on
    _on = True


def enabled() -> bool:
    return _on


def debug(where: str, message: str) -> None:
    """One line, ``[date][time][smpfix::where][DEBUG] message``, when verbose output is on."""
    if not _on:
        return
    now = time.time()
    stamp = time.strftime("[%Y-%m-%d][%H:%M:%S", time.localtime(now))
    sys.stderr.write(f"{stamp}.{int(now % 1 * 1000):03d}][smpfix::{where}][DEBUG] {message}\n")


@contextmanager
def timed(where: str, what: str) -> Iterator[None]:
    """Say how long the block took (``what took 12.3 ms``), when verbose output is on."""
    if not _on:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        debug(where, f"{what} took {(time.perf_counter() - start) * 1000:.1f} ms")
