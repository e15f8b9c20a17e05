"""The code a configuration runs: the script a launcher starts, or the script that holds an
``smp.init({...})`` or ``torch.sagemaker.init({...})`` dict, together with the project
modules it imports.

Some configuration mistakes are mistakes only together with the code: ``offload_activations``
does nothing unless the script checkpoints activations, and sharded data parallelism with
tensor parallelism needs ``smp.model_creation(tensor_parallelism=...)``. A launcher's script
is looked into only when it is inside the project's roots and on disk (a notebook's
``%%writefile`` cell is not), parsed once per analysis through ``LocalModules``, which also
records it as a dependency of the launcher's cached result. The script's own imports are
followed to project files only, a few levels deep; a call made inside an installed package
cannot be seen, so a rule that reports a missing call says where it looked.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import libcst as cst

from smpfix.program.facts import FileFacts

if TYPE_CHECKING:
    from smpfix.program.model import Program
    from smpfix.rules.config_rule import ConfigView

# How many levels of project imports below the script are read.
_IMPORT_DEPTH = 2


@dataclass(frozen=True)
class LaunchedCode:
    """The script (``script`` as a path to show) and the project files it imports."""

    script: str
    files: tuple[FileFacts, ...]

    @property
    def uses_hf_trainer(self) -> bool:
        return any(facts.uses_hf_trainer for facts in self.files)

    def smp_calls(self, *members: str) -> Iterator[tuple[FileFacts, cst.Call]]:
        """Calls of the library's ``members`` (``"set_activation_checkpointing"``) in any of the
        files."""
        for facts in self.files:
            for call in facts.library_calls(*members):
                yield facts, call


def launched_code(program: Program, view: ConfigView) -> Optional[LaunchedCode]:
    """The code ``view`` configures, or None when smpfix cannot read it."""
    modules = program.modules
    if modules is None:
        return None
    if view.kind in ("smp.init", "tsm.init"):
        return LaunchedCode(
            "this script",
            (
                program.facts,
                *(linked.facts for linked in modules.imported_closure(program.file, _IMPORT_DEPTH)),
            ),
        )
    path = view.launcher.script if view.launcher is not None else None
    found = modules.script_with_imports(path, _IMPORT_DEPTH) if path is not None else None
    if path is None or found is None:
        return None
    shown = os.path.relpath(path, os.path.dirname(os.path.abspath(program.path)))
    return LaunchedCode(shown, tuple(linked.facts for linked in found))
