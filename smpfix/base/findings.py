"""The data every layer passes on: findings, their fixes, and the text edits of a fix.

Everything here is immutable and knows nothing of LibCST, so the report layer and the cache
can handle findings without importing the parser.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional


class Severity(str, enum.Enum):
    """How sure a finding is that the job will break.

    ``error`` means the configuration that makes it break is known; ``warning`` that it is
    unknown (the message then says "if ..."); ``hint`` is advice that never fails a job.
    """

    ERROR = "error"
    WARNING = "warning"
    HINT = "hint"


class Applicability(str, enum.Enum):
    """Ruff's fix applicability: what ``--apply`` may do without a person looking."""

    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY_ONLY = "display-only"


@dataclass(frozen=True, order=True)
class Position:
    """A 1-based line and 1-based column (in characters), as Ruff reports them."""

    line: int
    column: int


@dataclass(frozen=True)
class Edit:
    """Replace the text between two character offsets of the decoded source."""

    start: int
    end: int
    content: str
    start_pos: Position
    end_pos: Position

    def overlaps(self, other: Edit) -> bool:
        if self.start == self.end == other.start == other.end:
            return True
        return self.start < other.end and other.start < self.end


@dataclass(frozen=True)
class Fix:
    """A rewrite that resolves one finding; all its edits are applied together or not at all."""

    applicability: Applicability
    description: str
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class JobFactUse:
    """A job setting a finding depended on, with where smpfix learned its value."""

    feature: str
    state: str
    source: str


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    message: str
    path: str
    start: Position
    end: Position
    severity: Severity
    fix: Optional[Fix] = None
    job_facts: tuple[JobFactUse, ...] = field(default=())
    # For notebooks: the 1-based cell number; positions are then inside that cell.
    cell: Optional[int] = None

    @property
    def sort_key(self) -> tuple[str, int, int, int, str]:
        return (self.path, self.cell or 0, self.start.line, self.start.column, self.code)


@dataclass(frozen=True)
class FileError:
    """A file that could not be analyzed, or a rule that crashed on it.

    Reported as ``path:line:col: error: message`` (``location``); counted as exit code 2.
    """

    path: str
    message: str
    line: int = 1
    column: int = 1
    code: Optional[str] = None
    # For a notebook cell, its 1-based number (counting every cell); line and column are in it.
    cell: Optional[int] = None

    @property
    def location(self) -> str:
        """``path:line:col``, or ``nb.ipynb:cell 4:1:5`` in a notebook cell."""
        cell = f":cell {self.cell}" if self.cell is not None else ""
        return f"{self.path}{cell}:{self.line}:{self.column}"


@dataclass(frozen=True)
class FileResult:
    """Everything one file produced.

    ``text`` is the text the findings' positions refer to (kept only when there are
    findings, for code frames); ``new_text`` and ``original_text`` are set when fixes
    changed the file (for ``--diff`` and stdin). ``dependencies`` are the other files the
    analysis looked for or read (sibling modules), for the result cache.
    """

    path: str
    findings: tuple[Finding, ...] = ()
    errors: tuple[FileError, ...] = ()
    fixed_count: int = 0
    new_text: Optional[str] = None
    original_text: Optional[str] = None
    text: Optional[str] = None
    job: Optional[Mapping[str, Any]] = None
    dependencies: tuple[str, ...] = ()
