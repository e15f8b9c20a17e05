"""``--format junit``: JUnit XML for CI test reports; one test case per checked file.

A file with findings is a failing test case with one ``<failure>`` per finding; a file that
could not be analyzed carries an ``<error>``; a clean file is a passing test case, so the
report counts what was checked. Characters XML 1.0 cannot hold are replaced.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Optional

from smpfix.base.findings import FileResult
from smpfix.report.locations import relative_path

_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: str) -> str:
    return _INVALID_XML.sub("\ufffd", text)


def _testcase(result: FileResult, cwd: str) -> ET.Element:
    path = _clean(relative_path(result.path, cwd))
    case = ET.Element("testcase", {"name": path, "classname": "smpfix", "file": path})
    for error in result.errors:
        element = ET.SubElement(
            case,
            "error",
            {"message": _clean(error.message), "type": error.code or "analysis-error"},
        )
        element.text = _clean(f"{path}:{error.line}:{error.column}: {error.message}")
    for finding in result.findings:
        attributes = {
            "message": _clean(f"{finding.code} {finding.name}: {finding.message}"),
            "type": finding.code,
        }
        element = ET.SubElement(case, "failure", attributes)
        where = f"cell {finding.cell}:" if finding.cell is not None else ""
        element.text = _clean(
            f"{path}:{where}{finding.start.line}:{finding.start.column}: {finding.code} "
            f"{finding.severity.value}: {finding.message}"
        )
    return case


def render_junit(results: Sequence[FileResult], cwd: Optional[str] = None) -> str:
    cwd = cwd or os.getcwd()
    cases = [_testcase(result, cwd) for result in results]
    failures = sum(1 for result in results if result.findings and not result.errors)
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
