"""The dict a script builds for ``smp.init`` in code or from a file, with its command line known.

``smp.init({...})`` with a dict display is read from the tree (``FileFacts.init_config``).
A script that builds the dict first, or loads it from a JSON or YAML file whose path comes
from its command line (``--config configs/smp.yaml``), is replayed instead
(``smpfix.job.script_config``), with ``args.<dest>`` given the value the script's launchers
pass, else its argparse default (``argument_value``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.job.linking import LinkedScript
from smpfix.job.script_config import BuiltConfig, built_config
from smpfix.program.flow.command_line import argument_value, command_line_arguments
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import ParsedFile


def built_init_config(
    file: ParsedFile, modules: Optional[LocalModules], launchers: Sequence[LinkedScript]
) -> Optional[tuple[cst.Call, BuiltConfig]]:
    """The first ``smp.init`` call of ``file`` that passes a dict it builds, and that dict;
    None when every call passes a display (or nothing), or the dict cannot be built."""
    facts = file.facts
    if facts.init_config_call is not None:
        return None
    calls = [call for call in facts.smp_init_calls if _passes_built(call)]
    if not calls:
        return None
    files = [file, *(modules.imported_modules(facts) if modules is not None else ())]
    arguments = command_line_arguments(files)

    def attribute(node: cst.Attribute) -> Optional[Any]:
        if type(node.value) is not cst.Name:
            return None
        found = argument_value(node.attr.value, arguments, launchers)
        return found.value if found is not None and isinstance(found.value, str) else None

    for call in calls:
        built = built_config(file.module, facts.imports, call, file.path, attribute)
        if built is not None:
            return call, built
    return None


def _passes_built(call: cst.Call) -> bool:
    config = argument(call, "config", 0)
    return config is not None and type(config.value) is not cst.Dict
