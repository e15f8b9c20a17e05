"""Turning results into what a person or a CI system reads. Knows nothing of LibCST.

May import the rules' metadata (registry, pages), job facts and base findings; never the engine."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from smpfix.base.findings import FileResult, Finding

# Formats a program reads: nothing else may go to their stream, and no progress bar is shown.
MACHINE_FORMATS = frozenset({"json", "json-lines", "sarif", "github", "junit"})
# Formats ``--statistics`` can be printed in (the table as text, or as JSON).
STATISTICS_FORMATS = ("full", "concise", "json")


@dataclass(frozen=True)
class ReportOptions:
    color: bool = False
    unsafe_fixes: bool = False
    applied: bool = False
    statistics: bool = False
    # Where the report goes (``--output-file``); None for standard output.
    output_file: Optional[str] = None


def fix_marker_applies(finding: Finding, unsafe_fixes: bool) -> bool:
    """Whether ``--apply`` (with the current ``--unsafe-fixes``) would apply this finding's fix."""
    if finding.fix is None or not finding.fix.edits:
        return False
    return finding.fix.applicability.value == "safe" or (
        unsafe_fixes and finding.fix.applicability.value == "unsafe"
    )


def render(results: Sequence[FileResult], fmt: str, options: ReportOptions) -> str:
    """The report in ``fmt``; with ``options.statistics``, the per-rule counts instead."""
    if options.statistics:
        from smpfix.report.statistics import render_statistics

        return render_statistics(results, fmt, options)
    if fmt == "json":
        from smpfix.report.json_format import render_json

        return render_json(results)
    if fmt == "json-lines":
        from smpfix.report.json_lines import render_json_lines

        return render_json_lines(results)
    if fmt == "sarif":
        from smpfix.report.sarif import render_sarif

        return render_sarif(results)
    if fmt == "github":
        from smpfix.report.github import render_github

        return render_github(results)
    if fmt == "junit":
        from smpfix.report.junit import render_junit

        return render_junit(results)
    from smpfix.report.text import render_text

    return render_text(results, concise=(fmt == "concise"), options=options)
