"""SMP900: suppression comments that suppress nothing.

A stale ``# smpfix: ignore[SMP301]`` left after the guard was fixed silences the next real
finding on that line without anyone noticing. After the other rules' findings have been
matched against the file's suppressions, every code a comment names is judged:

- used: a finding with that code was suppressed by this comment;
- unused: its rule ran on this file and suppressed nothing, or no rule has that code;
- not judged: its rule did not run on this file (deselected, per-file-ignored, not
  applicable, or crashed), since a run with another selection may need it.

A file-level ``# smpfix: ignore-file[...]`` is judged code by code the same way, a prefix
(``SMP2``) as the codes it names: used when it silenced one of them, unused when one of them
ran and none was deselected. A comment that only looks like a file-level suppression
(``smpfix.suppressions.comments.FileLevelProblem``) is reported as a warning, without a
fix: smpfix never rewrites a comment it does not understand.

A bare ``# smpfix: ignore`` names every rule, so it is judged only when every rule was
enabled for the file and at least one ran (a rule that does not apply to the file cannot
report on it under any selection). A comment that names SMP900 itself is never reported,
and a directive's SMP900 finding is silenced by another directive on its line naming SMP900.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Optional

from smpfix.base.findings import Applicability, Finding, Fix, Position, Severity
from smpfix.suppressions.comments import FILE_LEVEL, FileLevelProblem, Suppression
from smpfix.suppressions.edits import LineTable, removal

CODE = "SMP900"
NAME = "unused-suppression"


@dataclass(frozen=True)
class SuppressionUse:
    """What the run learned about suppressions: which code each used directive silenced."""

    used: frozenset[tuple[Suppression, str]]
    ran: frozenset[str]
    known: frozenset[str]
    # Whether a blanket ``# smpfix: ignore`` can be judged (see ``suppression_use``).
    all_enabled: bool
    # The codes enabled for the file (a file-level prefix is judged only when all its are).
    enabled: frozenset[str] = frozenset()


def _self_exempt(item: Suppression) -> bool:
    return item.codes is not None and CODE in item.codes


def _unused_codes(item: Suppression, use: SuppressionUse) -> list[str]:
    assert item.codes is not None
    if item.kind == FILE_LEVEL:
        return sorted(code for code in item.codes if _unused_prefix(item, code, use))
    return sorted(
        code
        for code in item.codes
        if (item, code) not in use.used and (code not in use.known or code in use.ran)
    )


def _unused_prefix(item: Suppression, prefix: str, use: SuppressionUse) -> bool:
    """Whether a file-level code or prefix silenced nothing though its rules could report:
    one of them ran, and none was deselected (another selection may need the comment)."""
    named = {code for code in use.known if code.startswith(prefix)}
    if any(used == item and code.startswith(prefix) for used, code in use.used):
        return False
    return bool(named & use.ran) and named <= use.enabled


def _message(item: Suppression, unused: Optional[list[str]], use: SuppressionUse) -> str:
    """The title: which codes the directive names in vain."""
    if unused is None:
        return "unused blanket suppression: no finding here to suppress"
    if item.kind == FILE_LEVEL:
        return f"unused file-level suppression of {_codes(unused)}"
    stale = [code for code in unused if code in use.known]
    unknown = [code for code in unused if code not in use.known]
    parts = []
    if stale:
        parts.append(f"unused suppression of {_codes(stale)}")
    if unknown:
        parts.append(
            f"{'unknown rule' if len(unknown) == 1 else 'unknown rules'} {_codes(unknown)}"
        )
    return f"{' and '.join(parts)} in a suppression comment"


def _codes(codes: list[str]) -> str:
    shown = ", ".join(codes[:3])
    return shown if len(codes) <= 3 else f"{shown} and {len(codes) - 3} more"


def _explanation(item: Suppression, unused: Optional[list[str]], use: SuppressionUse) -> str:
    """Why a directive that suppresses nothing is worth removing, for each kind of code."""
    if unused is None:
        return (
            f"`{item.comment}` suppresses nothing: no rule reports on this line or on the"
            " statement it begins. A blanket suppression would silently hide every future finding"
            " here; remove it."
        )
    stale = [code for code in unused if code in use.known]
    unknown = [code for code in unused if code not in use.known]
    sentences = []
    if item.kind == FILE_LEVEL:
        codes = ", ".join(unused)
        return (
            f"`{item.comment}` suppresses nothing for {codes}: no such finding in this file. A"
            f" stale file-level suppression would silently hide the next real {codes} problem"
            " anywhere in the file; remove the code."
        )
    if stale:
        codes = ", ".join(stale)
        sentences.append(
            f"`{item.comment}` suppresses nothing for {codes}: no such finding starts on this line"
            " or on the statement it begins. A stale suppression would silently hide the next real"
            f" {codes} problem here; remove the code."
        )
    if unknown:
        codes = ", ".join(unknown)
        rule = "is not an smpfix rule" if len(unknown) == 1 else "are not smpfix rules"
        sentences.append(
            f"`{item.comment}` names {codes}, which {rule} (a typo, or a rule that was removed),"
            " so it suppresses nothing; remove the code."
        )
    return " ".join(sentences)


def _finding(
    item: Suppression, unused: Optional[list[str]], use: SuppressionUse, table: LineTable, path: str
) -> Finding:
    whole = unused is None or set(unused) >= set(item.codes or ())
    edit = removal(table, item, None if unused is None else unused)
    fix = None
    if edit is not None:
        description = (
            "Remove the unused suppression comment"
            if whole
            else f"Remove {', '.join(unused or ())} from the suppression comment"
        )
        fix = Fix(Applicability.SAFE, description, (edit,))
    start = Position(item.line, item.column)
    return Finding(
        code=CODE,
        name=NAME,
        message=_message(item, unused, use),
        explanation=_explanation(item, unused, use),
        path=path,
        start=start,
        end=Position(item.line, item.column + len(item.comment)),
        severity=Severity.HINT,
        fix=fix,
    )


def unused_suppression_findings(
    text: str, path: str, by_line: Mapping[int, tuple[Suppression, ...]], use: SuppressionUse
) -> list[Finding]:
    """SMP900 findings for the directives in ``by_line`` (as ``suppression.parse(text)`` gives)."""
    table: Optional[LineTable] = None
    findings: list[Finding] = []
    for line in sorted(by_line):
        on_line = by_line[line]
        for item in on_line:
            if _self_exempt(item):
                continue
            if any(other is not item and _self_exempt(other) for other in on_line):
                continue
            unused: Optional[list[str]]
            if item.codes is None:
                if any(used == item for used, _ in use.used) or not use.all_enabled or not use.ran:
                    continue
                unused = None
            else:
                unused = _unused_codes(item, use)
                if not unused:
                    continue
            table = table or LineTable(text)
            findings.append(_finding(item, unused, use, table, path))
    return findings


def file_level_problem_findings(problems: Iterable[FileLevelProblem], path: str) -> list[Finding]:
    """A warning for each comment that looks like a file-level suppression but is not one: it
    suppresses nothing, which its author did not intend. No fix: what was meant is unknown."""
    return [
        Finding(
            code=CODE,
            name=NAME,
            message="malformed file-level suppression; it suppresses nothing",
            explanation=f"`{problem.comment}`: {problem.reason}.",
            path=path,
            start=Position(problem.line, problem.column),
            end=Position(problem.line, problem.column + len(problem.comment)),
            severity=Severity.WARNING,
        )
        for problem in problems
    ]


def suppression_use(
    used: Iterable[tuple[Suppression, str]],
    ran: Collection[str],
    known: Collection[str],
    enabled: Collection[str],
    imports_smp: bool,
) -> SuppressionUse:
    """Summarize a run: ``ran`` are the codes whose rules ran cleanly on the file.

    Blanket comments are judged only in files that import the library: a helper module
    that does not is also checked on behalf of the scripts importing it, where its comments
    may be what silences their findings.
    """
    known_set = frozenset(known)
    return SuppressionUse(
        used=frozenset(used),
        ran=frozenset(ran) - {CODE},
        known=known_set,
        all_enabled=imports_smp and (known_set - {CODE}) <= frozenset(enabled),
        enabled=frozenset(enabled),
    )
