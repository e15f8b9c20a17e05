"""The program model: one object per checked file that every rule asks, built lazily and once.

A rule reaches everything smpfix knows about the file through ``self.program``:

- the file: its path, tree, ``facts`` (imports and qualified names, assignments, the wrapped
  model and optimizer, step functions, evidence), node index and parents;
- the questions about the tree alone, kept with the parse (``ParsedFile.answer``) so a helper
  module imported by many scripts answers them once: reaching definitions (``reaching``),
  a name's value (``values``), the order calls run in (``order``), who calls whom (``calls``),
  the step functions (``steps``);
- the questions that also need the job, the launchers or the scripts importing a helper,
  kept for this analysis: folded conditions (``conditions``), the branches the job takes
  (``branches``), the script's numbers (``numbers``), the tensor-parallel marking
  (``tp_replacement``), the loaders that feed training (``training_loaders``), the functions
  of a script nothing in the project calls (``uncalled``);
- the project's other files (``modules``) and, for a helper module, the scripts importing
  it (``importers``).

Every answer is typed and worked out the first time it is asked. A question another layer
owns (a rule family's configuration views) is asked with ``answer(kind)``, which keeps it for
this analysis the same way.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Optional, Protocol, TypeVar

import libcst as cst

from smpfix.base.parents import ParentIndex
from smpfix.base.walker import NodeIndex
from smpfix.job.jobfacts import JobFacts
from smpfix.job.linking import LinkedScript
from smpfix.program.data.training_loaders import TrainingLoaders
from smpfix.program.facts import FileFacts
from smpfix.program.flow.command_line import command_line_arguments
from smpfix.program.flow.dataclass_arguments import dataclass_arguments
from smpfix.program.flow.script_numbers import ScriptNumbers
from smpfix.program.names import Names
from smpfix.program.objects.tp_marking import Replacement, module_replacement
from smpfix.program.order.call_graph import LocalCalls
from smpfix.program.order.execution import ExecutionOrder
from smpfix.program.order.uncalled import UncalledFunctions
from smpfix.program.paths.branches import Branches
from smpfix.program.paths.conditions import Conditions
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import ParsedFile
from smpfix.program.steps import StepFunctions

Q = TypeVar("Q", bound="PerProgram")


class PerProgram(Protocol):
    """A question about one analysis that a higher layer owns (a rule family's shared views)."""

    @classmethod
    def of_program(cls: type[Q], program: Program) -> Q: ...


class Program:
    """What one checked file does, for one job: the one model every rule of the file asks."""

    def __init__(
        self,
        file: ParsedFile,
        job: JobFacts,
        modules: Optional[LocalModules] = None,
        importers: tuple[ParsedFile, ...] = (),
    ) -> None:
        """``modules`` resolves the file's imports of other project files (None for a lone
        text); ``importers`` are the scripts a helper module is checked for."""
        self.file = file
        # The file's own parts, read as often as every rule asks (plain attributes, not properties).
        self.path: str = file.path
        self.module: cst.Module = file.module
        self.facts: FileFacts = file.facts
        self.index: NodeIndex = file.index
        self.job = job
        self.modules = modules
        self.importers = importers
        self._answers: dict[type, Any] = {}

    # -- the file --------------------------------------------------------------------------
    @property
    def parents(self) -> ParentIndex:
        return self.file.parents

    def code_for(self, node: cst.CSTNode) -> str:
        return self.file.module.code_for_node(node)

    # -- questions about the tree (kept with the parse) ---------------------------------------
    @property
    def names(self) -> Names:
        """Every plain assignment, the definitions of a name that reach a use, and the value a
        name holds there: the one resolver every question about a name's value uses."""
        return self.file.facts.names

    @property
    def steps(self) -> StepFunctions:
        """The step functions, their bodies and the names callers use for them."""
        return self.file.answer(StepFunctions)

    @property
    def calls(self) -> LocalCalls:
        """Which local functions call which, by name."""
        return self.file.answer(LocalCalls)

    @property
    def order(self) -> ExecutionOrder:
        """The file's calls in the order they run from its top."""
        return self.file.answer(ExecutionOrder)

    # -- questions that need the job, the launchers or the importing scripts -----------------
    @cached_property
    def launchers(self) -> tuple[LinkedScript, ...]:
        """The launchers of the file (of the scripts importing it, for a helper module)."""
        if self.modules is None:
            return ()
        owners = [importer.path for importer in self.importers] or [self.path]
        return tuple(
            launcher for owner in owners for launcher in self.modules.project.launchers_of(owner)
        )

    @cached_property
    def conditions(self) -> Conditions:
        """Conditions of the file folded to values in this job."""
        files: list[ParsedFile] = [self.file, *self.importers]
        if self.modules is not None:
            for owner in [self.file, *self.importers]:
                files += self.modules.for_importer(owner.path).imported_modules(owner.facts)
        scripts = [importer.facts for importer in self.importers]
        arguments = command_line_arguments(files)
        for dest, fields in dataclass_arguments(files).items():
            arguments.setdefault(dest, []).extend(fields)
        modules = [file.facts for file in files]
        return Conditions(self.facts, self.job, arguments, self.launchers, scripts, modules)

    @cached_property
    def branches(self) -> Branches:
        """Which of its branches the file takes in this job."""
        return Branches(self.module, self.conditions, self.parents)

    @cached_property
    def numbers(self) -> ScriptNumbers:
        """Integers the file computes: batch sizes, microbatches, group sizes."""
        return ScriptNumbers(self.file, self.job, self.modules)

    @cached_property
    def tp_replacement(self) -> Replacement:
        """Whether ``smp.DistributedModel`` replaces modules for tensor parallelism here."""
        return module_replacement(self.file, self.modules, self.conditions)

    @cached_property
    def uncalled(self) -> UncalledFunctions:
        """The functions of a script that nothing in the project calls."""
        return UncalledFunctions.of_file(self.file, self.modules)

    @cached_property
    def training_loaders(self) -> TrainingLoaders:
        """The DataLoaders a training step reads, here and in the scripts importing the file."""
        return TrainingLoaders(self.file, self.importers, self.modules)

    def answer(self, kind: type[Q]) -> Q:
        """``kind.of_program(self)``, worked out once for this analysis."""
        found = self._answers.get(kind)
        if found is None:
            found = self._answers[kind] = kind.of_program(self)
        return found  # type: ignore[no-any-return]
