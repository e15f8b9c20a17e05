"""SMP106: a training script that uses the library but never calls ``smp.init()``."""

from __future__ import annotations

from typing import Optional, Union

import libcst as cst

from smpfix.base.edits import InsertStatementAfter, NodeEdit
from smpfix.base.findings import Applicability, Severity
from smpfix.base.flavour import BOTH
from smpfix.base.imports import SMP_TF, SMP_TORCH, dotted_name
from smpfix.base.walker import Ancestry
from smpfix.fixes.references import smp_reference
from smpfix.job.jobfacts import Tri
from smpfix.job.versions import LAST_WITHOUT_AUTO_INIT
from smpfix.program.facts import RANK_FUNCTIONS, SIZE_FUNCTIONS, FileFacts
from smpfix.program.model import Program
from smpfix.program.order.initialisation import imports_initialise, script_sets_manual_init
from smpfix.program.order.uncalled import has_main_block
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism

# Members a helper module may use without being the script that initialises the library.
_QUERIES = (
    RANK_FUNCTIONS | SIZE_FUNCTIONS | {"is_initialized", "is_tracing", "num_microbatches", "state"}
)
_LIBRARY = "smdistributed.modelparallel"

ImportNode = Union[cst.Import, cst.ImportFrom]


def _imports_library(node: ImportNode) -> bool:
    if isinstance(node, cst.Import):
        return any((dotted_name(alias.name) or "").startswith(_LIBRARY) for alias in node.names)
    if node.relative or node.module is None:
        return False
    module = dotted_name(node.module) or ""
    if module == "smdistributed":
        return not isinstance(node.names, cst.ImportStar) and any(
            dotted_name(alias.name) == "modelparallel" for alias in node.names
        )
    return module.startswith(_LIBRARY)


def _initialises(facts: FileFacts) -> bool:
    """The file calls ``smp.init()`` or imports what initialises the library."""
    return bool(facts.smp_init_calls) or imports_initialise(facts)


