"""The code actions: a quick fix per finding that has one, "suppress on this line", "fix all".

A quick fix applies exactly the edits ``smpfix check --apply`` would apply for that finding
(``--unsafe-fixes`` ones are offered too, their title saying so). "Fix all" is the fix loop
over the whole document, as ``--apply`` runs it, under the kind ``source.fixAll.smpfix`` that
editors run on save when asked to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from lsprotocol import types

from smpfix.base.findings import Applicability, Finding
from smpfix.engine.add_noqa import suppression_edit
from smpfix.server.protocol import Lines, diagnostic, text_edits
from smpfix.suppressions.unused import CODE as UNUSED_SUPPRESSION

FIX_ALL = "source.fixAll.smpfix"
FIX_ALL_TITLE = "smpfix: fix all safe problems"


def wanted(kind: str, only: Optional[Sequence[str]]) -> bool:
    """Whether the client asked for actions of ``kind`` (``only`` lists kind prefixes)."""
    return only is None or any(kind == prefix or kind.startswith(prefix + ".") for prefix in only)


def _overlaps(finding: Finding, request: types.Range) -> bool:
    """Whether the finding is on the lines of the request (the cursor's line, a selection):
    the fix is offered anywhere on the line, not only with the cursor on the flagged code."""
    return finding.start.line - 1 <= request.end.line and request.start.line <= finding.end.line - 1


def finding_actions(
    uri: str,
    text: str,
    findings: Sequence[Finding],
    request: types.Range,
    lines: Lines,
    only: Optional[Sequence[str]],
) -> list[types.CodeAction]:
    """Quick fixes and suppressions for the findings under ``request`` in one document (or
    cell): ``text`` is what their positions refer to."""
    if not wanted(types.CodeActionKind.QuickFix, only):
        return []
    actions: list[types.CodeAction] = []
    for finding in findings:
        if not _overlaps(finding, request):
            continue
        shown = diagnostic(finding, lines)
        fix = finding.fix
        if (
            fix is not None
            and fix.edits
            and fix.applicability in (Applicability.SAFE, Applicability.UNSAFE)
        ):
            unsafe = fix.applicability is Applicability.UNSAFE
            actions.append(
                types.CodeAction(
                    title=f"{finding.code}: {fix.description}"
                    f"{' (unsafe fix: review the change)' if unsafe else ''}",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[shown],
                    is_preferred=not unsafe,
                    edit=types.WorkspaceEdit(changes={uri: text_edits(fix.edits, lines)}),
                )
            )
        if finding.code == UNUSED_SUPPRESSION:
            continue  # its fix removes the stale comment; suppressing it would add another
        edit = suppression_edit(text, finding)
        if edit is not None:
            actions.append(
                types.CodeAction(
                    title=f"Suppress {finding.code} on line {edit.start_pos.line}",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[shown],
                    edit=types.WorkspaceEdit(changes={uri: text_edits([edit], lines)}),
                )
            )
    return actions


def fix_all_action(data: Any, edit: Optional[types.WorkspaceEdit]) -> types.CodeAction:
    """The "fix all" action; without ``edit`` the client resolves it later (``data`` says
    which document), so that showing the light bulb never runs the fix loop."""
    return types.CodeAction(title=FIX_ALL_TITLE, kind=FIX_ALL, data=data, edit=edit)


def has_safe_fix(findings: Sequence[Finding]) -> bool:
    return any(
        f.fix is not None and f.fix.edits and f.fix.applicability is Applicability.SAFE
        for f in findings
    )
