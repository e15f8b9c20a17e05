"""Building the ``Program`` a script migration reads, the way the analysis builds it: for a
text under a stated job (fixtures), or for a project's script under the job of its launchers
(realistic projects). The driver of ``smpfix migrate`` does this for the command; tests keep
their own, small, copy so the script half is tested alone.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Optional

from smpfix.base.walker import indexed
from smpfix.engine.analysis import _LazyPositions, job_facts_for
from smpfix.engine.launcher_index import with_launchers
from smpfix.job.jobfacts import DeclaredJob, Value
from smpfix.job.project import Project
from smpfix.migrate.items import FileMigration
from smpfix.migrate.script import migrate_script
from smpfix.program.model import Program
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import parse_file


def _program(path: str, text: str, declared: tuple[DeclaredJob, ...], project: Project) -> Program:
    file = parse_file(path, text)
    assert file is not None, f"{path} does not parse"
    modules = LocalModules(project, path)
    positions = _LazyPositions(file.module, text, file.index)
    job = job_facts_for(file.facts, declared, positions, None, modules)
    return Program(file, job, modules)


def migrate_text(
    text: str, job: Optional[Mapping[str, Value]] = None, path: str = "train.py"
) -> FileMigration:
    """``text`` migrated under the stated ``job`` (as ``--job`` states one)."""
    declared = (DeclaredJob.stated("test job", dict(job)),) if job else ()
    program = _program(path, text, declared, Project())
    with indexed(program.module, program.file.index):
        return migrate_script(program)


def launched_scripts(project_dir: Path) -> dict[str, FileMigration]:
    """Every script a launcher of the project starts, migrated under that launcher's job,
    keyed by its path relative to the project."""
    files = [
        (str(path), path.read_bytes())
        for path in sorted(project_dir.rglob("*"))
        if path.suffix in (".py", ".ipynb", ".sh")
    ]
    project = with_launchers(files, Project((str(project_dir),)), None)
    result: dict[str, FileMigration] = {}
    for path, raw in files:
        declared = project.declared_for(path)
        if not path.endswith(".py") or not project.launchers_of(path):
            continue
        program = _program(path, raw.decode("utf-8"), declared, project)
        with indexed(program.module, program.file.index):
            result[os.path.relpath(path, project_dir)] = migrate_script(program)
        assert program.modules is not None
        for helper in program.modules.imported_modules(program.facts):
            name = os.path.relpath(helper.path, project_dir)
            if name in result:
                continue
            with indexed(helper.module, helper.index):
                result[name] = migrate_script(
                    Program(helper, program.job, program.modules, (program.file,))
                )
    return result
