"""``[tool.smpfix]`` in ``pyproject.toml``, read once per run with a TOML parser.

The nearest ``pyproject.toml`` at or above the checked paths that has a ``[tool.smpfix]``
table is used (or the one ``--config`` names). Unknown keys are an error rather than a
silent no-op, so a typo in ``per-file-ignores`` cannot switch a gate off.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from smpfix.base.safe_read import CONFIGURATION_LIMIT, RefusedFile, read_regular
from smpfix.job.config_keys import advise
from smpfix.job.jobfacts import (
    KNOWN_KEYS,
    LAUNCH_KEYS,
    SMPFIX_KEYS,
    TF_KNOWN_KEYS,
    V2_KNOWN_KEYS,
    DeclaredJob,
    Value,
    framework_flavour,
    normalize_key,
)
from smpfix.job.versions import parse_version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11
    import tomli as tomllib


class ConfigError(Exception):
    """A configuration problem; the CLI prints it and exits with 2."""


_LIST_KEYS = ("select", "ignore", "extend-select", "exclude", "extend-exclude", "launchers")
_KNOWN_KEYS = frozenset(
    {
        *_LIST_KEYS,
        "per-file-ignores",
        "job",
        "respect-gitignore",
        "smp-version",
        "fail-on",
        "show-hints",
        "line-length",
    }
)
# The line length fixes aim for when neither smpfix nor Ruff is configured with one.
DEFAULT_LINE_LENGTH = 100
# ``fail-on``'s values, least severe last (``Severity``).
FAIL_ON_VALUES = ("error", "warning", "hint")


@dataclass(frozen=True)
class Config:
    """The ``[tool.smpfix]`` table; ``path`` is None when no configuration file was found."""

    path: Optional[Path] = None
    select: Optional[tuple[str, ...]] = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    per_file_ignores: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    job: Mapping[str, Value] = field(default_factory=dict)
    respect_gitignore: bool = True
    # Globs (relative to this file) naming the project's launchers; empty: search for them.
    launchers: tuple[str, ...] = ()
    # The library version the project targets (``smp-version = "1.11"``); see
    # ``smpfix.job.versions``.
    smp_version: Optional[str] = None
    # The least severity that fails the build, and whether the text formats show hints
    # (``--fail-on``, ``--show-hints``).
    fail_on: str = "warning"
    show_hints: bool = False
    # The length fixes keep their lines within (``line-length``, else ``[tool.ruff]``'s).
    line_length: int = DEFAULT_LINE_LENGTH

    @property
    def root(self) -> Path:
        return self.path.parent if self.path is not None else Path.cwd()

    @property
    def job_source(self) -> str:
        name = self.path.name if self.path is not None else "pyproject.toml"
        return f"{name} [tool.smpfix.job]"

    def declared_jobs(self) -> tuple[DeclaredJob, ...]:
        """The jobs this file declares, highest precedence first: ``[tool.smpfix.job]``, then
        ``smp-version`` (which states only the library version, so it completes nothing)."""
        name = self.path.name if self.path is not None else "pyproject.toml"
        declared = []
        if self.job:
            declared.append(DeclaredJob.stated(self.job_source, self.job))
        if self.smp_version is not None:
            declared.append(
                DeclaredJob(
                    f"{name} [tool.smpfix] smp-version",
                    {"smp_version": self.smp_version},
                    complete=False,
                )
            )
        return tuple(declared)


def _strings(value: Any, key: str, where: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where}: [tool.smpfix] {key} must be a list of strings")
    return tuple(value)


# Larger than any count, size or degree of a real job (1e30 parameters, bytes, GPUs), small
# enough that the arithmetic of the plan never overflows a float.
_LARGEST = 1e30


def _out_of_range(value: Value) -> bool:
    """``1e400`` is read as infinity, ``nan`` as not a number; neither is a setting."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return not abs(value) < _LARGEST  # also true for nan


