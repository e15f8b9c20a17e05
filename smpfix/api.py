"""The public Python API: check or fix a source string, list the rules.

The CLI and the tests both go through the same engine these functions use::

    from smpfix.api import check_source, fix_source
    findings = check_source(text, job={"tensor_parallel_degree": 4})

As on the command line, nothing misspelt is silently ignored: an unknown keyword, rule
selector or job setting raises ``ValueError`` (an ``UnknownSetting``, also a ``TypeError`` as
Python's own unknown keyword is) with the name it most likely misspells.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from smpfix.base.findings import FileError, Finding
from smpfix.engine.analysis import AnalysisOptions, analyze
from smpfix.engine.fixing import fix_text
from smpfix.job.jobfacts import DeclaredJob, Value
from smpfix.job.project import Project


class UnknownSetting(ValueError, TypeError):
    """An unknown keyword, rule selector or job setting given to the API."""


@dataclass(frozen=True)
class FixResult:
    text: str
    applied: int
    remaining: tuple[Finding, ...]
    errors: tuple[FileError, ...]


def _options(
    select: Optional[Iterable[str]],
    job: Optional[Mapping[str, Value]],
    roots: Sequence[str] = (),
    line_length: int = 100,
) -> AnalysisOptions:
    from smpfix.engine.config import ConfigError, validate_job
    from smpfix.engine.selection import SelectionError, enabled
    from smpfix.rules.registry import rule_names

    if isinstance(select, str):
        select = select.split(",")
    try:
        codes = enabled(rule_names(), list(select) if select is not None else None)
        # As for ``--job``: a misspelt setting is an error, never a check silently switched off.
        settings = validate_job(dict(job), "job") if job else {}
    except (ConfigError, SelectionError) as exc:
        raise UnknownSetting(str(exc)) from None
    declared = (DeclaredJob.stated("job given to the API", settings),) if settings else ()
    project = Project(tuple(os.path.abspath(root) for root in roots)) if roots else None
    if isinstance(line_length, bool) or not isinstance(line_length, int) or line_length < 1:
        raise UnknownSetting(f"line_length must be a whole number above 0, not {line_length!r}")
    return AnalysisOptions(
        select=codes, declared_jobs=declared, project=project, line_length=line_length
    )


def _refuse_unknown(function: Callable[..., Any], unknown: Mapping[str, Any]) -> None:
    """Python's own error for an unknown keyword names no alternative; this one does."""
    if not unknown:
        return
    import difflib
    import inspect

    parameters = inspect.signature(function).parameters.values()
    known = [p.name for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD]
    described = []
    for name in sorted(unknown):
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        described.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise UnknownSetting(
        f"{function.__name__}() got unknown keyword argument(s) {', '.join(described)};"
        f" it takes {', '.join(known)}"
    )


def check_source(
    text: str,
    path: str = "<string>",
    select: Optional[Iterable[str]] = None,
    job: Optional[Mapping[str, Value]] = None,
    roots: Sequence[str] = (),
    **unknown: Any,
) -> list[Finding]:
    """Findings for ``text``; raises ``ValueError`` when it cannot be parsed, or an unknown
    keyword, rule selector (``select``) or job setting (``job``) is given (as the command
    line does, with a "did you mean"). ``roots`` are the
    project's folders: the files there that ``text`` imports, or that a launcher in it starts,
    are read too (none by default: the text is checked alone)."""
    _refuse_unknown(check_source, unknown)
    analysis = analyze(text, path, _options(select, job, roots))
    if analysis.errors and not analysis.findings and any(e.code is None for e in analysis.errors):
        raise ValueError(analysis.errors[0].message)
    return list(analysis.findings)


def fix_source(
    text: str,
    path: str = "<string>",
    select: Optional[Iterable[str]] = None,
    job: Optional[Mapping[str, Value]] = None,
    unsafe: bool = False,
    roots: Sequence[str] = (),
    line_length: int = 100,
    **unknown: Any,
) -> FixResult:
    """Apply fixes to ``text`` until nothing fixable changes; returns the new text (``roots``,
    and what raises ``ValueError``: as for ``check_source``). A line a fix would make longer
    than ``line_length`` (and than the file's longest) is wrapped, as ``line-length`` does."""
    _refuse_unknown(fix_source, unknown)
    outcome = fix_text(text, path, _options(select, job, roots, line_length), unsafe=unsafe)
    return FixResult(
        outcome.text,
        outcome.applied,
        outcome.analysis.findings,
        outcome.analysis.errors + outcome.errors,
    )


def list_rules() -> list[dict[str, Any]]:
    from smpfix.rules.registry import rule_table

    return rule_table()
