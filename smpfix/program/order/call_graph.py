"""Which local functions call which, by name, to answer "does this run inside a step?".

A step function's body runs once per microbatch, and so does every local function it calls
(``def forward(x): return model(x)`` called from ``@smp.step def train(...)``). The other
way, a function that calls a step function (``@tf.function def train_step(...)`` calling
``get_grads``) drives the steps: its calls are where training happens. Both are followed
through plain-name calls of functions defined in the file, to any depth; methods, calls
through variables and functions of other modules are not followed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.walker import iter_nodes
from smpfix.program.project.parsed_file import ParsedFile
from smpfix.program.steps import StepFunctions


@dataclass(frozen=True)
class LocalCalls:
    """For each local function (by name), the plain names its body calls."""

    callees: Mapping[str, frozenset[str]]

    @classmethod
    def of_file(cls, file: ParsedFile) -> LocalCalls:
        """The call graph of the file's functions, by name."""
        return cls({name: frozenset(_called_names(f)) for name, f in file.facts.functions.items()})

    def reached_from(self, names: Iterable[str]) -> frozenset[str]:
        """``names`` and every local function they call, directly or not."""
        found = set(names)
        pending = list(found)
        while pending:
            for callee in self.callees.get(pending.pop(), ()):
                if callee not in found and callee in self.callees:
                    found.add(callee)
                    pending.append(callee)
        return frozenset(found)

    def reaching(self, names: Iterable[str]) -> frozenset[str]:
        """``names`` and every local function that calls one of them, directly or not."""
        found = set(names)
        changed = True
        while changed:
            changed = False
            for caller, callees in self.callees.items():
                if caller not in found and callees & found:
                    found.add(caller)
                    changed = True
        return frozenset(found)


def _called_names(function: cst.FunctionDef) -> set[str]:
    return {
        node.func.value
        for node in iter_nodes(function.body)
        if type(node) is cst.Call and type(node.func) is cst.Name
    }


def run_inside_steps(file: ParsedFile) -> frozenset[str]:
    """The step functions' bodies (by ``def`` name) and every local function they call: all
    of it runs once per microbatch, inside the partitioned graph."""
    bodies = {body.name.value for body in file.answer(StepFunctions).bodies}
    return file.answer(LocalCalls).reached_from(bodies)


def innermost_function(stack: Sequence[cst.CSTNode], names: frozenset[str]) -> Optional[str]:
    """The name of the innermost ``def`` on ``stack`` (an ancestry) that is one of ``names``."""
    for node in reversed(stack):
        if type(node) is cst.FunctionDef and node.name.value in names:
            return node.name.value
    return None
