"""Applying fixes until nothing fixable changes, never keeping a result that does not parse.

Each round applies every eligible fix whose edits do not overlap an earlier one, then the
new text is parsed and checked again: a fix may enable another, and overlapping fixes get
their turn in the next round. If a round's result does not parse, every change is thrown
away, the file stays exactly as it was, and the rules whose fixes broke it are reported as
internal errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from smpfix.base.findings import Applicability, Edit, FileError, Finding, Severity
from smpfix.engine.analysis import Analysis, AnalysisOptions, analyze, parse

MAX_ROUNDS = 10


@dataclass(frozen=True)
class FixOutcome:
    text: str
    analysis: Analysis
    applied: int
    errors: tuple[FileError, ...] = ()
    # The code of each fix applied, in the order applied (``--show-fixes``).
    fixed: tuple[str, ...] = ()


def eligible(finding: Finding, unsafe: bool, hints: bool = True) -> bool:
    """Whether ``--apply`` writes this finding's fix: a safe one, an unsafe one with
    ``--unsafe-fixes``; a hint's only when hints are shown (``hints``), since a fix nobody was
    shown is not one to write."""
    if finding.fix is None or not finding.fix.edits:
        return False
    if not hints and finding.severity is Severity.HINT:
        return False
    if finding.fix.applicability is Applicability.SAFE:
        return True
    return unsafe and finding.fix.applicability is Applicability.UNSAFE


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """Apply non-overlapping edits (any order given) to ``text``."""
    pieces: list[str] = []
    cursor = 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        pieces.append(text[cursor : edit.start])
        pieces.append(edit.content)
        cursor = edit.end
    pieces.append(text[cursor:])
    return "".join(pieces)


def select_fixes(
    findings: Sequence[Finding], unsafe: bool, path: str | None = None, hints: bool = True
) -> list[Finding]:
    """The fixes to apply together: eligible, in file order, none overlapping another.

    Only findings in ``path`` qualify: a finding reported in another file (a helper module)
    has offsets into that file's text, not this one's.
    """
    chosen: list[Finding] = []
    taken: list[Edit] = []
    for finding in sorted(findings, key=lambda f: f.sort_key):
        if (path is not None and finding.path != path) or not eligible(finding, unsafe, hints):
            continue
        assert finding.fix is not None
        if any(edit.overlaps(other) for edit in finding.fix.edits for other in taken):
            continue
        chosen.append(finding)
        taken.extend(finding.fix.edits)
    return chosen


def fix_text(
    text: str,
    path: str,
    options: AnalysisOptions,
    unsafe: bool = False,
    first: Analysis | None = None,
    hints: bool = True,
) -> FixOutcome:
    """Apply fixes to ``text`` until it converges (at most ``MAX_ROUNDS`` rounds)."""
    analysis = first if first is not None else analyze(text, path, options)
    original, original_analysis = text, analysis
    fixed: list[str] = []
    errors: list[FileError] = []
    for _ in range(MAX_ROUNDS):
        chosen = select_fixes(analysis.findings, unsafe, path, hints)
        if not chosen:
            break
        candidate = apply_edits(text, [edit for finding in chosen for edit in finding.fix.edits])  # type: ignore[union-attr]
        if candidate == text:
            break
        module, error = parse(candidate, path)
        if module is None:
            codes = sorted({finding.code for finding in chosen})
            detail = error.message if error is not None else "unparsable result"
            errors.extend(
                FileError(
                    path,
                    f"internal error in rule {code}: its fix produced code that does not parse"
                    f" ({detail}); file left unchanged",
                    code=code,
                )
                for code in codes
            )
            return FixOutcome(
                text=original, analysis=original_analysis, applied=0, errors=tuple(errors)
            )
        text = candidate
        fixed.extend(finding.code for finding in chosen)
        analysis = analyze(text, path, options)
    return FixOutcome(
        text=text, analysis=analysis, applied=len(fixed), errors=tuple(errors), fixed=tuple(fixed)
    )
