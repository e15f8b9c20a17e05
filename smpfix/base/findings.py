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
    """How sure a finding is that the job will break: the contract of ``--fail-on``.

    ``error``: it breaks under the configuration smpfix knows. ``warning``: it breaks if a
    setting smpfix cannot see is on (the finding says which). ``hint``: it breaks only under a
    configuration the code offers but this job does not use (the finding says which), or it is
    advice; hints are not shown and fail nothing unless asked for.
    """

    ERROR = "error"
    WARNING = "warning"
    HINT = "hint"

    def at_least(self, threshold: Severity) -> bool:
        """Whether a finding of this severity reaches ``threshold`` (``--fail-on``)."""
        return _RANKS[self] >= _RANKS[threshold]


_RANKS = {Severity.HINT: 0, Severity.WARNING: 1, Severity.ERROR: 2}


# The longest title a finding may have; a longer one is cut there and kept whole in its
# explanation.
TITLE_LIMIT = 100


def fit_title(message: str, explanation: str) -> tuple[str, str]:
    """The title and explanation a finding shows: a title on one line, cut at ``TITLE_LIMIT``
    characters (a name in it can be of any length) with the whole text leading the
    explanation, so nothing a rule said is lost."""
    title = " ".join(message.split())
    if len(title) <= TITLE_LIMIT:
        return title, explanation
    cut = title[: TITLE_LIMIT - 1].rstrip() + "…"
    return cut, f"{title} {explanation}".rstrip()


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
    """One problem at one place. ``message`` is its one-line title (at most ``TITLE_LIMIT``
    characters, as Ruff's are short); ``explanation`` says why it matters on a cluster and what
    to do; ``evidence`` lists what smpfix read to decide (job settings with their sources, the
    arithmetic, the condition a path runs under), one line each."""

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
    explanation: str = ""
    evidence: tuple[str, ...] = ()

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
    # The code of each fix applied (``fixed_count`` of them), for ``--show-fixes``.
    fixed: tuple[str, ...] = ()
    job: Optional[Mapping[str, Any]] = None
    dependencies: tuple[str, ...] = ()
