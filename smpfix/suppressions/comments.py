"""Suppression comments: ``# smpfix: ignore[SMP101]``, bare ``# smpfix: ignore``, ``# noqa:
SMP101``, and the file-level ``# smpfix: ignore-file[SMP101, SMP2]``.

Comments are found with Python's tokenizer, so a ``#`` inside a string is never taken for
one; a file with no ``# smpfix: ignore`` and no ``# noqa:`` naming an SMP code anywhere in its
text skips the tokenizer entirely. A bare ``# noqa`` belongs to other linters and does not
silence smpfix: its codes must be named.

The file-level form is strict, since it silences a whole file: it must sit on a line of its
own, with its codes or prefixes (``SMP2``) in brackets right after ``ignore-file``. Any other
spelling (no list, a space before the bracket, an empty list, a word that is no code, a
code no rule has) is a ``FileLevelProblem``: it suppresses nothing and is reported. There is
no file-wide "ignore every rule".
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Optional

# ``ignore`` and then, maybe after spaces, its codes in brackets; a longer word
# (``ignore-file``, ``ignored``) is no directive at all, never a bare "ignore everything".
_SMPFIX = re.compile(r"#\s*smpfix:\s*ignore(?:\s*\[(?P<codes>[^\]]*)\]|(?![\w-]))", re.IGNORECASE)
_NOQA = re.compile(r"#\s*noqa:\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*)", re.IGNORECASE)
# What a suppression needs somewhere in the text (a match in a comment is one in the text):
# most files that say ``noqa`` name other linters' codes only, and skip the tokenizer.
_POSSIBLE = re.compile(r"#\s*(?:smpfix:\s*ignore|noqa:[\s,A-Z0-9]*SMP)", re.IGNORECASE)


# The file-level form: ``ignore-file`` and whatever follows it in the comment.
_FILE_WORD = re.compile(r"#\s*smpfix:\s*ignore-file", re.IGNORECASE)
_FILE = re.compile(r"#\s*smpfix:\s*ignore-file\[(?P<codes>[^\]]*)\]", re.IGNORECASE)
# A code (``SMP101``) or a prefix of codes with at least one digit (``SMP1``, ``SMP10``).
_CODE_OR_PREFIX = re.compile(r"SMP[0-9]{1,3}\Z")
FILE_LEVEL = "file"
_FILE_FORM = "`# smpfix: ignore-file[SMP101, SMP2]`"


@dataclass(frozen=True)
class Suppression:
    """One suppression comment; ``codes`` is None for "every rule". A file-level one
    (``kind == FILE_LEVEL``) names codes or prefixes and covers the whole file."""

    line: int
    column: int
    codes: Optional[frozenset[str]]
    kind: str
    comment: str

    def covers(self, code: str) -> bool:
        if self.codes is None:
            return True
        if self.kind == FILE_LEVEL:
            return any(code.startswith(prefix) for prefix in self.codes)
        return code in self.codes


@dataclass(frozen=True)
class FileLevelProblem:
    """A comment that looks like a file-level suppression but is not one; it suppresses
    nothing, and ``reason`` says why."""

    line: int
    column: int
    comment: str
    reason: str


def parse_file_level(
    text: str, known: Collection[str]
) -> tuple[tuple[Suppression, ...], tuple[FileLevelProblem, ...]]:
    """The file-level suppressions of ``text``, and the comments that only look like one.

    ``known`` are the rule codes: a listed code or prefix that names none of them makes the
    whole comment a problem, since the rest of its list may be as mistaken.
    """
    if "ignore-file" not in text.lower():
        return (), ()
    starts = [0, *(match.end() for match in re.finditer(r"\r\n|\r|\n", text))]
    valid: list[Suppression] = []
    problems: list[FileLevelProblem] = []
    for line, column, comment in _comments(text):
        word = _FILE_WORD.search(comment)
        if word is None:
            continue
        at = column + word.start()
        whole = _FILE.match(comment, word.start())
        shown = whole.group(0) if whole is not None else comment[word.start() :].rstrip()
        reason = _file_level_problem(text, starts, line, column, whole, known) or (
            None if whole is not None else _not_a_list(comment[word.end() :])
        )
        if reason is not None:
            problems.append(FileLevelProblem(line, at, shown, reason))
        else:
            assert whole is not None
            valid.append(
                Suppression(line, at, _codes(whole.group("codes")), FILE_LEVEL, whole.group(0))
            )
    return tuple(valid), tuple(problems)


def _not_a_list(rest: str) -> str:
    """Why the text after ``ignore-file`` is not its bracketed list of codes."""
    if rest[:1].isspace() and rest.lstrip().startswith("["):
        return f"no space is allowed between `ignore-file` and its `[`: write {_FILE_FORM}"
    if rest[:1].isalnum() or rest[:1] in ("_", "-"):
        return (
            f"`ignore-file{rest.split()[0]}` is not a directive; the file-level one is {_FILE_FORM}"
        )
    return (
        "`ignore-file` takes the codes it silences in brackets right after it, as"
        f" {_FILE_FORM}; there is no file-wide suppression of every rule"
        " (`per-file-ignores` in the configuration can switch a file off)"
    )


def _file_level_problem(
    text: str,
    starts: list[int],
    line: int,
    column: int,
    whole: Optional[re.Match[str]],
    known: Collection[str],
) -> Optional[str]:
    """Why a comment naming ``ignore-file`` is no file-level suppression, or None."""
    start = starts[line - 1] if line - 1 < len(starts) else len(text)
    if text[start : start + column - 1].strip():
        return f"a file-level suppression must be on a line of its own, as {_FILE_FORM}"
    if whole is None:
        return None  # ``_not_a_list`` says what is wrong
    listed = [part for part in re.split(r"[\s,]+", whole.group("codes")) if part]
    if not listed:
        return f"the list names no code; name the codes or prefixes, as {_FILE_FORM}"
    malformed = [code for code in listed if not _CODE_OR_PREFIX.match(code.upper())]
    if malformed:
        return (
            f"{', '.join(malformed)}: not a rule code or prefix (SMP101, SMP1); name them,"
            f" as {_FILE_FORM}"
        )
    unknown = [code for code in listed if not any(rule.startswith(code.upper()) for rule in known)]
    if unknown:
        return f"{', '.join(unknown)}: no smpfix rule has this code or prefix"
    return None


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
