"""Comments a fix may contradict.

A fix that rewrites code in place (``partial=False`` -> ``partial=True``) cannot tell whether
the comment a person wrote about that code still holds ("save a single checkpoint containing
entire model parameters"), and smpfix never rewrites prose. So such a fix is never safe while a
comment is tied to the code it changes: a comment at the end of a changed line, or comment lines
directly above the changed line, or above its statement when that is at most five lines long
(a comment above a long call describes the call, not each of its lines), with no blank line
between. Tool
directives (``# noqa``, ``# type:``, ``# smpfix: ...``) are no prose and do not count. A fix that
deletes a statement deletes the comment lines tied to it (``DeleteStatementLines``); a fix that
only adds code leaves comments alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from smpfix.base.findings import Applicability

# Comments that instruct a tool rather than describe the code.
_DIRECTIVES = (
    "noqa",
    "type:",
    "pragma",
    "fmt:",
    "smpfix",
    "expect:",
    "pylint:",
    "ruff:",
    "isort:",
    "nosec",
    "mypy:",
    "pyright:",
)


# How long a statement may be for the comment above it to speak about each of its lines.
_SHORT_STATEMENT = 5


def tied_comments(
    lines: Sequence[str], first: int, last: int, statement: tuple[int, int]
) -> tuple[int, ...]:
    """The 1-based numbers of the lines holding a prose comment tied to code on lines ``first``
    to ``last`` of a statement on lines ``statement`` (first and last)."""
    found: set[int] = set()
    for number in range(first, last + 1):
        comment = trailing_comment(lines[number - 1])
        if comment is not None and _prose(comment):
            found.add(number)
    starts = {first}
    if statement[1] - statement[0] < _SHORT_STATEMENT:
        starts.add(statement[0])
    for start in starts:
        number = start - 1
        while number >= 1 and lines[number - 1].lstrip().startswith("#"):
            if _prose(lines[number - 1].lstrip()):
                found.add(number)
            number -= 1
    return tuple(sorted(found))


def trailing_comment(line: str) -> Optional[str]:
    """The comment ending a line of code (``#`` outside a string), or None."""
    quote = ""
    escaped = False
    for at, char in enumerate(line):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#":
            return line[at:]
    return None


def reviewed(
    applicability: Applicability, description: str, comments: Sequence[int]
) -> tuple[Applicability, str]:
    """The fix's applicability and description once ``comments`` (line numbers) are known to be
    tied to the code it rewrites: a safe fix becomes unsafe, and the description says which
    comment to review."""
    if not comments:
        return applicability, description
    if applicability is Applicability.SAFE:
        applicability = Applicability.UNSAFE
    where = ", ".join(str(number) for number in comments)
    plural = "s" if len(comments) > 1 else ""
    return applicability, (
        f"{description} (review the comment{plural} on line{plural} {where}:"
        " it may describe the code this fix changes)"
    )


def _prose(comment: str) -> bool:
    words = comment.lstrip("#").strip().lower()
    return bool(words) and not words.startswith(_DIRECTIVES)
