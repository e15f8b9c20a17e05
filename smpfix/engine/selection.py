"""Which rules run: ``select``, ``extend-select`` and ``ignore`` with Ruff's selectors.

A selector is a rule code (``SMP101``), a code prefix (``SMP1``), a rule name
(``optimizer-before-distributed-model``) or ``ALL``. The enabled set is ``select`` (default
``ALL``) plus ``extend-select``, minus ``ignore``. On the command line ``--select`` replaces
the configured ``select``, while ``--ignore`` and ``--extend-select`` add to the configured
lists. ``per-file-ignores`` then removes rules for files matching a pattern.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec


class SelectionError(Exception):
    """An unknown selector; the CLI exits with 2."""


def expand(selectors: Iterable[str], rules: Mapping[str, str]) -> frozenset[str]:
    """Codes matched by ``selectors``; ``rules`` maps code -> name.

    Codes and prefixes are matched against the codes alone, names against the names.
    """
    chosen: set[str] = set()
    by_name: dict[str, str] | None = None
    for raw in selectors:
        selector = raw.strip()
        if not selector:
            continue
        if selector.upper() == "ALL":
            chosen.update(rules)
            continue
        matched = (
            {code for code in rules if code.startswith(selector.upper())}
            if selector.upper().startswith("SMP")
            else set()
        )
        if matched:
            chosen.update(matched)
            continue
        if by_name is None:
            by_name = {name: code for code, name in rules.items()}
        if selector.lower() not in by_name:
            raise SelectionError(f"unknown rule selector {raw!r}{_suggestion(selector, rules)}")
        chosen.add(by_name[selector.lower()])
    return frozenset(chosen)


def _suggestion(selector: str, rules: Mapping[str, str]) -> str:
    """The code or name ``selector`` most likely misspells, else what a selector may be."""
    import difflib

    candidates = [*rules, *rules.values()]
    spelled = selector.upper() if selector.upper().startswith("SMP") else selector.lower()
    if spelled.startswith("SMP"):  # letters typed for digits: SMP1O1, SMPl01
        digits = spelled[:3] + spelled[3:].translate(str.maketrans("OIL", "011"))
        if any(code.startswith(digits) for code in rules):
            return f" (did you mean {digits!r}?)"
    close = difflib.get_close_matches(spelled, candidates, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return " (use a code such as SMP101, a prefix such as SMP1, a rule name, or ALL)"


def enabled(
    rules: Mapping[str, str],
    select: Sequence[str] | None,
    extend_select: Sequence[str] = (),
    ignore: Sequence[str] = (),
) -> frozenset[str]:
    base = expand(select if select is not None else ["ALL"], rules)
    return (base | expand(extend_select, rules)) - expand(ignore, rules)


def per_file(
    codes: frozenset[str],
    path: str,
    per_file_ignores: Mapping[str, Sequence[str]],
    root: Path,
    rules: Mapping[str, str],
) -> frozenset[str]:
    """``codes`` minus the rules ``per-file-ignores`` switches off for ``path`` (its patterns
    relative to ``root``, the folder of the configuration file that says them)."""
    if not per_file_ignores:
        return codes
    removed: set[str] = set()
    for pattern, selectors in per_file_ignores.items():
        if path_matches((pattern,), path, root):
            removed |= expand(selectors, rules)
    return codes - removed


def path_matches(patterns: Sequence[str], path: str, root: Path) -> bool:
    """Whether a gitignore-style pattern (relative to ``root``) matches ``path``, or its name:
    how ``per-file-ignores`` and the ``paths`` of job overrides match, as Ruff's do."""
    absolute = Path(path).absolute()
    try:
        relative = absolute.relative_to(root.absolute()).as_posix()
    except ValueError:
        relative = absolute.as_posix()
    spec = _compiled(tuple(patterns))
    return spec.match_file(relative) or spec.match_file(absolute.name)


@lru_cache(maxsize=256)
def _compiled(patterns: tuple[str, ...]) -> pathspec.PathSpec:
    """Patterns compiled once per run, not once per file."""
    import pathspec  # here only: importing it costs about 20 ms, and most runs have no patterns

    return pathspec.GitIgnoreSpec.from_lines(patterns)
