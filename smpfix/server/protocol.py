"""smpfix's findings and edits in the Language Server Protocol's terms.

smpfix counts lines from 1 and columns from 1 in characters; LSP counts both from 0, and
columns in the code units the client and server agreed on (UTF-16 unless the client offers
UTF-8 or UTF-32). Lines end at ``\\r\\n``, ``\\r`` or ``\\n`` on both sides.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Optional

from lsprotocol import types

from smpfix.base.findings import Edit, Finding, Position, Severity
from smpfix.base.urls import rule_url
from smpfix.job.jobfacts import FEATURES

SOURCE = "smpfix"
SEVERITIES = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.HINT: types.DiagnosticSeverity.Hint,
}
_NEWLINE = re.compile(r"\r\n|\r|\n")
_AT_LINE = re.compile(r"\bat line (\d+)\b")


class Lines:
    """A text's lines, to turn smpfix positions into LSP positions in ``encoding``."""

    def __init__(self, text: str, encoding: Optional[str] = None) -> None:
        self.lines = _NEWLINE.split(text)
        self.encoding = encoding or types.PositionEncodingKind.Utf16

    def position(self, position: Position) -> types.Position:
        line = min(max(position.line - 1, 0), len(self.lines) - 1)
        before = self.lines[line][: max(position.column - 1, 0)]
        return types.Position(line=line, character=_units(before, self.encoding))

    def range(self, start: Position, end: Position) -> types.Range:
        return types.Range(start=self.position(start), end=self.position(end))

    def offset_range(self, text: str, start: int, end: int) -> types.Range:
        """The range of ``text[start:end]`` (``text`` being the text these lines are of)."""
        return self.range(_position_at(text, start), _position_at(text, end))


def _units(text: str, encoding: str) -> int:
    if encoding == types.PositionEncodingKind.Utf32:
        return len(text)
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def _position_at(text: str, offset: int) -> Position:
    starts = [0, *(match.end() for match in _NEWLINE.finditer(text, 0, offset))]
    return Position(len(starts), offset - starts[-1] + 1)


def diagnostic(
    finding: Finding,
    lines: Lines,
    related: Sequence[types.DiagnosticRelatedInformation] = (),
    details_inline: bool = False,
) -> types.Diagnostic:
    """The finding's title as the diagnostic's message; its explanation and evidence go in
    ``related`` (``explanation_information``), or below the title when the client cannot show
    related information (``details_inline``)."""
    message = finding.message
    if finding.fix is not None and finding.fix.applicability.value == "unsafe":
        message += " (an unsafe fix is available)"
    if details_inline:
        message += "".join(f"\n{line}" for line in (finding.explanation, *finding.evidence) if line)
    return types.Diagnostic(
        range=lines.range(finding.start, finding.end),
        severity=SEVERITIES[finding.severity],
        code=finding.code,
        code_description=types.CodeDescription(href=rule_url(finding.code)),
        source=SOURCE,
        message=message,
        related_information=list(related) or None,
    )


def text_edits(edits: Sequence[Edit], lines: Lines) -> list[types.TextEdit]:
    return [
        types.TextEdit(range=lines.range(edit.start_pos, edit.end_pos), new_text=edit.content)
        for edit in edits
    ]


def explanation_information(
    finding: Finding, uri: str, lines: Lines
) -> list[types.DiagnosticRelatedInformation]:
    """The finding's explanation and evidence, each an entry at the finding itself."""
    here = types.Location(uri=uri, range=lines.range(finding.start, finding.end))
    return [
        types.DiagnosticRelatedInformation(location=here, message=line)
        for line in (finding.explanation, *finding.evidence)
        if line
    ]


def related_information(
    finding: Finding, known: Mapping[str, types.Location], uri: Optional[str], lines: Lines
) -> list[types.DiagnosticRelatedInformation]:
    """Where each job setting the finding depends on was read: a launcher's estimator, the
    ``[tool.smpfix.job]`` table, the script's own ``smp.init({...})`` dict or evidence line.

    ``known`` maps the names smpfix gives its sources (``launcher launch.py:12``) to where they
    are; a source in the document ``uri`` names its line (``smp.init({...}) at line 7``).
    """
    found: list[types.DiagnosticRelatedInformation] = []
    for use in finding.job_facts:
        location = _locate(use.source, known, uri, lines)
        if location is None:
            continue
        feature = FEATURES.get(use.feature)
        title = feature.title if feature is not None else use.feature
        found.append(
            types.DiagnosticRelatedInformation(
                location=location, message=f"{title}: {use.state} ({use.source})"
            )
        )
    return found


def _locate(
    source: str, known: Mapping[str, types.Location], uri: Optional[str], lines: Lines
) -> Optional[types.Location]:
    for name, location in sorted(known.items(), key=lambda item: -len(item[0])):
        if name in source:
            return location
    match = _AT_LINE.search(source)
    if (
        uri is not None
        and match is not None
        and not source.startswith(("launcher ", "library default"))
    ):
        line = int(match.group(1))
        return types.Location(uri=uri, range=lines.range(Position(line, 1), Position(line, 1)))
    return None


def line_location(uri: str, line: int) -> types.Location:
    """A location at the start of ``line`` (1-based) of another file."""
    here = types.Position(line=max(line - 1, 0), character=0)
    return types.Location(uri=uri, range=types.Range(start=here, end=here))
