"""``smpfix plan``: a memory plan for every launcher configuration among the checked paths.

Each estimator call in a launcher (a Python file or a notebook) is one configuration, planned
with the script its ``entry_point`` names when that script is among the checked paths. When
a job is declared (``--job``, ``[tool.smpfix.job]``), every training script that no checked
launcher starts is planned with that job alone. Files are read once; nothing is executed.
A file that cannot be read or parsed is left out of the plan (``smpfix check`` reports it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base import nesting, notebook, source
from smpfix.base.imports import ImportTable
from smpfix.base.parse import parse_module
from smpfix.base.positions import Positions
from smpfix.base.walker import indexed
from smpfix.engine.discovery import DiscoveredFile
from smpfix.engine.prefilter import may_involve_smp
from smpfix.job.jobfacts import DeclaredJob
from smpfix.job.launcher import find_launchers
from smpfix.job.linking import may_be_launcher
from smpfix.job.project import Project
from smpfix.plan.planner import PlanInputs, launcher_inputs, plan
from smpfix.plan.results import PlannedConfiguration
from smpfix.plan.script_code import load_script
from smpfix.program.facts import collect
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import ParsedFile


@dataclass(frozen=True)
class _Parsed:
    path: str
    module: cst.Module
    code: str
    book: Optional[notebook.Notebook]


def plan_files(
    tasks: Sequence[DiscoveredFile],
    project: Project,
    declared: Sequence[DeclaredJob],
    job_source: Optional[str] = None,
) -> list[PlannedConfiguration]:
    """The plans of ``tasks`` (the discovered files), launchers first in path order, then, with
    a declared job, the scripts no launcher starts. ``job_source`` names the declared job's
    file (``pyproject.toml``) for those rows; their location is that of no estimator."""
    planned: list[PlannedConfiguration] = []
    started: set[str] = set()
    scripts: list[str] = []
    with nesting.recursion_headroom():
        for parsed, raw in _parsed(tasks):
            if may_be_launcher(raw):
                for configuration, script in _launcher_plans(parsed, project, declared):
                    planned.append(configuration)
                    started.add(script)
            if parsed.book is None and _is_training_script(parsed.module):
                scripts.append(parsed.path)
        if declared:
            planned.extend(
                _declared_plan(path, project, declared, job_source)
                for path in scripts
                if os.path.abspath(path) not in started
            )
    return planned


def _parsed(tasks: Iterable[DiscoveredFile]) -> Iterator[tuple[_Parsed, bytes]]:
    for task in tasks:
        raw = source.read_bytes(task.path)  # never a FIFO or a device: it could block the plan
        if raw is None or not may_involve_smp(raw):
            continue
        try:
            text = source.decode(task.path, raw).text
            book = notebook.parse(text) if task.path.endswith(".ipynb") else None
        except (source.SourceError, notebook.NotebookError):
            continue
        code = book.joined()[0] if book is not None else text
        if nesting.refusal(code) is not None:
            continue
        try:
            module = parse_module(code)
        except Exception:  # a syntax error, or syntax this LibCST cannot represent
            continue
        yield _Parsed(task.path, module, code, book), raw


def _launcher_plans(
    parsed: _Parsed, project: Project, declared: Sequence[DeclaredJob]
) -> Iterator[tuple[PlannedConfiguration, str]]:
    positions: Optional[Positions] = None
    launcher_file: Optional[ParsedFile] = None
    modules = LocalModules(project, parsed.path)
    for launcher in find_launchers(
        parsed.module, ImportTable.of_module(parsed.module), parsed.path
    ):
        if launcher.modelparallel is None:
            continue  # an estimator without model parallelism is not this library's job
        positions = positions or Positions(parsed.module, parsed.code)
        where = positions.position(positions.span(launcher.call)[0])
        row, cell = where.line, None
        if parsed.book is not None:
            cell, row = parsed.book.cell_of_line(where.line)
            cell += 1
        launcher_file = launcher_file or _launcher_file(parsed)
        inputs = launcher_inputs(
            launcher, parsed.path, where.line, declared, modules, launcher_file
        )
        script = inputs.launcher.script if inputs.launcher is not None else ""
        yield PlannedConfiguration(parsed.path, row, where.column, plan(inputs), cell), script


def _launcher_file(parsed: _Parsed) -> ParsedFile:
    """The launcher's tree with its facts, for what its data preparation says (the one parse
    already made)."""
    with indexed(parsed.module) as index:
        facts = collect(parsed.module)
    return ParsedFile(parsed.path, parsed.code, parsed.module, facts, index)


def _is_training_script(module: cst.Module) -> bool:
    """A script that wraps a model: in ``smp.DistributedModel`` (SMP v1), or with PyTorch FSDP
    in a script that imports ``torch.sagemaker`` (SMP v2); helpers and launchers do not."""
    facts = collect(module)
    if facts.imports_smp_torch:
        return bool(facts.distributed_models or facts.uses_hf_trainer)
    return facts.imports_smp_v2 and any(
        name in _FSDP_WRAPS for name in facts.calls_by_qualified_name
    )


# PyTorch FSDP's wrapper, by the two names it is imported under.
_FSDP_WRAPS = frozenset(
    {
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    }
)


def _declared_plan(
    path: str, project: Project, declared: Sequence[DeclaredJob], job_source: Optional[str]
) -> PlannedConfiguration:
    shown = os.path.relpath(path)
    code = load_script(
        LocalModules(project, path),
        path,
        os.path.abspath(path) if shown.startswith("..") else shown,
    )
    return PlannedConfiguration(
        job_source or declared[0].source, None, None, plan(PlanInputs(tuple(declared), None, code))
    )
