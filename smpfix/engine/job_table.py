"""Checking ``[tool.smpfix.job]`` with the same configuration rules as launchers.

A declared job is a configuration too: ``tensor_parallel_degree = 6`` there is as wrong as in
a launcher. Findings point at the key's line in ``pyproject.toml``; they have no automatic
fix (smpfix does not rewrite TOML).
"""

from __future__ import annotations

import re
from typing import Optional

from smpfix.base.findings import FileError, FileResult, Finding, Position, Severity, fit_title
from smpfix.base.flavour import Flavour
from smpfix.engine.config import Config, table_name
from smpfix.job.jobfacts import LAUNCH_KEYS, SMPFIX_KEYS, JobFacts, Tri


def check_job_table(config: Config, select: frozenset[str]) -> Optional[FileResult]:
    if not config.job or config.path is None:
        return None
    from smpfix.job.launcher import Located
    from smpfix.rules.config_rule import ConfigRule, ConfigView
    from smpfix.rules.registry import rules_of_scope
    from smpfix.rules.scope import FileScope

    path = str(config.path)
    text = config.path.read_text(encoding="utf-8")
    job = JobFacts.resolve(config.declared_jobs())
    if job.smp_v2 is not None:
        return None  # an SMP v2 job: no v1 configuration rule applies (smpfix.job.smp_v2)
    # The table is stored under the library's names; TensorFlow knows the pipeline degree only
    # as `partitions`.
    spelled = (
        {"pipeline_parallel_degree": "partitions"} if job.flavour is Flavour.TENSORFLOW else {}
    )
    parameters = Located(
        {
            spelled.get(key, key): Located(value, entry=None, source_file=path)
            for key, value in config.job.items()
            if key not in LAUNCH_KEYS and key not in SMPFIX_KEYS
        }
    )
    extra = {key: Located(value) for key, value in config.job.items() if key in LAUNCH_KEYS}
    view = ConfigView(
        "job table", config.job_source, parameters, True, None, None, extra, flavour=job.flavour
    )
    findings: list[Finding] = []
    errors: list[FileError] = []
    for rule in rules_of_scope(FileScope.CONFIGURATION, select):
        if not issubclass(rule, ConfigRule) or not rule.judges(view):
            continue
        try:
            problems = list(rule.check(view))
        except Exception as exc:  # one broken rule must not stop the run (exit 2, like a file's)
            errors.append(
                FileError(
                    path,
                    f"internal error in rule {rule.code}: {type(exc).__name__}: {exc}",
                    code=rule.code,
                )
            )
            continue
        for problem in problems:
            applies = job.version_applies(
                problem.since or rule.since, problem.until or rule.until, implied=problem.implied
            )
            if applies is Tri.OFF:
                continue
            severity = Severity.HINT if applies is Tri.UNKNOWN else problem.severity
            key = _key_of(problem.at, parameters, extra)
            line = _line_of(text, key, table_name(config.path, "job"))
            title, explanation = fit_title(problem.message, problem.explanation)
            findings.append(
                Finding(
                    rule.code,
                    rule.name,
                    title,
                    path,
                    Position(line, 1),
                    Position(line, 1),
                    severity,
                    explanation=explanation,
                    evidence=problem.evidence,
                )
            )
    return FileResult(
        path,
        findings=tuple(sorted(findings, key=lambda f: f.sort_key)),
        errors=tuple(errors),
        text=text if findings else None,
    )


def _key_of(at: object, parameters: object, extra: dict) -> Optional[str]:
    for key, located in [*getattr(parameters, "value", {}).items(), *extra.items()]:
        if located is at:
            return str(key)
    return None


def _line_of(text: str, key: Optional[str], table: str) -> int:
    """The line of ``key = ...`` inside ``table`` (``[tool.smpfix.job]``, an ``smpfix.toml``'s
    ``[job]``), else the table's header line."""
    lines = text.splitlines()
    header = next(
        (i for i, line in enumerate(lines) if re.match(rf"^\s*{re.escape(table)}", line)), None
    )
    if header is None:
        return 1
    for i in range(header + 1, len(lines)):
        if re.match(r"^\s*\[", lines[i]):
            break
        if key is not None and re.match(rf"^\s*{re.escape(key)}\s*=", lines[i]):
            return i + 1
    return header + 1
