"""Rendering ``smpfix migrate``'s report: per job, what moved and what needs a person.

Each job gets its files, its status (moved to v2; moved with work left; kept on v1 because
something blocks it), the container proposed, the counts by outcome with the share that moved
mechanically, and every item with its place, topic, message and the v2 page that says how.
JSON carries the same (schema ``version`` 1, documented in docs/migrate.md).
"""

from __future__ import annotations

import difflib
import io
import json
import shutil
from collections.abc import Sequence
from typing import Any, Optional

from smpfix.migrate.items import MigrationItem, Outcome
from smpfix.migrate.run import JobMigration, MigrationRun

SCHEMA_VERSION = 1
_STYLES = {Outcome.MOVED: "green", Outcome.SCAFFOLD: "yellow", Outcome.REPORT: "red"}


def status(job: JobMigration) -> str:
    """``moved``, ``needs-a-person`` (moved, with work left) or ``kept-on-v1`` (blocked)."""
    if job.blocked:
        return "kept-on-v1"
    return "needs-a-person" if job.needs_a_person else "moved"


def counts(items: Sequence[MigrationItem]) -> dict[str, int]:
    return {outcome.value: sum(item.outcome is outcome for item in items) for outcome in Outcome}


def moved_share(job: JobMigration) -> Optional[float]:
    """The share of a job's changes that moved mechanically (none moved when it is blocked);
    None for a job with no change at all."""
    if not job.items:
        return None
    moved = 0 if job.blocked else counts(job.items)[Outcome.MOVED.value]
    return moved / len(job.items)


def unified_diff(path: str, before: str, after: str) -> str:
    """The unified diff of one file, every line ending in a newline (as ``--diff`` prints)."""
    chunks = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{path.lstrip('/')}",
        tofile=f"b/{path.lstrip('/')}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in chunks)


def render_migration_json(run: MigrationRun) -> str:
    every = [item for job in run.jobs for item in job.items]
    moved = sum(
        item.outcome is Outcome.MOVED for job in run.jobs if not job.blocked for item in job.items
    )
    document: dict[str, Any] = {
        "version": SCHEMA_VERSION,
        "jobs": [_job_json(job) for job in run.jobs],
        "changed_files": [
            {"path": file.path, "diff": unified_diff(file.path, file.before, file.after)}
            for file in run.files
        ],
        "errors": [
            {"path": e.path, "line": e.line, "column": e.column, "message": e.message}
            for e in run.errors
        ],
        "summary": {
            "jobs": len(run.jobs),
            "changes": len(every),
            **counts(every),
            "moved_mechanically": moved,
            "moved_share": round(moved / len(every), 4) if every else None,
            "needs_a_person": run.needs_a_person,
        },
    }
    return json.dumps(document, indent=2) + "\n"


def _job_json(job: JobMigration) -> dict[str, Any]:
    share = moved_share(job)
    return {
        "name": job.name,
        "files": list(job.files),
        "status": status(job),
        "container": job.container,
        "counts": counts(job.items),
        "moved_share": round(share, 4) if share is not None else None,
        "items": [
            {
                "path": item.path,
                "line": item.line,
                "outcome": item.outcome.value,
                "topic": item.topic,
                "message": item.message,
                "link": item.link,
                "blocking": item.blocking,
            }
            for item in sorted(job.items, key=_order)
        ],
    }


def _order(item: MigrationItem) -> tuple[str, int, str]:
    return (item.path, item.line, item.topic)


def render_migration_text(run: MigrationRun, color: bool, width: Optional[int] = None) -> str:
    from rich.console import Console
    from rich.markup import escape

    buffer = io.StringIO()
    console = Console(
        file=buffer,
        force_terminal=color,
        no_color=not color,
        width=width or max(shutil.get_terminal_size((120, 24)).columns, 80),
        highlight=False,
        color_system="standard" if color else None,
        soft_wrap=True,
    )
    if not run.jobs:
        console.print("No SMP v1 job found to migrate.")
    for job in run.jobs:
        console.print(f"[bold]Job {escape(job.name)}[/]: {escape(', '.join(job.files))}")
        console.print(f"  {_headline(job)}")
        if job.container is not None:
            console.print(f"  proposed container: {escape(job.container)}")
        for item in sorted(job.items, key=_order):
            mark = " (blocking)" if item.blocking else ""
            # Nothing of a blocked job was rewritten: what is mechanical waits for the blockers.
            outcome = (
                "would move"
                if job.blocked and item.outcome is Outcome.MOVED
                else item.outcome.value
            )
            console.print(
                f"  {escape(item.path)}:{item.line}: [{_STYLES[item.outcome]}]"
                f"{outcome}[/]{mark} {escape(item.topic)}: {escape(item.message)}"
                f" <{escape(item.link)}>"
            )
        console.print()
    console.print(_summary(run))
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


def _headline(job: JobMigration) -> str:
    found = counts(job.items)
    tally = ", ".join(f"{found[outcome.value]} {outcome.value}" for outcome in Outcome)
    share = moved_share(job)
    if share is None:
        return "nothing to change"
    moved = 0 if job.blocked else found[Outcome.MOVED.value]
    line = f"{moved} of {len(job.items)} changes moved mechanically ({share:.0%}); {tally}"
    if job.blocked:
        blocking = sum(item.blocking for item in job.items)
        return (
            f"kept on SMP v1: {blocking} blocking item(s) to resolve first (TODO comments"
            f" added); {line}"
        )
    return line


def _summary(run: MigrationRun) -> str:
    every = [item for job in run.jobs for item in job.items]
    moved = sum(
        item.outcome is Outcome.MOVED for job in run.jobs if not job.blocked for item in job.items
    )
    share = f" ({moved / len(every):.0%})" if every else ""
    people = sum(job.needs_a_person for job in run.jobs)
    return (
        f"{len(run.jobs)} job(s): {moved} of {len(every)} changes moved mechanically{share};"
        f" {people} job(s) need a person; {len(run.files)} file(s) change"
    )
