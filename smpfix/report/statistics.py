"""``--statistics``: how often each rule fired, instead of the findings themselves.

The text layout is Ruff's: count, code, severity, a ``[*]`` marker when ``--apply`` (with the
current ``--unsafe-fixes``) would fix some of them, the rule name, and how many are fixable; a
rule whose findings differ in severity has a row per severity. The text counts the findings
the text formats show (hints with ``--show-hints``); ``--format json`` gives the same table as
a JSON list, with every finding.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from smpfix.base.findings import FileResult
from smpfix.report import ReportOptions, fix_marker_applies, shown


@dataclass(frozen=True)
class RuleCount:
    code: str
    name: str
    severity: str
    count: int
    fixable: int


def rule_counts(results: Sequence[FileResult], unsafe_fixes: bool) -> list[RuleCount]:
    """Per rule and severity, most frequent first (then by code, errors before warnings)."""
    counts: dict[tuple[str, str], list[int]] = {}
    names: dict[str, str] = {}
    for result in results:
        for finding in result.findings:
            entry = counts.setdefault((finding.code, finding.severity.value), [0, 0])
            entry[0] += 1
            entry[1] += fix_marker_applies(finding, unsafe_fixes)
            names[finding.code] = finding.name
    rows = [
        RuleCount(code, names[code], severity, count, fixable)
        for (code, severity), (count, fixable) in counts.items()
    ]
    order = {"error": 0, "warning": 1, "hint": 2}
    return sorted(rows, key=lambda row: (-row.count, row.code, order[row.severity]))


def render_statistics(results: Sequence[FileResult], fmt: str, options: ReportOptions) -> str:
    if fmt == "json":
        rows = rule_counts(results, options.unsafe_fixes)
        table = [
            {
                "code": r.code,
                "name": r.name,
                "severity": r.severity,
                "count": r.count,
                "fixable": r.fixable > 0,
                "fixable_count": r.fixable,
            }
            for r in rows
        ]
        return json.dumps(table, indent=2) + "\n"
    rows = rule_counts(shown(results, options), options.unsafe_fixes)
    if not rows:
        return ""
    count_width = max(len(str(row.count)) for row in rows)
    code_width = max(len(row.code) for row in rows)
    severity_width = max(len(row.severity) for row in rows)
    any_fixable = any(row.fixable for row in rows)
    lines = []
    for row in rows:
        marker = ("[*] " if row.fixable else "[ ] ") if any_fixable else ""
        fixable = f" ({row.fixable} fixable)" if row.fixable else ""
        lines.append(
            f"{row.count:>{count_width}}\t{row.code:<{code_width}}\t"
            f"{row.severity:<{severity_width}}\t{marker}{row.name}{fixable}"
        )
    return "\n".join(lines) + "\n"
