"""``full`` (code frames, then each finding's explanation, evidence and fix) and ``concise`` (one
line per finding: its title) terminal output. Hints are left out unless asked for
(``ReportOptions.shows``); the summary line says how many."""

from __future__ import annotations

import io
from collections.abc import Sequence

from smpfix.base.findings import FileResult, Finding
from smpfix.report import ReportOptions, fix_marker_applies, hidden_hints, shown
from smpfix.report.locations import finding_location

_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "hint": "cyan"}


def _header(finding: Finding, options: ReportOptions) -> list[tuple[str, str]]:
    """The first line as (text, style) pieces: ``path:line:col: CODE [*] severity: message``."""
    marker = " [*]" if fix_marker_applies(finding, options.unsafe_fixes) else ""
    return [
        (f"{finding_location(finding)}:", "bold"),
        (" ", ""),
        (f"{finding.code}{marker}", "bold red"),
        (" ", ""),
        (f"{finding.severity.value}:", _SEVERITY_STYLE[finding.severity.value]),
        (f" {finding.message}", ""),
    ]


def _frame(finding: Finding, text: str) -> list[tuple[str, str]]:
    lines = text.splitlines()
    first = max(1, finding.start.line - 1)
    last = min(len(lines), max(finding.end.line, finding.start.line) + 1)
    width = len(str(last))
    out: list[tuple[str, str]] = [(f"{' ' * width} |\n", "blue")]
    for number in range(first, last + 1):
        line = lines[number - 1] if number - 1 < len(lines) else ""
        out.append((f"{number:>{width}} | ", "blue"))
        out.append((line + "\n", ""))
        if number == finding.start.line:
            start = finding.start.column - 1
            end = finding.end.column - 1 if finding.end.line == number else len(line)
            carets = "^" * max(1, end - start)
            out.append((f"{' ' * width} | ", "blue"))
            out.append((f"{' ' * start}{carets} {finding.code}\n", "bold red"))
    out.append((f"{' ' * width} |\n", "blue"))
    if finding.explanation:
        out.append((f"{' ' * width} = note: {finding.explanation}\n", ""))
    for line in finding.evidence:
        out.append((f"{' ' * width} = evidence: {line}\n", "dim"))
    if finding.fix is not None:
        safety = (
            ""
            if finding.fix.applicability.value == "safe"
            else f" ({finding.fix.applicability.value} fix)"
        )
        out.append((f"{' ' * width} = help: {finding.fix.description}{safety}\n", "cyan"))
    return out


def _emit(pieces: list[tuple[str, str]], color: bool) -> str:
    if not color:
        return "".join(text for text, _ in pieces)
    from rich.console import Console
    from rich.text import Text

    buffer = io.StringIO()
    console = Console(
        file=buffer,
        force_terminal=True,
        color_system="standard",
        width=10_000,
        highlight=False,
        soft_wrap=True,
    )
    rich_text = Text()
    for text, style in pieces:
        rich_text.append(text, style=style or None)
    console.print(rich_text, end="")
    return buffer.getvalue()


def render_text(results: Sequence[FileResult], concise: bool, options: ReportOptions) -> str:
    pieces: list[tuple[str, str]] = []
    for result in results:
        for finding in result.findings:
            pieces.extend(_header(finding, options))
            pieces.append(("\n", ""))
            if not concise and result.text is not None:
                pieces.extend(_frame(finding, result.text))
                pieces.append(("\n", ""))
    return _emit(pieces, options.color)


def summary(results: Sequence[FileResult], options: ReportOptions) -> str:
    """Ruff's closing line over the findings shown, how many hints were left out, and how many
    files could not be analyzed (never "all passed" then)."""
    line = _findings_summary(shown(results, options), options)
    hidden = hidden_hints(results, options)
    if hidden:
        line += f" {hidden} hint{'s' if hidden != 1 else ''} not shown: --show-hints."
    broken = sum(1 for r in results if r.errors)
    if not broken:
        return line
    files = "file" if broken == 1 else "files"
    if line == "All checks passed!":
        return (
            f"No problems found, but {broken} {files} could not be fully analyzed (see the "
            "errors above)."
        )
    return f"{line} {broken} {files} could not be fully analyzed (see the errors above)."


def _findings_summary(results: Sequence[FileResult], options: ReportOptions) -> str:
    findings = [f for r in results for f in r.findings]
    fixed = sum(r.fixed_count for r in results)
    count = len(findings)
    if options.applied:
        if not count and not fixed:
            return "All checks passed!"
        noun = "problem" if count + fixed == 1 else "problems"
        return f"Found {count + fixed} {noun} ({fixed} fixed, {count} remaining)."
    if not count:
        return "All checks passed!"
    safe = sum(
        1
        for f in findings
        if f.fix is not None and f.fix.edits and f.fix.applicability.value == "safe"
    )
    unsafe = sum(
        1
        for f in findings
        if f.fix is not None and f.fix.edits and f.fix.applicability.value == "unsafe"
    )
    noun = "problem" if count == 1 else "problems"
    parts = []
    if safe:
        parts.append(f"{safe} fixable with --apply")
    if unsafe:
        parts.append(
            f"{unsafe} more with --unsafe-fixes"
            if not options.unsafe_fixes
            else f"{unsafe} more fixable with --apply --unsafe-fixes"
        )
    detail = f" ({', '.join(parts)})" if parts else ""
    return f"Found {count} {noun}{detail}."


def fixed_list(results: Sequence[FileResult]) -> str:
    """Ruff's ``--show-fixes``: per file, how many of each rule's findings ``--apply`` fixed."""
    from collections import Counter

    from smpfix.rules.registry import rule_names

    names = rule_names()
    fixed = [result for result in results if result.fixed]
    if not fixed:
        return ""
    total = sum(len(result.fixed) for result in fixed)
    lines = [f"Fixed {total} problem{'s' if total != 1 else ''}:"]
    for result in fixed:
        lines.append(f"- {result.path}:")
        counts = Counter(result.fixed)
        lines.extend(
            f"    {count} × {code} ({names.get(code, code)})"
            for code, count in sorted(counts.items())
        )
    return "".join(f"{line}\n" for line in lines)
