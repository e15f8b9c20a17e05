"""The analysis process collects garbage between jobs, not inside one: a full collection over
the trees of a large document took a quarter of a second of every other re-check. Garbage a
job leaves (reference cycles) must still go once the answer is sent."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from dataclasses import dataclass
from multiprocessing import Pipe
from typing import Any

from smpfix.server import worker

_LEFT: list[weakref.ref[Any]] = []
_DURING: list[bool] = []


class _Cycle(dict):  # type: ignore[type-arg]
    """A dict that holds itself: only the collector can free it."""

    def __init__(self) -> None:
        super().__init__()
        self["itself"] = self


@dataclass(frozen=True)
class _CycleJob:
    """A job that leaves a reference cycle behind, and notes whether the collector was on."""

    def run(self, workspace: object) -> str:
        _DURING.append(gc.isenabled())
        _LEFT.append(weakref.ref(_Cycle()))
        return "done"


def test_a_job_runs_without_the_collector_and_its_cycles_go_after_it() -> None:
    ours, theirs = Pipe()
    serving = threading.Thread(target=worker._serve, args=(theirs,))
    serving.start()
    try:
        assert ours.recv() == (0, True, None)  # ready
        ours.send((1, _CycleJob()))
        assert ours.recv() == (1, True, "done")
        # Nothing waits: the process collects right after answering (a bounded wait for that
        # event, not a measure of its speed).
        deadline = time.monotonic() + 30
        while _LEFT[0]() is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _LEFT[0]() is None
        ours.send((2, _CycleJob()))
        assert ours.recv() == (2, True, "done")
        assert _DURING == [False, False]
    finally:
        ours.close()
        serving.join(timeout=10)
        gc.enable()
