"""Configuration files: ``[tool.smpfix]`` in ``pyproject.toml``, or an ``smpfix.toml``.

As in Ruff, each checked file takes the closest configuration file at or above it
(``smpfix.engine.config_tree`` finds it, once per folder): in one folder ``.smpfix.toml``, then
``smpfix.toml`` (its keys at the top level, as in ``ruff.toml``), then a ``pyproject.toml`` with
a ``[tool.smpfix]`` table; a ``pyproject.toml`` without one is passed over. ``--config`` names
one file for every checked file instead. ``extend = "other.toml"`` inherits another file's
settings, which this one's override. Unknown keys are an error with a "did you mean" rather
than a silent no-op, so a typo in ``per-file-ignores`` cannot switch a gate off.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from smpfix.base.safe_read import CONFIGURATION_LIMIT, RefusedFile, read_regular
from smpfix.engine.selection import path_matches
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


# The configuration files of one folder, the one that wins first (Ruff's ``.ruff.toml``,
# ``ruff.toml``, ``pyproject.toml``).
CONFIG_FILE_NAMES = (".smpfix.toml", "smpfix.toml", "pyproject.toml")

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
        "extend",
        "line-length",
    }
)
# The line length fixes aim for when neither smpfix nor Ruff is configured with one.
DEFAULT_LINE_LENGTH = 100
# ``fail-on``'s values, least severe last (``Severity``).
FAIL_ON_VALUES = ("error", "warning", "hint")
# Where the overrides of ``[tool.smpfix.job]`` are kept among the settings (not a job key).
_OVERRIDES = "job-overrides"


def table_name(path: Path, sub: str = "") -> str:
    """How a table of ``path`` is written: ``[tool.smpfix.job]`` in a ``pyproject.toml``,
    ``[job]`` in an ``smpfix.toml`` (whose own keys sit at the top level)."""
    if path.name == "pyproject.toml":
        return f"[tool.smpfix.{sub}]" if sub else "[tool.smpfix]"
    return f"[{sub}]" if sub else ""


@dataclass(frozen=True)
class JobOverride:
    """One ``[[tool.smpfix.job.overrides]]`` table: job settings for the files ``paths`` (globs
    relative to the folder of the file that says it) match, over ``[tool.smpfix.job]``."""

    paths: tuple[str, ...]
    job: Mapping[str, Value]
    source: str
    base: Path

    def applies_to(self, path: str) -> bool:
        return path_matches(self.paths, path, self.base)


@dataclass(frozen=True)
class Origin:
    """Where a setting was written: the file and its table."""

    file: Path
    table: str

    def __str__(self) -> str:
        return f"{self.file} {self.table}".rstrip()


@dataclass(frozen=True)
class Config:
    """The settings of one configuration file, with what it extends; ``path`` is None when no
    configuration file was found."""

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
    # ``[[tool.smpfix.job.overrides]]``, in the order written (a later one wins).
    overrides: tuple[JobOverride, ...] = ()
    # The files ``extend`` brought in, the one this file names first.
    extends: tuple[Path, ...] = ()
    # Where each setting that is not a default was written: its key (``select``,
    # ``job.tensor_parallel_degree``, ``job.overrides``) -> file and table.
    origins: Mapping[str, Origin] = field(default_factory=dict)
    # ``exclude`` and ``extend-exclude`` apart, each with its folder (``exclude_groups``).
    exclude_bases: tuple[tuple[tuple[str, ...], Path], ...] = ()
    # The length fixes keep their lines within (``line-length``, else ``[tool.ruff]``'s).
    line_length: int = DEFAULT_LINE_LENGTH

    @property
    def root(self) -> Path:
        return self.path.parent if self.path is not None else Path.cwd()

    def base_of(self, key: str) -> Path:
        """The folder ``key``'s relative paths are relative to: that of the file that set it
        (an extended file's patterns stay relative to it, as in Ruff)."""
        origin = self.origins.get(key)
        return origin.file.parent if origin is not None else self.root

    def source_of(self, key: str) -> str:
        """Where ``key``'s value comes from, for ``--show-settings``."""
        origin = self.origins.get(key)
        if origin is None:
            return "default"
        if self.path is not None and origin.file != self.path:
            return f"{origin}, extended by {self.path}"
        return str(origin)

    def exclude_groups(self) -> tuple[tuple[tuple[str, ...], Path], ...]:
        """``exclude`` and ``extend-exclude``, each with the folder its patterns are relative
        to (through ``extend`` they may come from different files)."""
        return self.exclude_bases or ((self.exclude, self.root),)

    @property
    def job_source(self) -> str:
        name = self.path.name if self.path is not None else "pyproject.toml"
        return f"{name} {table_name(self.path or Path('pyproject.toml'), 'job')}"

    def job_source_of(self, key: str) -> str:
        """The job facts' name for where job setting ``key`` was written."""
        origin = self.origins.get(f"job.{key}")
        if origin is None or origin.file == self.path:
            return self.job_source
        return f"{origin.file.name} {origin.table} (extended)"

    def overrides_for(self, path: str) -> tuple[JobOverride, ...]:
        """The overrides whose ``paths`` match ``path``, in the order written."""
        return tuple(override for override in self.overrides if override.applies_to(path))

    def declared_jobs(self, path: Optional[str] = None) -> tuple[DeclaredJob, ...]:
        """The jobs this file declares for ``path``, highest precedence first: the overrides
        that match it (the last written first), ``[tool.smpfix.job]`` (its own keys, then
        those ``extend`` brought in), then ``smp-version`` (which states only the library
        version, so it completes nothing). Without ``path``, no override applies."""
        declared = [
            DeclaredJob.stated(override.source, override.job)
            for override in reversed(self.overrides_for(path) if path is not None else ())
        ]
        by_source: dict[str, dict[str, Value]] = {}
        for key, value in self.job.items():
            by_source.setdefault(self.job_source_of(key), {})[key] = value
        own = by_source.pop(self.job_source, None)
        if own:
            declared.append(DeclaredJob.stated(self.job_source, own))
        declared.extend(DeclaredJob.stated(s, settings) for s, settings in by_source.items())
        if self.smp_version is not None:
            origin = self.origins.get("smp-version")
            name = origin.file.name if origin is not None else "pyproject.toml"
            table = origin.table if origin is not None else "[tool.smpfix]"
            declared.append(
                DeclaredJob(
                    f"{name} {table} smp-version",
                    {"smp_version": self.smp_version},
                    complete=False,
                )
            )
        return tuple(declared)


def _strings(value: Any, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where} {key} must be a list of strings")
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
    """Read the settings of ``path`` (and of the files it extends); a ``pyproject.toml``
    without ``[tool.smpfix]`` gives the defaults."""
    settings, chain = _settings(path, ())
    return _config(path, settings, chain[1:])


# One setting as read: its value (validated), and the file and table it was written in.
_Read = tuple[Any, Origin]


def _settings(path: Path, seen: tuple[Path, ...]) -> tuple[dict[str, _Read], tuple[Path, ...]]:
    """``path``'s settings over those of the file it extends (each key replaces the inherited
    one; ``[tool.smpfix.job]`` is merged key by key), and the chain of files read."""
    real = Path(os.path.realpath(path))
    if real in seen:
        names = " -> ".join(str(p) for p in (*seen, real))
        raise ConfigError(f"{path}: extend forms a cycle: {names}")
    table, lint_keys, ruff_length = _table_of(path)
    own = _validated(path, table, lint_keys)
    if "line-length" not in own and ruff_length is not None:
        own["line-length"] = (ruff_length, Origin(path, "[tool.ruff]"))
    extend = table.get("extend")
    if extend is None:
        return own, (path,)
    where = f"{path}: {_prefix(path)}extend"
    if not isinstance(extend, str) or not extend.strip():
        raise ConfigError(f"{where} must be the path of another configuration file")
    target = Path(os.path.normpath(path.parent / os.path.expandvars(os.path.expanduser(extend))))
    if not target.is_file():
        raise ConfigError(f"{where}: {target}: configuration file not found")
    inherited, chain = _settings(target, (*seen, real))
    merged = dict(inherited)
    merged.update(own)
    return merged, (path, *chain)


def _prefix(path: Path) -> str:
    """What comes before a key's name in a message: ``[tool.smpfix] `` in a pyproject.toml."""
    return "[tool.smpfix] " if path.name == "pyproject.toml" else ""


def _read(path: Path) -> dict[str, Any]:
    try:
        return _read_toml(path)
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


def _table_of(path: Path) -> tuple[dict[str, Any], frozenset[str], Optional[int]]:
    """The smpfix table of ``path`` (``[tool.smpfix]``, or an ``smpfix.toml``'s top level) with
    ``[tool.smpfix.lint]``'s keys joined to it, which keys came from there, and the
    ``[tool.ruff] line-length`` of a ``pyproject.toml`` when it is a whole number (Ruff reports
    its own mistakes)."""
    data = _read(path)
    ruff_length: Optional[int] = None
    if path.name == "pyproject.toml":
        ruff = data.get("tool", {}).get("ruff") if isinstance(data.get("tool"), dict) else None
        theirs = ruff.get("line-length") if isinstance(ruff, dict) else None
        if isinstance(theirs, int) and not isinstance(theirs, bool) and 0 < theirs <= 1000:
            ruff_length = theirs
        tool = data.get("tool", {})
        if not isinstance(tool, dict):
            raise ConfigError(f"{path}: [tool] must be a table")
        table = tool.get("smpfix", {})
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [tool.smpfix] must be a table")
    else:
        table = data
    merged = _with_lint_table(table, path)
    lint = table.get("lint")
    lint_keys = frozenset(lint) if isinstance(lint, dict) else frozenset()
    return merged, lint_keys, ruff_length


def _validated(path: Path, table: dict[str, Any], lint_keys: frozenset[str]) -> dict[str, _Read]:
    """Each key of ``table`` checked and converted, with where it was written."""
    unknown = sorted(set(table) - _KNOWN_KEYS)
    if unknown:
        where = f" in {table_name(path)}" if table_name(path) else ""
        raise ConfigError(
            f"{path}: unknown key(s){where}: {', '.join(map(_with_suggestion, unknown))}"
        )
    where = f"{path}: {_prefix(path)}".rstrip()
    read: dict[str, Any] = {}
    for key in ("select", *_LIST_KEYS[1:]):
        if key in table:
            read[key] = _strings(table[key], key, where)
    if "per-file-ignores" in table:
        per_file = table["per-file-ignores"]
        if not isinstance(per_file, dict):
            raise ConfigError(f"{where} per-file-ignores must be a table of pattern = [codes]")
        read["per-file-ignores"] = {
            pattern: _strings(codes, f"per-file-ignores.{pattern}", where)
            for pattern, codes in per_file.items()
        }
    for key in ("respect-gitignore", "show-hints"):
        if key in table and not isinstance(table[key], bool):
            raise ConfigError(f"{where} {key} must be true or false")
        if key in table:
            read[key] = table[key]
    if "smp-version" in table:
        smp_version = table["smp-version"]
        if isinstance(smp_version, bool) or parse_version(smp_version) is None:
            raise ConfigError(
                f'{where} smp-version must be a version such as "1.11", not {smp_version!r}'
            )
        read["smp-version"] = str(smp_version)
    if "line-length" in table:
        length = table["line-length"]
        if isinstance(length, bool) or not isinstance(length, int) or not 0 < length <= 1000:
            raise ConfigError(
                f"{where} line-length must be a whole number from 1 to 1000, not {length!r}"
            )
        read["line-length"] = length
    if "fail-on" in table:
        fail_on = table["fail-on"]
        if fail_on not in FAIL_ON_VALUES:
            raise ConfigError(
                f"{where} fail-on must be one of {', '.join(map(repr, FAIL_ON_VALUES))},"
                f" not {fail_on!r}"
            )
        read["fail-on"] = fail_on
    for pattern in read.get("launchers", ()):
        if not pattern or os.path.isabs(pattern) or pattern.startswith(("/", "\\")):
            raise ConfigError(
                f"{where} launchers: {pattern!r} must be a glob relative to {path.name}'s folder"
            )
    here = Origin(path, table_name(path))
    found: dict[str, _Read] = {
        key: (value, Origin(path, table_name(path, "lint")) if key in lint_keys else here)
        for key, value in read.items()
    }
    if "job" in table:
        job = table["job"]
        if not isinstance(job, dict):
            raise ConfigError(f"{path}: {table_name(path, 'job')} must be a table")
        job = dict(job)
        overrides = job.pop("overrides", None)
        job_origin = Origin(path, table_name(path, "job"))
        for key, value in validate_job(job, f"{path}: {job_origin.table}").items():
            found[f"job.{key}"] = (value, job_origin)
        if overrides is not None:
            found[_OVERRIDES] = (_overrides(path, overrides), job_origin)
    return found


def _overrides(path: Path, raw: Any) -> tuple[JobOverride, ...]:
    """``[[tool.smpfix.job.overrides]]``: each a table of ``paths`` and job settings."""
    header = f"[{table_name(path, 'job.overrides')}]"
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise ConfigError(f"{path}: {header[1:-1]} must be an array of tables ({header})")
    overrides = []
    for number, item in enumerate(raw, start=1):
        where = f"{path}: {header} #{number}"
        settings = dict(item)
        paths = settings.pop("paths", None)
        if paths is None:
            close = _close_matches("paths", list(settings), n=1, cutoff=0.6)
            hint = f" ({close[0]!r}: did you mean 'paths'?)" if close else ""
            raise ConfigError(f'{where} needs paths = ["glob", ...]{hint}')
        globs = _strings(paths, "paths", where)
        for pattern in globs:
            if not pattern or os.path.isabs(pattern):
                raise ConfigError(
                    f"{where} paths: {pattern!r} must be a glob relative to {path.name}'s folder"
                )
        if not settings:
            raise ConfigError(f"{where} sets no job setting")
        overrides.append(
            JobOverride(
                globs,
                validate_job(settings, where),
                # Not the globs: a report reads the names of files in a source as related ones.
                f"{path.name} {header} #{number}",
                path.parent,
            )
        )
    return tuple(overrides)


def _config(path: Path, read: Mapping[str, _Read], extends: tuple[Path, ...]) -> Config:
    def value(key: str, default: Any) -> Any:
        return read[key][0] if key in read else default

    exclude = value("exclude", ())
    extend_exclude = value("extend-exclude", ())
    return Config(
        path=path,
        select=value("select", None),
        ignore=value("ignore", ()),
        extend_select=value("extend-select", ()),
        exclude=exclude + extend_exclude,
        per_file_ignores=value("per-file-ignores", {}),
        job={key[4:]: item[0] for key, item in read.items() if key.startswith("job.")},
        respect_gitignore=value("respect-gitignore", True),
        launchers=value("launchers", ()),
        smp_version=value("smp-version", None),
        fail_on=value("fail-on", "warning"),
        show_hints=value("show-hints", False),
        line_length=value("line-length", DEFAULT_LINE_LENGTH),
        overrides=value(_OVERRIDES, ()),
        extends=extends,
        origins={
            ("job.overrides" if key == _OVERRIDES else key): origin
            for key, (_, origin) in read.items()
        },
        exclude_bases=tuple(
            (read[key][0], read[key][1].file.parent)
            for key in ("exclude", "extend-exclude")
            if key in read
        ),
    )


# The keys ``[tool.smpfix.lint]`` may hold, as ``[tool.ruff.lint]`` holds Ruff's rule selection.
_LINT_KEYS = frozenset({"select", "ignore", "extend-select", "per-file-ignores"})


def _with_lint_table(table: dict[str, Any], path: Path) -> dict[str, Any]:
    """``[tool.smpfix.lint]`` read as Ruff users write it: its keys join the main table."""
    lint = table.get("lint")
    if lint is None:
        return table
    name = table_name(path, "lint")
    if not isinstance(lint, dict):
        raise ConfigError(f"{path}: {name} must be a table")
    unknown = sorted(set(lint) - _KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) in {name}:"
            f" {', '.join(_with_suggestion(key, _LINT_KEYS) for key in unknown)}"
        )
    misplaced = sorted(set(lint) - _LINT_KEYS)
    if misplaced:
        raise ConfigError(
            f"{path}: {name} takes {', '.join(sorted(_LINT_KEYS))};"
            f" {', '.join(misplaced)} belong(s) in {table_name(path) or 'the top level'}"
        )
    twice = sorted(set(lint) & set(table))
    if twice:
        top = table_name(path) or "the top level"
        raise ConfigError(f"{path}: {', '.join(twice)} set both in {top} and {name}")
    merged = {key: value for key, value in table.items() if key != "lint"}
    merged.update(lint)
    return merged


