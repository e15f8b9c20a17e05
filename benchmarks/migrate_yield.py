"""How much of real SMP v1 code ``smpfix migrate`` moves mechanically.

    python benchmarks/migrate_yield.py DIR [DIR ...]          # a table per directory, then all
    python benchmarks/migrate_yield.py --json DIR [DIR ...]   # one JSON object

Each directory is migrated as ``smpfix migrate DIR`` would (its configuration, discovery and
launcher search; nothing is written), and every job is counted by its items' outcomes: moved
mechanically, scaffolded (v2 shape written with a ``TODO``) or reported (left for a person). A
job kept on v1 by a blocking item counts its items as it would move them once the blocker is
resolved, and is also counted as blocked; "moved now" counts only the jobs that moved. The
shares are of items, per job and over all jobs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from smpfix.engine.config import resolve
from smpfix.engine.discovery import Excluder, discover
from smpfix.engine.launcher_index import LauncherSearch
from smpfix.engine.migration import migrate_files
from smpfix.job.project import Project
from smpfix.migrate.items import Outcome
from smpfix.migrate.run import JobMigration, MigrationRun


@dataclass(frozen=True)
class Tally:
    """Items by outcome, over one job or many."""

    moved: int = 0
    scaffold: int = 0
    report: int = 0
    jobs: int = 0
    blocked: int = 0
    errors: int = 0
    # Moved items of the jobs that did move (a blocked job moves nothing yet).
    moved_now: int = 0

    @property
    def items(self) -> int:
        return self.moved + self.scaffold + self.report

    def share(self, count: int) -> str:
        return f"{count / self.items:.0%}" if self.items else "-"

    def __add__(self, other: Tally) -> Tally:
        return Tally(
            self.moved + other.moved,
            self.scaffold + other.scaffold,
            self.report + other.report,
            self.jobs + other.jobs,
            self.blocked + other.blocked,
            self.errors + other.errors,
            self.moved_now + other.moved_now,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "blocked": self.blocked,
            "errors": self.errors,
            "items": self.items,
            "moved": self.moved,
            "scaffold": self.scaffold,
            "report": self.report,
            "moved_now": self.moved_now,
        }


def job_tally(job: JobMigration) -> Tally:
    outcomes = [item.outcome for item in job.items]
    moved = outcomes.count(Outcome.MOVED)
    return Tally(
        moved,
        outcomes.count(Outcome.SCAFFOLD),
        outcomes.count(Outcome.REPORT),
        1,
        int(job.blocked),
        moved_now=0 if job.blocked else moved,
    )


def migrate_directory(folder: str) -> MigrationRun:
    """``smpfix migrate folder`` without writing, as the command finds files and launchers."""
    config = resolve([folder], None)
    tasks = list(
        discover([folder], Excluder(config.exclude, config.root), config.respect_gitignore)
    )
    return migrate_files(
        tasks, Project.of((folder,)), config.declared_jobs(), LauncherSearch.of(config)
    )


def _row(name: str, tally: Tally) -> str:
    return (
        f"{name[:60]:60} {tally.items:5} {tally.share(tally.moved):>6} "
        f"{tally.share(tally.scaffold):>8} {tally.share(tally.report):>6}"
        f" {tally.share(tally.moved_now):>9}"
        + ("  kept on v1" if tally.blocked and tally.jobs == 1 else "")
    )


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    options = parser.parse_args(argv)
    overall = Tally()
    document: dict[str, Any] = {"folders": {}}
    lines = [f"{'job':60} {'items':>5} {'moved':>6} {'scaffold':>8} {'report':>6} {'moved now':>9}"]
    for folder in options.folders:
        run = migrate_directory(folder)
        total = Tally(errors=len(run.errors))
        jobs = {}
        for job in run.jobs:
            tally = job_tally(job)
            total += tally
            jobs[job.name] = tally.to_json()
            lines.append(_row(os.path.relpath(job.name, folder), tally))
        lines.append(_row(f"= {folder} ({total.jobs} jobs, {total.blocked} kept on v1)", total))
        document["folders"][folder] = {"jobs": jobs, "total": total.to_json()}
        overall += total
    lines.append(_row(f"= overall ({overall.jobs} jobs, {overall.blocked} kept on v1)", overall))
    document["overall"] = overall.to_json()
    print(json.dumps(document, indent=2) if options.json else "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