class MissingSmpInit(Rule):
    flavours = BOTH
    summary = (
        "A training script that uses the library must call `smp.init()` before anything else; add"
        " it after the import."
    )
    fix_availability = FixAvailability.SAFE
    default_severity = Severity.WARNING
    satisfied_by_hf_trainer = True
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        # Most scripts call `smp.init()`: nothing to look for there.
        return not facts.smp_init_calls

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self._top_level_imports: list[tuple[cst.SimpleStatementLine, ImportNode]] = []
        self._first_import: Optional[ImportNode] = None
        self._driver_use: Optional[str] = None
        self._called: set[str] = set()
        # A library call or a step call that runs when the module is imported, not inside a
        # function a script calls.
        self._runs_on_import = False
        self._main_guard = False
        self._manual_init = script_sets_manual_init(self.program.facts)

    # -- what the file does ------------------------------------------------------------------
    def _visit_import(self, node: ImportNode) -> None:
        if not _imports_library(node):
            return
        if self._first_import is None:
            self._first_import = node
        line, module = self.ancestry.parent(1), self.ancestry.parent(2)
        if type(line) is cst.SimpleStatementLine and type(module) is cst.Module:
            self._top_level_imports.append((line, node))

    def visit_Import(self, node: cst.Import) -> None:
        self._visit_import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._visit_import(node)

    def visit_Call(self, node: cst.Call) -> None:
        member = self.program.facts.smp_member(node.func)
        if (
            member is not None
            and member != "init"
            and member not in _QUERIES
            and not member.startswith("get_")
        ):
            self._driver_use = self._driver_use or member
            self._note_import_time_use()
        if type(node.func) is cst.Name:
            self._called.add(node.func.value)
            if node.func.value in self.program.facts.step_functions:
                self._note_import_time_use()

    def _note_import_time_use(self) -> None:
        if not self._runs_on_import and self.ancestry.nearest(cst.FunctionDef) is None:
            self._runs_on_import = True

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        # TensorFlow models subclass `smp.DistributedModel`.
        for base in node.bases:
            if self.program.facts.smp_member(base.value) == "DistributedModel":
                self._driver_use = self._driver_use or "DistributedModel"

    # -- the decision ------------------------------------------------------------------------
    def _entry_point(self) -> Optional[str]:
        """What shows this file is the training script (not a helper that only asks for ranks)."""
        if self.program.facts.distributed_models:
            return "DistributedModel"
        if self.program.facts.distributed_optimizers:
            return "DistributedOptimizer"
        if self.program.facts.step_functions & self._called:
            return "step"
        if self._main_guard and self._driver_use is not None:
            return self._driver_use
        return None

    def _initialised_by_sibling(self) -> bool:
        """One level into the project: a helper module the script imports (``utils.setup_smp()``)
        may call ``smp.init()`` for it, or import what initialises the library; smpfix cannot
        tell whether that helper runs, so it trusts it."""
        modules = self.program.modules
        if modules is None:
            return False
        return any(
            _initialises(linked.facts) for linked in modules.imported_modules(self.program.facts)
        )

    def _judged_with_importers(self) -> bool:
        """A wrapper module (no ``__main__`` block) is judged with the scripts that import it
        (a file of its folder, or a launched script above it through its package): its code
        runs when a script calls it, after that script's ``smp.init()``, so a module that builds
        the ``DistributedModel`` for a script is not a script of its own. A module of a package
        whose library calls all run inside its functions is a library module: when no script
        smpfix knows imports it (only other modules of its package do), the script that does
        is out of sight (behind a shell script, or through the package's ``__init__``), and it
        is not judged at all."""
        modules = self.program.modules
        if self._main_guard or modules is None:
            return False
        path = self.program.path
        siblings = modules.sibling_importers(path)
        launched = modules.launched_importers(path)
        importers = {importer.path: importer for importer in (*siblings, *launched)}
        if any(
            _initialises(importer.facts)
            or any(
                _initialises(helper.facts)
                for helper in modules.for_importer(importer.path).imported_modules(importer.facts)
            )
            for importer in importers.values()
        ):
            return True
        project = modules.project
        if self._runs_on_import or not project.is_package_module(path):
            return False
        return not launched and all(
            project.is_package_module(importer.path) and not has_main_block(importer.module)
            for importer in siblings
        )

    def leave_Module(self, node: cst.Module) -> None:
        if self.program.facts.smp_init_calls or self._first_import is None:
            return
        self._main_guard = has_main_block(node)
        used = self._entry_point()
        # Importing the Hugging Face Trainer or its arguments runs `smp.init()` (the official
        # Trainer examples rely on it).
        if (
            used is None
            or imports_initialise(self.program.facts)
            or self._initialised_by_sibling()
            or self._judged_with_importers()
        ):
            return
        anchor = self._top_level_imports[-1] if self._top_level_imports else None
        target: cst.CSTNode = anchor[1] if anchor is not None else self._first_import
        tensorflow = self.program.facts.is_tensorflow
        # The TensorFlow flavour never initialises itself on import (its `init()` is never called
        # for you);
        # import-time initialisation of the PyTorch flavour exists in 1.12.1 and not in 1.7 (library
        # source): a job known to run 1.7 or older never initialises by itself.
        no_auto_init = (
            not tensorflow
            and self.program.job.version_applies(None, LAST_WITHOUT_AUTO_INIT) is Tri.ON
        )
        severity = (
            Severity.ERROR if self._manual_init or tensorflow or no_auto_init else Severity.WARNING
        )
        flavour = SMP_TF if tensorflow else SMP_TORCH
        reference = smp_reference(self.program.file, "init", flavour)
        spelled = reference.text if reference is not None else "smp.init"
        if tensorflow:
            why = (
                "the TensorFlow flavour of the library never initialises itself on import, so it"
                " has no configuration"
            )
        elif self._manual_init:
            why = (
                "this script sets SMP_MANUAL_INIT=1, so the library does not initialise itself on"
                " import"
            )
        elif no_auto_init:
            why = (
                f"{self.version_condition(until=LAST_WITHOUT_AUTO_INIT)}, and releases up to 1.7"
                " never initialise themselves on import, so the library has no configuration"
            )
        else:
            why = (
                "only inside a SageMaker MPI launch, and only in later releases (1.12 does, 1.7"
                " does not), does importing the library initialise it; anywhere else, or with"
                " SMP_MANUAL_INIT=1, the library has no configuration"
            )
        title = f"`{spelled}()` is never called before `smp.{used}`: " + (
            "the first library call fails"
            if severity is Severity.ERROR
            else "fails without import-time init"
        )
        explanation = (
            f"This training script uses `smp.{used}` but never calls `{spelled}()`: {why}, and the"
            f" first library call fails. Call `{spelled}()` right after the import, before any"
            " other library call."
        )
        self.report(
            target,
            title,
            explanation=explanation,
            severity=severity,
            fix=self._fix(node, anchor, flavour),
        )

    def _fix(
        self,
        module: cst.Module,
        anchor: Optional[tuple[cst.SimpleStatementLine, ImportNode]],
        flavour: str,
    ) -> Optional[PendingFix]:
        if anchor is None:
            return None
        reference = smp_reference(self.program.file, "init", flavour)
        if reference is None:
            return None
        statement = cst.parse_statement(f"{reference.text}()\n", config=module.config_for_parsing)
        assert type(statement) is cst.SimpleStatementLine
        edits: tuple[NodeEdit, ...] = (
            *reference.edits,
            InsertStatementAfter(anchor[0], statement, module),
        )
        return PendingFix(
            Applicability.SAFE, f"Call `{reference.text}()` after the library import", edits
        )
