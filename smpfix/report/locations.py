"""Where a finding is, as CI systems want it: paths relative to the working directory.

Code scanning and workflow annotations resolve paths against the repository checkout, which
is the working directory a CI step runs in; paths outside it stay absolute.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Optional
from urllib.parse import quote

from smpfix.base.findings import Finding
from smpfix.base.safe_read import CONFIGURATION_LIMIT, read_regular

# A job-fact source naming a file: "pyproject.toml [tool.smpfix.job]", "launch.py line 12",
# "launch.py:12 (estimator distribution)". The name must end in one of these suffixes.
_SOURCE_FILE = re.compile(
    r"(?P<path>[^\s:\[\]()'\"]+\.(?:py|ipynb|toml|json))(?::(?P<colon_line>\d+)|\s+(?:at\s+)?line\s+(?P<word_line>\d+))?"
)
_TABLE = re.compile(r"\[(?P<table>[A-Za-z0-9_.\-]+)\]")


def relative_path(path: str, cwd: str) -> str:
    """``path`` relative to ``cwd`` in forward slashes, or absolute when it lies outside."""
    if path == "-" or not path:
        return path
    absolute = os.path.abspath(os.path.join(cwd, path))
    try:
        relative = os.path.relpath(absolute, cwd)
    except ValueError:  # another drive on Windows
        return Path(absolute).as_posix()
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return Path(absolute).as_posix()
    return PurePosixPath(Path(relative)).as_posix()


def artifact_uri(path: str, cwd: str) -> tuple[str, bool]:
    """A SARIF artifact URI for ``path`` and whether it is relative to ``%SRCROOT%``."""
    shown = relative_path(path, cwd)
    if os.path.isabs(shown) or re.match(r"^[A-Za-z]:/", shown):
        return Path(shown).as_uri(), False
    return quote(shown, safe="/"), True


def directory_uri(cwd: str) -> str:
    uri = Path(os.path.abspath(cwd)).as_uri()
    return uri if uri.endswith("/") else uri + "/"


@dataclass(frozen=True)
class JobFactLocation:
    """A file a job fact came from, with the line it was read at when known."""

    path: str
    line: Optional[int]


def source_files(source: str, finding_path: str, cwd: str) -> list[JobFactLocation]:
    """The existing files (other than the finding's own) that a job-fact ``source`` names.

    Several launchers may configure one script (``launcher a.py:3, launcher b.py:9``). A name
    is looked up relative to the working directory, then in the finding's folder and its
    parents; a ``.toml`` name the other way round (the closest configuration file is the
    finding's). The line is the one the source quotes
    (``launch.py:12``, ``launch.py line 12``), else the line of the TOML table it names
    (``[tool.smpfix.job]``), else unknown.
    """
    own = os.path.abspath(os.path.join(cwd, finding_path))
    found_files: list[JobFactLocation] = []
    for match in _SOURCE_FILE.finditer(source):
        name = match.group("path")
        candidates = [os.path.join(cwd, name)]
        if not os.path.isabs(name):
            folder = Path(own).parent
            above = [str(parent / name) for parent in (folder, *folder.parents)]
            # A configuration file is the one closest to the finding (each file takes its
            # own), which need not be the one in the working directory.
            candidates = [*above, *candidates] if name.endswith(".toml") else candidates + above
        found = next((c for c in candidates if os.path.isfile(c)), None)
        if found is None or os.path.abspath(found) == own:
            continue
        number = match.group("colon_line") or match.group("word_line")
        line = int(number) if number else None
        table = _TABLE.match(source[match.end() :].lstrip())
        if line is None and table is not None:
            line = _table_line(found, table.group("table"))
        found_files.append(JobFactLocation(os.path.abspath(found), line))
    return found_files


def _table_line(path: str, table: str) -> Optional[int]:
    try:  # a regular file of a sane size only: the path comes from what a job source says
        text = read_regular(path, CONFIGURATION_LIMIT).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # as open() reads
    for number, line in enumerate(lines, start=1):
        if line.strip().replace(" ", "") == f"[{table}]":
            return number
    return None


def in_cell(line: int, column: int, cell: Optional[int]) -> str:
    """``"cell 2, line 4, column 5: "`` for a notebook position (whose line and column count
    inside the cell, not in the ``.ipynb`` file), else ``""``."""
    return "" if cell is None else f"cell {cell}, line {line}, column {column}: "


def finding_location(finding: Finding) -> str:
    """``path:line:col``, or in a notebook ``path:cell 2:line:col`` (as Ruff writes a notebook
    position): where the terminal output and ``--add-noqa`` say a finding is."""
    cell = "" if finding.cell is None else f"cell {finding.cell}:"
    return f"{finding.path}:{cell}{finding.start.line}:{finding.start.column}"