def _with_suggestion(key: str, known: frozenset[str] = _KNOWN_KEYS | {"lint"}) -> str:
    """An unknown key with the known one it most likely misspells."""
    close = _close_matches(key, sorted(known), n=1, cutoff=0.6)
    return f"{key} (did you mean {close[0]}?)" if close else key


def _read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's table; a FIFO, a device or a file over 10 MB is refused, not read."""
    raw = read_regular(str(path), CONFIGURATION_LIMIT)
    return tomllib.loads(raw.decode("utf-8"))


def in_folder(folder: Path) -> Optional[Path]:
    """The configuration file of ``folder`` itself, or None: ``.smpfix.toml``, else
    ``smpfix.toml``, else a ``pyproject.toml`` with a ``[tool.smpfix]`` table."""
    for name in CONFIG_FILE_NAMES:
        candidate = os.path.join(folder, name)
        if not os.path.isfile(candidate):  # a system call per name: asked for every folder
            continue
        if name != "pyproject.toml":
            return Path(candidate)
        try:
            data = _read_toml(Path(candidate))
        except (OSError, ValueError, RecursionError, MemoryError):
            return Path(candidate)  # ``load`` reports what is wrong with it
        tool = data.get("tool", {})
        if not isinstance(tool, dict) or "smpfix" in tool:
            return Path(candidate)
    return None


def find(paths: Sequence[str]) -> Optional[Path]:
    """The closest configuration file at or above ``paths`` (their common folder)."""
    existing = [os.path.abspath(p) for p in paths if p != "-" and os.path.exists(p)]
    start = Path(os.path.commonpath(existing)) if existing else Path.cwd()
    if start.is_file():
        start = start.parent
    for folder in [start, *start.parents]:
        found = in_folder(folder)
        if found is not None:
            return found
    return None


def resolve(paths: Sequence[str], explicit: Optional[str]) -> Config:
    """The configuration of the run (``--config``, else the closest to ``paths``)."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"{explicit}: configuration file not found")
        return load(path)
    found = find(paths)
    return load(found) if found is not None else Config()


def _close_matches(word: str, candidates: list[str], n: int, cutoff: float) -> list[str]:
    """``difflib.get_close_matches``, imported only when a configuration has an unknown key."""
    import difflib

    return difflib.get_close_matches(word, candidates, n=n, cutoff=cutoff)
