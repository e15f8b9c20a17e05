"""What one ``smpfix migrate`` run did, job by job: the report's and the command line's input.

Kept apart from the driver (``smpfix.engine.migration``) so the report renders a run without
LibCST or the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from smpfix.base.findings import FileError
from smpfix.migrate.items import FileMigration, MigrationItem, Outcome


@dataclass(frozen=True)
class JobMigration:
    """One job's move: where it is launched, its files, what was done and what is left."""

    name: str
    files: tuple[str, ...]
    items: tuple[MigrationItem, ...]
    # The v2 container proposed for the launcher ("PyTorch 2.4.1, py311 (SMP 2.7.0)"), or None.
    container: Optional[str] = None

    @property
    def blocked(self) -> bool:
        return any(item.blocking for item in self.items)

    @property
    def needs_a_person(self) -> bool:
        return self.blocked or any(item.outcome is not Outcome.MOVED for item in self.items)


@dataclass(frozen=True)
class MigrationRun:
    """Every job, every file that changes (before and after), and the files that could not be
    read or parsed (reported, and left out; the others are still migrated)."""

    jobs: tuple[JobMigration, ...]
    files: tuple[FileMigration, ...]
    errors: tuple[FileError, ...] = ()

    @property
    def needs_a_person(self) -> bool:
        return any(job.needs_a_person for job in self.jobs)
