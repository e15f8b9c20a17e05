"""What one document is checked with: the editor's settings over the project's ``pyproject.toml``.

The editor's settings (``initializationOptions``, or the ``smpfix`` section of
``workspace/configuration``) play the part of the command line: ``select`` replaces the
configured ``select``, ``extendSelect`` and ``ignore`` add to the configured lists, and
``job`` settings beat ``[tool.smpfix.job]``. Each document takes the closest configuration
file, as ``smpfix check`` does for each file (``smpfix.engine.config_tree``), with the job
overrides that match it, read again whenever it changes on disk.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from smpfix.engine.config import Config, ConfigError, validate_job
from smpfix.engine.config_tree import ConfigTree
from smpfix.engine.runner import RunOptions
from smpfix.engine.selection import SelectionError, enabled
from smpfix.job.jobfacts import DeclaredJob, Value
from smpfix.job.project import Project
from smpfix.rules.registry import rule_names

EDITOR_JOB_SOURCE = "editor settings (smpfix.job)"


@dataclass(frozen=True)
class ClientSettings:
    """The editor's ``smpfix`` settings."""

    select: Optional[tuple[str, ...]] = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    job: Mapping[str, Value] = field(default_factory=dict)

    @classmethod
    def parse(cls, data: Any) -> tuple[ClientSettings, list[str]]:
        """Settings from the editor's JSON (``{"smpfix": {...}}`` or the section itself), and
        what was wrong with it (each problem leaves that setting out)."""
        if isinstance(data, Mapping) and isinstance(data.get("smpfix"), Mapping):
            data = data["smpfix"]
        if not isinstance(data, Mapping):
            return cls(), [] if data is None else [
                f"smpfix settings must be an object, not {type(data).__name__}"
            ]
        problems: list[str] = []

        def selectors(*names: str) -> Optional[tuple[str, ...]]:
            for name in names:
                value = data.get(name)
                if value is None:
                    continue
                if isinstance(value, str):
                    value = value.split(",")
                if isinstance(value, Sequence) and all(isinstance(item, str) for item in value):
                    return tuple(item.strip() for item in value if item.strip())
                problems.append(f"smpfix.{name} must be a list of rule selectors")
            return None

        job: dict[str, Value] = {}
        raw_job = data.get("job")
        if isinstance(raw_job, Mapping):
            try:
                job = validate_job(raw_job, "smpfix.job in the editor settings")
            except ConfigError as exc:
                problems.append(str(exc))
        elif raw_job is not None:
            problems.append("smpfix.job must be an object of job settings")
        settings = cls(
            select=selectors("select"),
            extend_select=selectors("extendSelect", "extend-select", "extend_select") or (),
            ignore=selectors("ignore") or (),
            job=job,
        )
        return settings, problems


class Configurations(ConfigTree):
    """The configuration of each folder, found as ``smpfix check`` finds it for a file (the
    closest configuration file, with what it ``extend``s), read once and again when one of
    those files changes on disk."""

    def __init__(self) -> None:
        super().__init__(recheck=True)


@dataclass(frozen=True)
class DocumentSettings:
    """A document's run options, the configuration they came from, and what went wrong."""

    options: RunOptions
    config: Config
    problems: tuple[str, ...] = ()


def resolve(
    path: str,
    client: ClientSettings,
    configurations: Configurations,
    project_of: Callable[[Config], Project],
) -> DocumentSettings:
    """The options to check ``path`` with, in the project ``project_of`` gives for its
    configuration (its root, its launchers). A broken ``pyproject.toml`` or an unknown
    selector is reported and left out, so the document is still checked."""
    problems: list[str] = []
    try:
        config = configurations.for_path(path)
    except ConfigError as exc:
        problems.append(f"{exc} (its settings are left out until corrected)")
        config = Config()
    names = rule_names()
    codes = _selection(names, client, config, problems)
    declared = [DeclaredJob.stated(EDITOR_JOB_SOURCE, client.job)] if client.job else []
    declared.extend(config.declared_jobs(path))
    options = RunOptions(
        select=codes,
        rule_names=names,
        declared_jobs=tuple(declared),
        per_file_ignores=config.per_file_ignores,
        root=config.base_of("per-file-ignores"),
        project=project_of(config),
        line_length=config.line_length,
    )
    return DocumentSettings(options, config, tuple(problems))


def _selection(
    names: Mapping[str, str], client: ClientSettings, config: Config, problems: list[str]
) -> frozenset[str]:
    """The rules to run: the editor's selection over the configuration's. As Ruff's server
    does, settings that do not resolve (an unknown selector) are left out and said, and the
    others apply: the configuration's alone, the editor's alone, or the defaults."""
    where = config.path or "pyproject.toml"

    def alone(
        select: Optional[Sequence[str]], extend: Sequence[str], ignore: Sequence[str]
    ) -> Optional[str]:
        try:
            enabled(names, select, extend, ignore)
        except SelectionError as exc:
            return str(exc)
        return None

    editor = alone(client.select, client.extend_select, client.ignore)
    configured = alone(config.select, config.extend_select, config.ignore)
    if editor is not None:
        instead = "the defaults apply" if configured else f"{where} applies"
        problems.append(
            f"{editor} in the editor settings (smpfix.select, extendSelect or ignore): they"
            f" are left out until corrected, {instead}"
        )
    if configured is not None:
        problems.append(
            f"{configured} in {where}: its select, extend-select and ignore are left out"
            " until corrected"
        )
    if editor is None and configured is None:
        return enabled(
            names,
            client.select if client.select is not None else config.select,
            [*config.extend_select, *client.extend_select],
            [*config.ignore, *client.ignore],
        )
    if configured is None:
        return enabled(names, config.select, config.extend_select, config.ignore)
    if editor is None:
        return enabled(names, client.select, client.extend_select, client.ignore)
    return enabled(names, None)
