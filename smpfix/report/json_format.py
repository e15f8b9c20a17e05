"""``--format json``: one object per finding, with Ruff's field names plus severity, the
explanation and evidence under the one-line ``message``, and job facts. Hints are always
there, whatever ``--show-hints`` says: a program decides what to do with them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from smpfix.base.findings import FileResult, Finding, Position
from smpfix.base.urls import rule_url


def _location(position: Position) -> dict[str, int]:
    return {"row": position.line, "column": position.column}


def finding_to_dict(finding: Finding) -> dict[str, Any]:
    fix = None
    if finding.fix is not None:
        fix = {
            "applicability": finding.fix.applicability.value,
            "message": finding.fix.description,
            "edits": [
                {
                    "content": edit.content,
                    "location": _location(edit.start_pos),
                    "end_location": _location(edit.end_pos),
                }
                for edit in finding.fix.edits
            ],
        }
    return {
        "code": finding.code,
        "name": finding.name,
        "message": finding.message,
        "explanation": finding.explanation,
        "evidence": list(finding.evidence),
        "severity": finding.severity.value,
        "filename": finding.path,
        "cell": finding.cell,
        "location": _location(finding.start),
        "end_location": _location(finding.end),
        "fix": fix,
        "job_facts": [
            {"feature": use.feature, "state": use.state, "source": use.source}
            for use in finding.job_facts
        ],
        "url": rule_url(finding.code),
        "docs": f"smpfix explain {finding.code}",
    }


def render_json(results: Sequence[FileResult]) -> str:
    return json.dumps([finding_to_dict(f) for r in results for f in r.findings], indent=2) + "\n"
