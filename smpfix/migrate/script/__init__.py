"""Rewriting one SMP v1 training script or helper module for SMP v2: a placeholder.

The script half of ``smpfix migrate`` (imports and initialisation, ranks, backward, the FSDP
wrap, checkpoints, ``TODO`` scaffolds, report-only items) is built on its own branch and
replaces this module when it is merged. Until then a script is returned unchanged with
nothing to say, so the driver and the launcher half can be built and tested on their own.
"""

from __future__ import annotations

from smpfix.migrate.items import FileMigration
from smpfix.program.model import Program


def migrate_script(program: Program) -> FileMigration:
    """``program``'s file unchanged, with no items (see the module's docstring)."""
    return FileMigration(program.path, program.file.text, program.file.text, ())
