"""Integers a training script computes from what smpfix can know: batch sizes, microbatch
counts, replica counts.

A batch size is rarely a literal in place: it is a name bound once, ``args.batch_size``
(the argparse default, or the launcher's hyperparameter that overrides it), a product such as
``args.per_gpu_batch * smp.tp_size()``, or a rank-group size (``smp.dp_size()``) that the
job's launch numbers decide. ``ScriptNumbers.resolve`` gives the value and, in words, where it
came from, for messages that show their arithmetic; ``microbatches`` gives the job's
microbatch count, also when the script's ``smp.init({...})`` dict reads it from argparse.
A value resting on an argparse default while no launcher of the script is known is
``assumed``: the job may still pass another one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.literals import dict_entries
from smpfix.job.groups import group_size
from smpfix.job.jobfacts import InitDict, JobFacts
from smpfix.job.linking import LinkedScript
from smpfix.program.facts import SIZE_FUNCTIONS
from smpfix.program.flow.command_line import (
    CommandLineArgument,
    argument_value,
    assigned_attributes,
    command_line_arguments,
)
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import ParsedFile

_MAX_DEPTH = 6
# World sizes outside the library: every process of the MPI launch.
_WORLD_SIZES = frozenset(
    {
        "torch.distributed.get_world_size",
        "horovod.torch.size",
        "horovod.tensorflow.size",
        "horovod.tensorflow.keras.size",
    }
)


@dataclass(frozen=True)
class ResolvedNumber:
    """A number and, in words, where it came from (empty for a literal written in place).
    ``assumed``: it rests on an argparse default and no launcher of the script is known, so
    the job may still pass another value as a hyperparameter."""

    value: int
    how: str
    assumed: bool = False


class ScriptNumbers:
    """Resolves integer expressions of one file; build once per rule and file."""

    def __init__(self, file: ParsedFile, job: JobFacts, modules: Optional[LocalModules]) -> None:
        self.file = file
        self.facts = file.facts
        self.job = job
        self.module = file.module
        self.modules = modules
        self.path = file.path
        self._arguments: Optional[dict[str, list[CommandLineArgument]]] = None

    def resolve(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[ResolvedNumber]:
        """An int expression: a literal, a name bound once, ``args.x`` through argparse, a
        rank-group size (``smp.tp_size()``, ``smp.dp_size()``) from the job, and products of those.
        """
        if depth > _MAX_DEPTH:
            return None
        written = expr
        expr = self.facts.names.value(expr)
        value = self.facts.literal(expr)
        if is_int(value):
            return ResolvedNumber(
                value, "" if expr is written else f"`{self.code(written)}` = {value}"
            )
        if type(expr) is cst.Attribute and type(expr.value) is cst.Name:
            found = self._argument(expr.attr.value)
            if found is not None:
                return ResolvedNumber(
                    found.value, f"`{self.code(expr)}` = {found.value}, {found.how}", found.assumed
                )
        if type(expr) is cst.Call and not expr.args:
            return self._group_size(expr)
        if type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Multiply:
            left, right = self.resolve(expr.left, depth + 1), self.resolve(expr.right, depth + 1)
            if left is not None and right is not None:
                how = "; ".join(part for part in (left.how, right.how) if part)
                return ResolvedNumber(left.value * right.value, how, left.assumed or right.assumed)
        return None

    def microbatches(self) -> Optional[ResolvedNumber]:
        """``microbatches`` from the job; an ``smp.init`` entry like ``args.microbatches`` is read
        through argparse when no other source states the value."""
        setting = self.job.settings.get("microbatches")
        if (
            setting is not None
            and is_int(setting.value)
            and not setting.source.startswith("library default")
        ):
            return ResolvedNumber(int(setting.value), setting.source)
        if "microbatches" in self.job.unknown:
            return None
        # Only a dict the library reads decides (jobfacts: import-time initialisation ignores it).
        written = (
            self._init_entry("microbatches") if self.job.init_dict is InitDict.APPLIES else None
        )
        if written is not None:
            resolved = self.resolve(written)
            if resolved is not None:
                return ResolvedNumber(
                    resolved.value, f"the smp.init({{...}}) dict: {resolved.how}", resolved.assumed
                )
            return None
        if setting is not None and is_int(setting.value):
            return ResolvedNumber(int(setting.value), setting.source)
        return None

    @property
    def launchers(self) -> Sequence[LinkedScript]:
        """The launchers that start this script (none known: argparse defaults are assumed)."""
        return self.modules.project.launchers_of(self.path) if self.modules is not None else ()

    def code(self, node: cst.CSTNode) -> str:
        """The node's code on one line, shortened for a message."""
        code = " ".join(self.module.code_for_node(node).split())
        return code if len(code) <= 40 else code[:37] + "..."

    # -- pieces -------------------------------------------------------------------------------
    def _group_size(self, call: cst.Call) -> Optional[ResolvedNumber]:
        member = self.facts.smp_member(call.func)
        if member in SIZE_FUNCTIONS:
            size = group_size(member, self.job)
            return (
                ResolvedNumber(size.value, f"`smp.{member}()` = {size.value}, from {size.how}")
                if size is not None
                else None
            )
        if self.facts.qualified_name(call.func) in _WORLD_SIZES:
            size = group_size("size", self.job)
            return (
                ResolvedNumber(size.value, f"`{self.code(call)}` = {size.value}, from {size.how}")
                if size is not None
                else None
            )
        return None

    def _init_entry(self, key: str) -> Optional[cst.BaseExpression]:
        call = self.facts.init_config_call
        config = argument(call, "config", 0) if call is not None else None
        if config is None:
            return None
        entry = dict_entries(self.facts.names.value(config.value)).get(key)
        return entry.value if entry is not None else None

    def _argument(self, dest: str) -> Optional[ResolvedNumber]:
        if dest in assigned_attributes(self.facts):
            return None
        launchers = self.launchers
        found = argument_value(dest, self._command_line(), launchers)
        if found is None or not is_int(found.value):
            return None
        return ResolvedNumber(int(found.value), found.how, found.default and not launchers)

    def _command_line(self) -> dict[str, list[CommandLineArgument]]:
        if self._arguments is None:
            files: list[ParsedFile] = [self.file]
            if self.modules is not None:
                files += self.modules.imported_modules(self.facts)
            self._arguments = command_line_arguments(files)
        return self._arguments


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
