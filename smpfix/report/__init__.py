"""Turning results into what a person or a CI system reads. Knows nothing of LibCST.

May import the rules' metadata (registry, pages), job facts and base findings; never the engine."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Optional

from smpfix.base.findings import FileResult, Finding, Severity

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
    # ``--show-hints`` (or ``--fail-on hint``): the text formats show hints too.
    show_hints: bool = False
    # ``--fail-on``: the least severity that exits 1 and that GitHub and JUnit report.
    fail_on: Severity = Severity.WARNING
    # ``--show-fixes``: after ``--apply``, list what was fixed.
    show_fixes: bool = False

    def fails(self, finding: Finding) -> bool:
        """Whether this finding fails the build (exit 1, a JUnit failure, a GitHub annotation)."""
        return finding.severity.at_least(self.fail_on)

    def shows(self, finding: Finding) -> bool:
        """Whether a person reading ``full`` or ``concise`` output sees this finding."""
        return self.show_hints or finding.severity is not Severity.HINT


def shown(results: Sequence[FileResult], options: ReportOptions) -> list[FileResult]:
    """The results with the findings ``options`` does not show left out."""
    return [
        replace(result, findings=tuple(f for f in result.findings if options.shows(f)))
        for result in results
    ]


def hidden_hints(results: Sequence[FileResult], options: ReportOptions) -> int:
    return sum(1 for result in results for f in result.findings if not options.shows(f))


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

        return render_github(results, options.fails)
    if fmt == "junit":
        from smpfix.report.junit import render_junit

        return render_junit(results, options.fails)
    from smpfix.report.text import render_text

    return render_text(shown(results, options), concise=(fmt == "concise"), options=options)