def validate_job(table: Mapping[str, Any], where: str) -> dict[str, Value]:
    job: dict[str, Value] = {}
    for key, value in table.items():
        if (
            key not in KNOWN_KEYS
            and key not in TF_KNOWN_KEYS
            and key not in V2_KNOWN_KEYS
            and key not in LAUNCH_KEYS
            and key not in SMPFIX_KEYS
        ):
            # The same advice SMP812 gives for a key in a launcher or an smp.init dict.
            advice = advise(key)
            hint = advice.suggestion or advise(key, LAUNCH_KEYS).suggestion
            suggestion = (
                f": it {advice.explanation}"
                if advice.explanation
                else (f" (did you mean {hint!r}?)" if hint else "")
            )
            raise ConfigError(f"{where}: unknown job setting {key!r}{suggestion}")
        if not isinstance(value, (bool, int, float, str)):
            raise ConfigError(f"{where}: job setting {key!r} must be a boolean, number or string")
        if _out_of_range(value):
            raise ConfigError(f"{where}: job setting {key!r} must be a finite number below 1e30")
        if key == "framework" and framework_flavour(value) is None:
            raise ConfigError(
                f'{where}: job setting \'framework\' must be "pytorch" or "tensorflow",'
                f" not {value!r}"
            )
        if key in ("smp_version", "framework_version") and parse_version(value) is None:
            raise ConfigError(
                f'{where}: job setting {key!r} must be a version such as "1.11" or "1.13.1",'
                f" not {value!r}"
            )
        job[normalize_key(key)] = value
    return job


def load(path: Path) -> Config:
    """Read ``[tool.smpfix]`` from ``path``; a file without the table gives the defaults."""
    try:
        data = _read_toml(path)
    except RefusedFile as exc:
        raise ConfigError(f"{path}: {exc.message}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: cannot read: not UTF-8 (byte {exc.start + 1}); TOML files are UTF-8"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except (RecursionError, MemoryError):
        raise ConfigError(f"{path}: invalid TOML: nested too deeply or too large to read") from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: [tool] must be a table")
    table = tool.get("smpfix")
    if table is None:
        return Config(path=path, line_length=_line_length({}, tool, path))
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.smpfix] must be a table")
    table = _with_lint_table(table, path)
    unknown = sorted(set(table) - _KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) in [tool.smpfix]: {', '.join(map(_with_suggestion, unknown))}"
        )
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(
            f"{path}: [tool.smpfix] per-file-ignores must be a table of pattern = [codes]"
        )
    job = table.get("job", {})
    if not isinstance(job, dict):
        raise ConfigError(f"{path}: [tool.smpfix.job] must be a table")
    gitignore = table.get("respect-gitignore", True)
    if not isinstance(gitignore, bool):
        raise ConfigError(f"{path}: [tool.smpfix] respect-gitignore must be true or false")
    smp_version = table.get("smp-version")
    if smp_version is not None and (
        isinstance(smp_version, bool) or parse_version(smp_version) is None
    ):
        raise ConfigError(
            f'{path}: [tool.smpfix] smp-version must be a version such as "1.11",'
            f" not {smp_version!r}"
        )
    fail_on = table.get("fail-on", "warning")
    if fail_on not in FAIL_ON_VALUES:
        raise ConfigError(
            f"{path}: [tool.smpfix] fail-on must be one of {', '.join(map(repr, FAIL_ON_VALUES))},"
            f" not {fail_on!r}"
        )
    show_hints = table.get("show-hints", False)
    if not isinstance(show_hints, bool):
        raise ConfigError(f"{path}: [tool.smpfix] show-hints must be true or false")
    select = table.get("select")
    launchers = _strings(table.get("launchers", []), "launchers", path)
    for pattern in launchers:
        if not pattern or os.path.isabs(pattern) or pattern.startswith(("/", "\\")):
            raise ConfigError(
                f"{path}: [tool.smpfix] launchers: {pattern!r} must be a glob relative to"
                f" {path.name}'s folder"
            )
    return Config(
        path=path,
        select=_strings(select, "select", path) if select is not None else None,
        ignore=_strings(table.get("ignore", []), "ignore", path),
        extend_select=_strings(table.get("extend-select", []), "extend-select", path),
        exclude=_strings(table.get("exclude", []), "exclude", path)
        + _strings(table.get("extend-exclude", []), "extend-exclude", path),
        per_file_ignores={
            pattern: _strings(codes, f"per-file-ignores.{pattern}", path)
            for pattern, codes in per_file.items()
        },
        job=validate_job(job, f"{path}: [tool.smpfix.job]"),
        respect_gitignore=gitignore,
        launchers=launchers,
        smp_version=None if smp_version is None else str(smp_version),
        fail_on=fail_on,
        show_hints=show_hints,
        line_length=_line_length(table, tool, path),
    )


