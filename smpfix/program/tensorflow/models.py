"""TensorFlow distributed models whose class lives in another project file.

In TensorFlow the distributed model is an instance of a ``smp.DistributedModel`` subclass.
The facts of one file know the subclasses it defines; a script that writes
``from model import Net`` and ``model = Net()`` needs ``model.py`` read to know that ``model``
is distributed. This completes the facts with those instances, read through
``LocalModules`` (checked paths only), for the rules that follow the model.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

import libcst as cst

from smpfix.program.facts import FileFacts, Wrap
from smpfix.program.project.local_modules import LocalModules


def with_imported_models(facts: FileFacts, modules: Optional[LocalModules]) -> FileFacts:
    """``facts`` whose ``distributed_models`` also hold instances of subclasses imported from
    project files."""
    if modules is None or not facts.is_tensorflow:
        return facts
    known = {id(wrap.call) for wrap in facts.distributed_models}
    extra: list[Wrap] = []
    for name, assignments in facts.assignments.items():
        for assignment in assignments:
            call = assignment.value
            if type(call) is not cst.Call or id(call) in known:
                continue
            if imported_model_class(facts, call, modules) is not None:
                extra.append(Wrap(call, name, call, assignment.where))
    return (
        replace(facts, distributed_models=(*facts.distributed_models, *extra)) if extra else facts
    )


def imported_model_class(facts: FileFacts, call: cst.Call, modules: LocalModules) -> Optional[str]:
    """The name of the ``smp.DistributedModel`` subclass ``call`` instantiates, when a project file
    defines it."""
    qualified = facts.qualified_name(call.func)
    if qualified is None or qualified.startswith(("smdistributed.", "tensorflow.", "keras.")):
        return None
    found = modules.definition(qualified)
    if found is None:
        return None
    linked, name = found
    return name if name in linked.facts.distributed_model_classes else None
