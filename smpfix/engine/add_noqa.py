"""``--add-noqa``: suppress every current finding in place, to adopt smpfix on an old codebase.

Each finding gets ``# smpfix: ignore[CODE]`` where the analysis looks for it: at the end of
the line the finding starts on, or, when that line cannot end in a comment (it ends inside a
multi-line string, or continues with a backslash), at the end of the first line of its
statement. Codes for one line are merged into one directive, and into an ``# smpfix:
ignore[...]`` already there; other comments on the line stay. The result is analyzed again
before it is written: a finding that is still reported (no line where a comment would reach
it) gets no comment at all, since that comment would be an unused suppression, and is
reported instead. SMP900 findings are never suppressed this way; their fix removes the stale
comment. Files are written atomically, keeping their encoding, BOM and newlines.
"""

from __future__ import annotations

import io
import tokenize
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Optional

from smpfix.base import source
from smpfix.base.findings import Edit, FileError, FileResult, Finding
from smpfix.engine.runner import RunOptions, check_text
from smpfix.suppressions import comments as suppression
from smpfix.suppressions.edits import LineTable, addition
from smpfix.suppressions.unused import CODE as UNUSED_SUPPRESSION

_SPANNING = {tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER}


@dataclass(frozen=True)
class Unsuppressed:
    finding: Finding
    reason: str


@dataclass(frozen=True)
class NoqaOutcome:
    """What ``--add-noqa`` did to one file."""

    path: str
    added: int = 0
    unsuppressed: tuple[Unsuppressed, ...] = ()
    errors: tuple[FileError, ...] = ()


@dataclass(frozen=True)
class _Lines:
    blocked: frozenset[int]
    statement_start: Mapping[int, int]


def _lines(text: str) -> _Lines:
    """Lines that cannot end in a comment, and the first line of each line's logical line."""
    blocked: set[int] = set()
    starts: dict[int, int] = {}
    current: Optional[int] = None
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type not in _SPANNING and token.start[0] < token.end[0]:
                blocked.update(range(token.start[0], token.end[0]))
            if token.type in (tokenize.INDENT, tokenize.DEDENT) or (
                current is None and token.type in (tokenize.NL, tokenize.COMMENT)
            ):
                continue
            if current is None:
                current = token.start[0]
            if token.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                for line in range(current, token.end[0] + 1):
                    starts[line] = current
                current = None
    except (tokenize.TokenError, SyntaxError):
        pass  # the analysis parsed this text; a tokenizer disagreement only costs the fallback line
    table = LineTable(text)
    for line in range(1, len(table.starts) + 1):
        start, end, _ = table.line_bounds(line)
        if table.text[start:end].endswith("\\"):
            blocked.add(line)
    return _Lines(frozenset(blocked), starts)


def _target_line(finding: Finding, lines: _Lines) -> Optional[int]:
    for line in (
        finding.start.line,
        lines.statement_start.get(finding.start.line, finding.start.line),
    ):
        if line not in lines.blocked:
            return line
    return None


def suppression_edit(text: str, finding: Finding) -> Optional[Edit]:
    """The edit that suppresses ``finding`` alone (the editor's "suppress on this line"):
    ``# smpfix: ignore[CODE]`` where the analysis looks for it, merged into a directive the
    line already has; None when no line the analysis reads for it can end in a comment."""
    line = _target_line(finding, _lines(text))
    if line is None:
        return None
    return addition(LineTable(text), line, suppression.parse(text).get(line, ()), [finding.code])


def with_suppressions(
    text: str, findings: Sequence[Finding]
) -> tuple[str, int, list[Unsuppressed]]:
    """``text`` with a suppression for each of ``findings``; the number of directives written
    (new or extended), and the findings no comment can reach."""
    from smpfix.engine.fixing import apply_edits

    lines = _lines(text)
    codes_by_line: dict[int, set[str]] = {}
    unreachable: list[Unsuppressed] = []
    for finding in findings:
        line = _target_line(finding, lines)
        if line is None:
            unreachable.append(
                Unsuppressed(
                    finding, "its line and its statement's first line cannot end in a comment"
                )
            )
            continue
        codes_by_line.setdefault(line, set()).add(finding.code)
    table = LineTable(text)
    existing = suppression.parse(text)
    edits = [
        addition(table, line, existing.get(line, ()), codes)
        for line, codes in sorted(codes_by_line.items())
    ]
    return apply_edits(text, edits), len(edits), unreachable


def _key(finding: Finding) -> tuple[str, int, int]:
    return (finding.code, finding.start.line, finding.start.column)


def add_to_file(result: FileResult, options: RunOptions, writable: bool = True) -> NoqaOutcome:
    """Suppress ``result``'s findings (from a run with ``options``) in its file."""
    findings = [
        f for f in result.findings if f.code != UNUSED_SUPPRESSION and f.path == result.path
    ]
    if not findings:
        return NoqaOutcome(result.path)
    if result.path.endswith(".ipynb"):
        return NoqaOutcome(
            result.path,
            unsuppressed=tuple(
                Unsuppressed(f, "notebooks are not edited by --add-noqa") for f in findings
            ),
        )
    if not writable:
        reason = "the file is a link to a file outside the checked tree (name it explicitly)"
        return NoqaOutcome(
            result.path, unsuppressed=tuple(Unsuppressed(f, reason) for f in findings)
        )
    try:
        src = source.read(result.path)
    except source.SourceError as exc:
        return NoqaOutcome(
            result.path, errors=(FileError(result.path, exc.message, exc.line, exc.column),)
        )
    check_options = replace(options, apply=False, diff=False)
    pending = findings
    unsuppressed: list[Unsuppressed] = []
    for _ in range(2):
        new_text, added, unreachable = with_suppressions(src.text, pending)
        checked = check_text(new_text, result.path, check_options)
        if any(error.code is None for error in checked.errors):
            reason = (
                "the file cannot be checked again as Python source,"
                " so a comment there is not known to work"
            )
            return NoqaOutcome(
                result.path, unsuppressed=tuple(Unsuppressed(f, reason) for f in findings)
            )
        again = {_key(f) for f in checked.findings}
        still = [
            f for f in pending if _key(f) in again and f not in {u.finding for u in unreachable}
        ]
        unsuppressed.extend(unreachable)
        if not still:
            break
        unsuppressed.extend(
            Unsuppressed(f, "no line the analysis reads for it can take the comment") for f in still
        )
        pending = [
            f for f in pending if f not in still and f not in {u.finding for u in unreachable}
        ]
    else:
        return NoqaOutcome(
            result.path,
            unsuppressed=tuple(
                Unsuppressed(f, "the suppressions did not converge") for f in findings
            ),
        )
    if added == 0 or new_text == src.text:
        return NoqaOutcome(result.path, unsuppressed=tuple(unsuppressed))
    try:
        source.write_atomic(src, new_text)
    except source.SourceError as exc:
        return NoqaOutcome(result.path, errors=(FileError(result.path, exc.message),))
    return NoqaOutcome(result.path, added, tuple(unsuppressed))