def _line_length(table: Mapping[str, Any], tool: Mapping[str, Any], path: Path) -> int:
    """``line-length`` in ``[tool.smpfix]``; else ``[tool.ruff] line-length`` of the same file
    when it is a whole number (Ruff reports its own mistakes); else 100."""
    own = table.get("line-length")
    if own is not None:
        if isinstance(own, bool) or not isinstance(own, int) or not 0 < own <= 1000:
            raise ConfigError(
                f"{path}: [tool.smpfix] line-length must be a whole number from 1 to 1000,"
                f" not {own!r}"
            )
        return own
    ruff = tool.get("ruff")
    theirs = ruff.get("line-length") if isinstance(ruff, dict) else None
    if isinstance(theirs, int) and not isinstance(theirs, bool) and 0 < theirs <= 1000:
        return theirs
    return DEFAULT_LINE_LENGTH


# The keys ``[tool.smpfix.lint]`` may hold, as ``[tool.ruff.lint]`` holds Ruff's rule selection.
_LINT_KEYS = frozenset({"select", "ignore", "extend-select", "per-file-ignores"})


def _with_lint_table(table: dict[str, Any], path: Path) -> dict[str, Any]:
    """``[tool.smpfix.lint]`` read as Ruff users write it: its keys join the main table."""
    lint = table.get("lint")
    if lint is None:
        return table
    if not isinstance(lint, dict):
        raise ConfigError(f"{path}: [tool.smpfix.lint] must be a table")
    misplaced = sorted(set(lint) - _LINT_KEYS)
    if misplaced:
        raise ConfigError(
            f"{path}: [tool.smpfix.lint] takes {', '.join(sorted(_LINT_KEYS))};"
            f" {', '.join(misplaced)} belong(s) in [tool.smpfix]"
        )
    twice = sorted(set(lint) & set(table))
    if twice:
        raise ConfigError(
            f"{path}: {', '.join(twice)} set both in [tool.smpfix] and [tool.smpfix.lint]"
        )
    merged = {key: value for key, value in table.items() if key != "lint"}
    merged.update(lint)
    return merged


def _with_suggestion(key: str) -> str:
    """An unknown key with the known one it most likely misspells."""
    close = difflib.get_close_matches(key, sorted(_KNOWN_KEYS | {"lint"}), n=1, cutoff=0.6)
    return f"{key} (did you mean {close[0]}?)" if close else key


def _read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's table; a FIFO, a device or a file over 10 MB is refused, not read."""
    raw = read_regular(str(path), CONFIGURATION_LIMIT)
    return tomllib.loads(raw.decode("utf-8"))


def find(paths: Sequence[str]) -> Optional[Path]:
    """The nearest ``pyproject.toml`` with a ``[tool.smpfix]`` table at or above ``paths``."""
    existing = [os.path.abspath(p) for p in paths if p != "-" and os.path.exists(p)]
    start = Path(os.path.commonpath(existing)) if existing else Path.cwd()
    if start.is_file():
        start = start.parent
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                data = _read_toml(candidate)
            except (OSError, ValueError, RecursionError, MemoryError):
                return candidate  # ``load`` reports what is wrong with it
            tool = data.get("tool", {})
            if not isinstance(tool, dict) or "smpfix" in tool:
                return candidate
    return None


def resolve(paths: Sequence[str], explicit: Optional[str]) -> Config:
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"{explicit}: configuration file not found")
        return load(path)
    found = find(paths)
    return load(found) if found is not None else Config()
