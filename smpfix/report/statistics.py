"""``--statistics``: how often each rule fired, instead of the findings themselves.

The text layout is Ruff's: count, code, a ``[*]`` marker when ``--apply`` (with the current
``--unsafe-fixes``) would fix some of them, the rule name, and how many are fixable. With
``--format json`` the same table is a JSON list.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from smpfix.base.findings import FileResult
from smpfix.report import ReportOptions, fix_marker_applies


@dataclass(frozen=True)
class RuleCount:
    code: str
    name: str
    count: int
    fixable: int


def rule_counts(results: Sequence[FileResult], unsafe_fixes: bool) -> list[RuleCount]:
    """Per rule, most frequent first (then by code)."""
    counts: dict[str, list[int]] = {}
    names: dict[str, str] = {}
    for result in results:
        for finding in result.findings:
            entry = counts.setdefault(finding.code, [0, 0])
            entry[0] += 1
            entry[1] += fix_marker_applies(finding, unsafe_fixes)
            names[finding.code] = finding.name
    rows = [
        RuleCount(code, names[code], count, fixable) for code, (count, fixable) in counts.items()
    ]
    return sorted(rows, key=lambda row: (-row.count, row.code))


def render_statistics(results: Sequence[FileResult], fmt: str, options: ReportOptions) -> str:
    rows = rule_counts(results, options.unsafe_fixes)
    if fmt == "json":
        table = [
            {
                "code": r.code,
                "name": r.name,
                "count": r.count,
                "fixable": r.fixable > 0,
                "fixable_count": r.fixable,
            }
            for r in rows
        ]
        return json.dumps(table, indent=2) + "\n"
    if not rows:
        return ""
    count_width = max(len(str(row.count)) for row in rows)
    code_width = max(len(row.code) for row in rows)
    any_fixable = any(row.fixable for row in rows)
    lines = []
    for row in rows:
        marker = ("[*] " if row.fixable else "[ ] ") if any_fixable else ""
        fixable = f" ({row.fixable} fixable)" if row.fixable else ""
        lines.append(
            f"{row.count:>{count_width}}\t{row.code:<{code_width}}\t{marker}{row.name}{fixable}"
        )
    return "\n".join(lines) + "\n"
