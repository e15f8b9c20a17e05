"""``--format sarif``: SARIF 2.1.0 for code scanning dashboards (GitHub, Azure DevOps, ...).

One run. The driver lists the rules that have results, as Ruff does, each a
``reportingDescriptor`` with its one-line summary, what it detects (the first paragraph of its
page in ``rules/``) and ``helpUri``, the address of its page on the documentation site.
Each finding is a ``result`` located relative to ``%SRCROOT%`` (the working directory, which
is the checkout in CI), with 1-based lines and columns counted in Unicode code points
(``columnKind``), and its fix as ``artifactChanges``. A finding that depends on a job
setting read from another file (``pyproject.toml``, a launcher) points there through
``relatedLocations``. Files smpfix could not analyze become tool execution notifications.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any, Optional

from smpfix import __version__
from smpfix.base.findings import Edit, FileError, FileResult, Finding, Position
from smpfix.base.urls import rule_url
from smpfix.job.jobfacts import FEATURES
from smpfix.report.locations import artifact_uri, directory_uri, in_cell, source_files

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
INFORMATION_URI = "https://github.com/smpfix/smpfix"
SRCROOT = "%SRCROOT%"

LEVELS = {"error": "error", "warning": "warning", "hint": "note"}


def _plain(markdown: str) -> str:
    """One paragraph of page Markdown as plain text: lines joined, code ticks dropped."""
    return re.sub(r"\s+", " ", markdown.replace("`", "")).strip()


def _descriptor(row: dict[str, Any]) -> dict[str, Any]:
    """A rule as Ruff describes one: its one-line summary, what it detects (the first
    paragraph of its page) and a short help that points at the page, which holds the rest.
    The page is not embedded: with it, a log of 25 findings was a megabyte."""
    from smpfix.rules.pages import parse_page, read_page

    code = row["code"]
    url = rule_url(code)
    summary = row["summary"] or row["name"]
    page_text = read_page(code)
    detects = (
        parse_page(code, page_text).sections.get("What it detects", "").strip() if page_text else ""
    )
    detects = detects.split("\n\n", 1)[0].strip()
    return {
        "id": code,
        "name": row["name"],
        "shortDescription": {"text": _plain(summary)},
        "fullDescription": {"text": _plain(detects or summary)},
        "help": {
            "text": f"{_plain(summary)} See {url} (or smpfix explain {code}).",
            "markdown": f"{summary} See [the rule's page]({url}) (or `smpfix explain {code}`).",
        },
        "defaultConfiguration": {"level": LEVELS[row["default_severity"]]},
        "helpUri": url,
        "properties": {"fix": row["fix"], "dependsOn": list(row["depends_on"])},
    }


def _region(start: Position, end: Position) -> dict[str, int]:
    return {
        "startLine": start.line,
        "startColumn": start.column,
        "endLine": end.line,
        "endColumn": end.column,
    }


def _artifact(path: str, cwd: str) -> dict[str, str]:
    uri, relative = artifact_uri(path, cwd)
    return {"uri": uri, "uriBaseId": SRCROOT} if relative else {"uri": uri}


def _replacement(edit: Edit) -> dict[str, Any]:
    return {
        "deletedRegion": _region(edit.start_pos, edit.end_pos),
        "insertedContent": {"text": edit.content},
    }


def _related(finding: Finding, cwd: str) -> list[dict[str, Any]]:
    """Where the job settings the finding depended on were read, when that is another file."""
    related: list[dict[str, Any]] = []
    for use in finding.job_facts:
        feature = FEATURES[use.feature].title if use.feature in FEATURES else use.feature
        for found in source_files(use.source, finding.path, cwd):
            location: dict[str, Any] = {"artifactLocation": _artifact(found.path, cwd)}
            if found.line is not None:
                location["region"] = {"startLine": found.line}
            message = f"{feature}: {use.state} ({use.source})"
            related.append(
                {"id": len(related) + 1, "physicalLocation": location, "message": {"text": message}}
            )
    return related


def _result(finding: Finding, rule_index: Optional[int], cwd: str) -> dict[str, Any]:
    """One result. A notebook finding's line and column count inside its cell, not in the
    ``.ipynb`` file, so it is located at the file, says its cell in the message, and carries
    no replacements (their regions would point into the notebook's JSON)."""
    location: dict[str, Any] = {"artifactLocation": _artifact(finding.path, cwd)}
    if finding.cell is None:
        location["region"] = _region(finding.start, finding.end)
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "level": LEVELS[finding.severity.value],
        "message": {
            "text": in_cell(finding.start.line, finding.start.column, finding.cell)
            + finding.message
        },
        "locations": [{"physicalLocation": location}],
    }
    if rule_index is not None:
        result["ruleIndex"] = rule_index
    if finding.fix is not None and finding.fix.edits and finding.cell is None:
        result["fixes"] = [
            {
                "description": {"text": finding.fix.description},
                "artifactChanges": [
                    {
                        "artifactLocation": _artifact(finding.path, cwd),
                        "replacements": [_replacement(e) for e in finding.fix.edits],
                    }
                ],
                "properties": {"applicability": finding.fix.applicability.value},
            }
        ]
    related = _related(finding, cwd)
    if related:
        result["relatedLocations"] = related
    properties: dict[str, Any] = {"name": finding.name, "severity": finding.severity.value}
    if finding.explanation:
        properties["explanation"] = finding.explanation
    if finding.evidence:
        properties["evidence"] = list(finding.evidence)
    if finding.cell is not None:
        properties["cell"] = {
            "cell": finding.cell,
            "line": finding.start.line,
            "column": finding.start.column,
        }
    if finding.job_facts:
        properties["jobFacts"] = [
            {"feature": u.feature, "state": u.state, "source": u.source} for u in finding.job_facts
        ]
    result["properties"] = properties
    return result


def _notification(error: FileError, cwd: str) -> dict[str, Any]:
    notification: dict[str, Any] = {
        "level": "error",
        "message": {"text": error.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": _artifact(error.path, cwd),
                    "region": {"startLine": error.line, "startColumn": error.column},
                }
            }
        ],
    }
    if error.code is not None:
        notification["associatedRule"] = {"id": error.code}
    return notification


def sarif_log(results: Sequence[FileResult], cwd: Optional[str] = None) -> dict[str, Any]:
    """The SARIF log as a JSON-ready dict (``render_sarif`` serializes it)."""
    from smpfix.rules.registry import rule_table

    cwd = cwd or os.getcwd()
    reported = {f.code for result in results for f in result.findings}
    rules = [_descriptor(row) for row in rule_table() if row["code"] in reported]
    index = {rule["id"]: position for position, rule in enumerate(rules)}
    errors = [error for result in results for error in result.errors]
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "smpfix",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": INFORMATION_URI,
                "rules": rules,
            }
        },
        "invocations": [
            {
                "executionSuccessful": not errors,
                "toolExecutionNotifications": [_notification(e, cwd) for e in errors],
            }
        ],
        "originalUriBaseIds": {SRCROOT: {"uri": directory_uri(cwd)}},
        "columnKind": "unicodeCodePoints",
        "results": [
            _result(f, index.get(f.code), cwd) for result in results for f in result.findings
        ],
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def render_sarif(results: Sequence[FileResult], cwd: Optional[str] = None) -> str:
    return json.dumps(sarif_log(results, cwd), indent=2, ensure_ascii=False) + "\n"
