"""``--format github``: GitHub Actions workflow commands, one annotation per finding.

``::error file=train.py,line=7,col=13,endLine=7,endColumn=62,title=SMP101 NAME::message``
(NAME: the rule's name, ``optimizer-before-distributed-model``; the message is the finding's
one-line title); errors are ``::error``, warnings ``::warning`` and hints (with
``--fail-on hint``) ``::notice``. Findings below ``--fail-on`` are not annotated. GitHub decodes
``%25``, ``%0D`` and ``%0A`` in the message, and additionally ``%3A`` and ``%2C`` in properties,
whose values are otherwise cut at ``:`` and ``,``. Files smpfix could not analyze are
``::error`` annotations too, so a CI log shows them where the findings are.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Optional

from smpfix.base.findings import FileError, FileResult, Finding
from smpfix.report.locations import in_cell, relative_path

COMMANDS = {"error": "error", "warning": "warning", "hint": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _properties(items: Sequence[tuple[str, object]]) -> str:
    return ",".join(f"{key}={escape_property(str(value))}" for key, value in items)


def annotation(finding: Finding, cwd: str) -> str:
    """A notebook finding annotates the file (its line counts inside a cell) and names the cell."""
    items: list[tuple[str, object]] = [("file", relative_path(finding.path, cwd))]
    if finding.cell is None:
        items += [
            ("line", finding.start.line),
            ("col", finding.start.column),
            ("endLine", finding.end.line),
            ("endColumn", finding.end.column),
        ]
    items.append(("title", f"{finding.code} {finding.name}"))
    message = in_cell(finding.start.line, finding.start.column, finding.cell) + finding.message
    return f"::{COMMANDS[finding.severity.value]} {_properties(items)}::{escape_data(message)}"


def error_annotation(error: FileError, cwd: str) -> str:
    items = [
        ("file", relative_path(error.path, cwd)),
        ("line", error.line),
        ("col", error.column),
        ("title", "smpfix could not analyze this file"),
    ]
    return f"::error {_properties(items)}::{escape_data(error.message)}"


def render_github(
    results: Sequence[FileResult], fails: Callable[[Finding], bool], cwd: Optional[str] = None
) -> str:
    """Annotations for the findings that fail the build (``--fail-on``): a hint below the
    threshold would be a notice on a pull request that nothing asked for."""
    cwd = cwd or os.getcwd()
    lines: list[str] = []
    for result in results:
        lines.extend(error_annotation(error, cwd) for error in result.errors)
        lines.extend(annotation(finding, cwd) for finding in result.findings if fails(finding))
    return "".join(line + "\n" for line in lines)
