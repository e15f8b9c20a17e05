"""``--format junit``: JUnit XML for CI test reports; one test case per checked file.

A file with findings at or above ``--fail-on`` is a failing test case with one ``<failure>``
per such finding (its title, then its explanation and evidence); a file that
could not be analyzed carries an ``<error>``; a clean file is a passing test case, so the
report counts what was checked. Characters XML 1.0 cannot hold are replaced.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from typing import Optional

from smpfix.base.findings import FileResult, Finding
from smpfix.report.locations import relative_path

_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: str) -> str:
    return _INVALID_XML.sub("\ufffd", text)


def _testcase(result: FileResult, failing: Sequence[Finding], cwd: str) -> ET.Element:
    path = _clean(relative_path(result.path, cwd))
    case = ET.Element("testcase", {"name": path, "classname": "smpfix", "file": path})
    for error in result.errors:
        element = ET.SubElement(
            case,
            "error",
            {"message": _clean(error.message), "type": error.code or "analysis-error"},
        )
        element.text = _clean(f"{path}:{error.line}:{error.column}: {error.message}")
    for finding in failing:
        attributes = {
            "message": _clean(f"{finding.code} {finding.name}: {finding.message}"),
            "type": finding.code,
        }
        element = ET.SubElement(case, "failure", attributes)
        where = f"cell {finding.cell}:" if finding.cell is not None else ""
        details = [finding.explanation, *finding.evidence]
        element.text = _clean(
            f"{path}:{where}{finding.start.line}:{finding.start.column}: {finding.code} "
            f"{finding.severity.value}: {finding.message}"
            + "".join(f"\n{line}" for line in details if line)
        )
    return case


def render_junit(
    results: Sequence[FileResult], fails: Callable[[Finding], bool], cwd: Optional[str] = None
) -> str:
    """Failures for the findings at or above ``--fail-on`` only: a file with hints alone
    passes, as the exit code does."""
    cwd = cwd or os.getcwd()
    failing = [[f for f in result.findings if fails(f)] for result in results]
    cases = [_testcase(result, found, cwd) for result, found in zip(results, failing)]
    failures = sum(1 for result, found in zip(results, failing) if found and not result.errors)
    errors = sum(1 for result in results if result.errors)
    counts = {
        "tests": str(len(cases)),
        "failures": str(failures),
        "errors": str(errors),
        "skipped": "0",
    }
    suites = ET.Element("testsuites", {"name": "smpfix", **counts})
    suite = ET.SubElement(suites, "testsuite", {"name": "smpfix", **counts})
    suite.extend(cases)
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )
