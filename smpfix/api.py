"""The public Python API: check or fix a source string, list the rules.

The CLI and the tests both go through the same engine these functions use::

    from smpfix.api import check_source, fix_source
    findings = check_source(text, job={"tensor_parallel_degree": 4})
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from smpfix.base.findings import FileError, Finding
from smpfix.engine.analysis import AnalysisOptions, analyze
from smpfix.engine.fixing import fix_text
from smpfix.job.jobfacts import DeclaredJob, Value
from smpfix.job.project import Project


@dataclass(frozen=True)
class FixResult:
    text: str
    applied: int
    remaining: tuple[Finding, ...]
    errors: tuple[FileError, ...]


def _options(
    select: Optional[Iterable[str]], job: Optional[Mapping[str, Value]], roots: Sequence[str] = ()
) -> AnalysisOptions:
    from smpfix.engine.config import ConfigError, validate_job
    from smpfix.engine.selection import enabled
    from smpfix.rules.registry import rule_names

    codes = enabled(rule_names(), list(select) if select is not None else None)
    try:
        # As for ``--job``: a misspelt setting is an error, never a check silently switched off.
        settings = validate_job(dict(job), "job") if job else {}
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    declared = (DeclaredJob.stated("job given to the API", settings),) if settings else ()
    project = Project(tuple(os.path.abspath(root) for root in roots)) if roots else None
    return AnalysisOptions(select=codes, declared_jobs=declared, project=project)


def check_source(
    text: str,
    path: str = "<string>",
    select: Optional[Iterable[str]] = None,
    job: Optional[Mapping[str, Value]] = None,
    roots: Sequence[str] = (),
) -> list[Finding]:
    """Findings for ``text``; raises ``ValueError`` when it cannot be parsed or ``job`` names a
    setting that does not exist (as ``--job`` does). ``roots`` are the
    project's folders: the files there that ``text`` imports, or that a launcher in it starts,
    are read too (none by default: the text is checked alone)."""
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
) -> FixResult:
    """Apply fixes to ``text`` until nothing fixable changes; returns the new text (``roots``: as
    for ``check_source``)."""
    outcome = fix_text(text, path, _options(select, job, roots), unsafe=unsafe)
    return FixResult(
        outcome.text,
        outcome.applied,
        outcome.analysis.findings,
        outcome.analysis.errors + outcome.errors,
    )


def list_rules() -> list[dict[str, Any]]:
    from smpfix.rules.registry import rule_table

    return rule_table()
