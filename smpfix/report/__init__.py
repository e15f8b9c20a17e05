"""Turning results into what a person or a CI system reads. Knows nothing of LibCST."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from smpfix.findings import FileResult, Finding

FORMATS = ("full", "concise", "json")


@dataclass(frozen=True)
class ReportOptions:
    color: bool = False
    unsafe_fixes: bool = False
    applied: bool = False


def fix_marker_applies(finding: Finding, unsafe_fixes: bool) -> bool:
    """Whether ``--apply`` (with the current ``--unsafe-fixes``) would apply this finding's fix."""
    if finding.fix is None or not finding.fix.edits:
        return False
    return finding.fix.applicability.value == "safe" or (unsafe_fixes and finding.fix.applicability.value == "unsafe")


def all_findings(results: Sequence[FileResult]) -> list[Finding]:
    return [finding for result in results for finding in result.findings]


def render(results: Sequence[FileResult], fmt: str, options: ReportOptions) -> str:
    if fmt == "json":
        from smpfix.report.json_format import render_json

        return render_json(results)
    from smpfix.report.text import render_text

    return render_text(results, concise=(fmt == "concise"), options=options)
