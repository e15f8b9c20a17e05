"""A progress bar on standard error while many files are checked in a terminal.

It is shown only for the formats a person reads, only when standard error is a terminal,
and only for runs large enough to take a noticeable while; it disappears when the run ends,
so the report that follows is what stays on the screen. Machine formats and redirected
output never get it, whatever the size of the run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Optional, TextIO

from smpfix.base.findings import FileResult

# Below this many files a run is over before a bar would be worth drawing.
MIN_FILES = 50


def wanted(total: int, machine_format: bool, quiet: bool, stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return total >= MIN_FILES and not machine_format and not quiet and bool(isatty and isatty())


@contextmanager
def progress_bar(total: int, enabled: bool) -> Iterator[Optional[Callable[[FileResult], None]]]:
    """Yields the callback that advances the bar (None when no bar is shown)."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("smpfix checking"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("check", total=total)
        yield lambda result: bar.advance(task)
