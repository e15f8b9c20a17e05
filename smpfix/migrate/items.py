"""What a migration says about each change it made or could not make.

A team deciding whether to trust a migration needs, per change, one of three answers: smpfix
moved it and nothing is left to do; smpfix wrote the v2 shape but a person must finish it (a
``TODO`` comment marks the place); or smpfix left the v1 code as it was and a person must move
it. Every item links the v2 page that says how.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Outcome(str, enum.Enum):
    MOVED = "moved"
    SCAFFOLD = "scaffold"
    REPORT = "report"


@dataclass(frozen=True)
class MigrationItem:
    """One change, or one thing a person must do, at a line of the file before migration.

    ``blocking`` marks what v2 cannot run at all until a person changes the design (pipeline
    parallelism, TensorFlow, the Trainer integration), and v1 code smpfix could not move, which
    keeps its file on v1: a job with a blocking item is not moved, its files only gain ``TODO``
    comments, so it keeps working under v1 meanwhile.
    """

    path: str
    line: int
    outcome: Outcome
    topic: str
    message: str
    link: str
    blocking: bool = False


@dataclass(frozen=True)
class FileMigration:
    """A file's text before and after, with what the migration says about it.

    ``after == before`` when nothing in the file moved; the items may still report work.
    """

    path: str
    before: str
    after: str
    items: tuple[MigrationItem, ...]

    @property
    def needs_a_person(self) -> bool:
        return any(item.outcome is not Outcome.MOVED for item in self.items)
