"""Which functions of a file reach a call every rank must make, for callers in other files.

A script that guards ``evaluate(model, loader)`` with ``if smp.rank() == 0:`` hangs when
``evaluate``, defined in the project's ``engine.py``, runs an ``@smp.step`` function or saves a
checkpoint: the ranks left out never enter it. This is the summary a caller needs of such a
function: the first library collective it reaches, directly or through the functions of its
own file (``LocalCalls``), to any depth. Only what needs no job to judge is listed: step
functions, ``smp.save_checkpoint``/``smp.resume_from_checkpoint`` and the barriers, with the
group each runs over.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.program.order.call_graph import LocalCalls
from smpfix.program.project.parsed_file import ParsedFile
from smpfix.program.steps import NESTED_SCOPES, own_nodes

# The collectives over every rank, by member, with their kind.
_WORLD = {
    "save_checkpoint": "checkpoint",
    "resume_from_checkpoint": "checkpoint",
    "barrier": "barrier",
}
# The barriers of one group each, with the group (``smp.barrier()`` waits for every rank).
GROUP_BARRIERS = {
    "dp_barrier": "DP_GROUP",
    "mp_barrier": "MP_GROUP",
    "pp_barrier": "PP_GROUP",
    "tp_barrier": "TP_GROUP",
    "rdp_barrier": "RDP_GROUP",
}


@dataclass(frozen=True)
class Reached:
    """The collective call a function reaches: its kind ("step", "checkpoint", "barrier") and
    the group of ranks that must all make it."""

    call: cst.Call
    kind: str
    group: str


@dataclass(frozen=True)
class FunctionCollectives:
    """For each function of a file (by name), the first collective it reaches."""

    reached: Mapping[str, Reached]

    @classmethod
    def of_file(cls, file: ParsedFile) -> FunctionCollectives:
        facts = file.facts
        direct: dict[str, Reached] = {}
        for name, function in facts.functions.items():
            found = _first_collective(function, file)
            if found is not None:
                direct[name] = found
        calls = file.answer(LocalCalls)
        reached = dict(direct)
        for name in facts.functions:
            if name in reached:
                continue
            for callee in sorted(calls.reached_from([name]) - {name}):
                if callee in direct:
                    reached[name] = direct[callee]
                    break
        return cls(reached)

    def get(self, name: str) -> Optional[Reached]:
        return self.reached.get(name)


def _first_collective(function: cst.FunctionDef, file: ParsedFile) -> Optional[Reached]:
    facts = file.facts
    # In source order, from the file's index (a function of another tree: as found).
    in_order = file.index.own_nodes(function.body, NESTED_SCOPES) or own_nodes(function)
    for node in in_order:
        if type(node) is not cst.Call:
            continue
        func = node.func
        if type(func) is cst.Name and func.value in facts.step_functions:
            return Reached(node, "step", "WORLD")
        member = facts.smp_member(func)
        if member in _WORLD and not (member == "barrier" and node.args):
            return Reached(node, _WORLD[member], "WORLD")
        if member in GROUP_BARRIERS:
            return Reached(node, "barrier", GROUP_BARRIERS[member])
    return None
