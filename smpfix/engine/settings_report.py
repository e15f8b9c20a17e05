"""``smpfix check --show-settings FILE``: the settings one file is checked with, and where each
value came from (a default, a configuration file and its table, a file ``extend`` brought in,
a job override, the command line).

Ruff's ``--show-settings`` prints its resolved settings for the first path; this prints, per
file named, the same settings ``smpfix check`` would use for it, one per line, each followed
by its origin in parentheses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

from smpfix.engine.config import Config
from smpfix.engine.config_tree import Overlay, file_options
from smpfix.engine.selection import path_matches, per_file
from smpfix.job.jobfacts import DeclaredJob, Value


@dataclass(frozen=True)
class RunLevel:
    """The settings that concern the whole run: the run's configuration, and the command
    line's ``--fail-on``, ``--show-hints/--hide-hints`` and ``--exclude``."""

    config: Config
    fail_on: Optional[str] = None
    show_hints: Optional[bool] = None
    exclude: tuple[str, ...] = ()


_COMMAND_LINE = "command line"


def describe(
    path: str, config: Config, overlay: Overlay, rule_names: Mapping[str, str], run: RunLevel
) -> list[str]:
    """The lines ``--show-settings`` prints for ``path`` under its configuration ``config``."""
    own = file_options(path, config, overlay, rule_names)
    codes = per_file(own.select, path, own.per_file_ignores, own.root, rule_names)
    lines = [
        f"settings for: {path}",
        f"configuration: {config.path if config.path is not None else '(none found)'}",
    ]
    if config.extends:
        lines.append(f"extends: {' -> '.join(str(p) for p in config.extends)}")
    lines += [
        _line("select", _words(config.select) if config.select is not None else "ALL", config),
        _line("extend-select", _words(config.extend_select), config),
        _line("ignore", _words(config.ignore), config),
    ]
    if overlay.select is not None:
        lines.append(f"--select: {_words(overlay.select)}  ({_COMMAND_LINE})")
    if overlay.extend_select:
        lines.append(f"--extend-select: {_words(overlay.extend_select)}  ({_COMMAND_LINE})")
    if overlay.ignore:
        lines.append(f"--ignore: {_words(overlay.ignore)}  ({_COMMAND_LINE})")
    source = config.source_of("per-file-ignores")
    for pattern, ignored in config.per_file_ignores.items():
        applies = path_matches((pattern,), path, own.root)
        lines.append(
            f"per-file-ignores: {pattern} = {_words(ignored)}"
            f"  ({source}; {'applies to' if applies else 'does not match'} this file)"
        )
    lines.append(f"rules: {_words(sorted(codes))}")
    lines += _job_lines(own.declared_jobs)
    lines.append(_line("exclude", _words(config.exclude), config, "exclude", "extend-exclude"))
    if run.exclude:
        lines.append(f"--exclude: {_words(run.exclude)}  ({_COMMAND_LINE})")
    # The rest is the run's: taken from the configuration closest to the checked paths.
    whole = run.config
    lines.append(
        _line("respect-gitignore", str(whole.respect_gitignore).lower(), whole)
        + _run_note(whole, config)
    )
    lines.append(
        _line("launchers", _words(whole.launchers, "(searched for)"), whole)
        + _run_note(whole, config)
    )
    if run.fail_on is not None:
        lines.append(f"fail-on: {run.fail_on}  ({_COMMAND_LINE} --fail-on)")
    else:
        lines.append(_line("fail-on", whole.fail_on, whole) + _run_note(whole, config))
    lines.append(_line("line-length", str(whole.line_length), whole) + _run_note(whole, config))
    if run.show_hints is not None:
        flag = "--show-hints" if run.show_hints else "--hide-hints"
        lines.append(f"show-hints: {str(run.show_hints).lower()}  ({_COMMAND_LINE} {flag})")
    else:
        lines.append(
            _line("show-hints", str(whole.show_hints).lower(), whole) + _run_note(whole, config)
        )
    return lines


def _line(key: str, value: str, config: Config, *keys: str) -> str:
    sources = sorted({config.source_of(k) for k in keys or (key,)} - {"default"})
    return f"{key}: {value}  ({'; '.join(sources) or 'default'})"


def _run_note(whole: Config, config: Config) -> str:
    """Said of a run setting when the file's own configuration is another: it is not read."""
    return "" if whole.path == config.path else " [a setting of the run]"


def _words(values: Sequence[str], empty: str = "(none)") -> str:
    return ", ".join(values) or empty


def _job_lines(declared: Sequence[DeclaredJob]) -> list[str]:
    """Each declared job setting with the source it is taken from (the first that states it)."""
    winners: dict[str, tuple[Value, str]] = {}
    for job in declared:
        for key, value in job.settings.items():
            winners.setdefault(key, (value, job.source))
    return [
        f"job: {key} = {json.dumps(value)}  ({source})"
        for key, (value, source) in sorted(winners.items())
    ]
