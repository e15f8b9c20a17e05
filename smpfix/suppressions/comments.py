"""Suppression comments: ``# smpfix: ignore[SMP101]``, bare ``# smpfix: ignore``, ``# noqa:
SMP101``.

Comments are found with Python's tokenizer, so a ``#`` inside a string is never taken for
one; a file with no ``# smpfix: ignore`` and no ``# noqa:`` naming an SMP code anywhere in its
text skips the tokenizer entirely. A bare ``# noqa`` belongs to other linters and does not
silence smpfix: its codes must be named.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

# ``ignore`` and then, maybe after spaces, its codes in brackets; a longer word
# (``ignore-file``, ``ignored``) is no directive at all, never a bare "ignore everything".
_SMPFIX = re.compile(r"#\s*smpfix:\s*ignore(?:\s*\[(?P<codes>[^\]]*)\]|(?![\w-]))", re.IGNORECASE)
_NOQA = re.compile(r"#\s*noqa:\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*)", re.IGNORECASE)
# What a suppression needs somewhere in the text (a match in a comment is one in the text):
# most files that say ``noqa`` name other linters' codes only, and skip the tokenizer.
_POSSIBLE = re.compile(r"#\s*(?:smpfix:\s*ignore|noqa:[\s,A-Z0-9]*SMP)", re.IGNORECASE)


@dataclass(frozen=True)
class Suppression:
    """One suppression comment; ``codes`` is None for "every rule"."""

    line: int
    column: int
    codes: Optional[frozenset[str]]
    kind: str
    comment: str

    def covers(self, code: str) -> bool:
        return self.codes is None or code in self.codes


def _codes(text: Optional[str]) -> Optional[frozenset[str]]:
    if text is None:
        return None
    return frozenset(part.strip().upper() for part in re.split(r"[\s,]+", text) if part.strip())


def _comments(text: str) -> list[tuple[int, int, str]]:
    try:
        tokens = tokenize.generate_tokens(io.StringIO(text).readline)
        return [
            (tok.start[0], tok.start[1] + 1, tok.string)
            for tok in tokens
            if tok.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        found = []
        for number, line in enumerate(text.splitlines(), start=1):
            index = line.find("#")
            if index >= 0:
                found.append((number, index + 1, line[index:]))
        return found


def parse(text: str) -> Mapping[int, tuple[Suppression, ...]]:
    """Suppressions by line number."""
    if "smpfix" not in text and "noqa" not in text and "NOQA" not in text:
        return {}
    if _POSSIBLE.search(text) is None:
        return {}
    by_line: dict[int, list[Suppression]] = {}
    for line, column, comment in _comments(text):
        for match in _SMPFIX.finditer(comment):
            codes = _codes(match.group("codes")) if match.group("codes") is not None else None
            by_line.setdefault(line, []).append(
                Suppression(line, column + match.start(), codes, "smpfix", match.group(0))
            )
        for match in _NOQA.finditer(comment):
            codes = frozenset(c for c in _codes(match.group("codes")) or () if c.startswith("SMP"))
            if codes:
                by_line.setdefault(line, []).append(
                    Suppression(line, column + match.start(), codes, "noqa", match.group(0))
                )
    return {line: tuple(items) for line, items in by_line.items()}


def find(
    suppressions: Mapping[int, tuple[Suppression, ...]], code: str, lines: tuple[int, ...]
) -> Optional[Suppression]:
    """The suppression that silences ``code`` on any of ``lines``, if there is one."""
    for line in lines:
        for item in suppressions.get(line, ()):
            if item.covers(code):
                return item
    return None
