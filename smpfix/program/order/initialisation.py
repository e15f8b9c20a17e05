"""Is the library initialised at a given call: before it, does ``smp.init()`` run, or did
importing the library already initialise it?

Version 1.12 of the library initialises itself when it is imported inside a SageMaker MPI
launch (``SM_HP_MP_PARAMETERS`` and ``OMPI_COMM_WORLD_RANK`` set) unless ``SMP_MANUAL_INIT=1``;
its later ``smp.init()`` then returns at once. Version 1.7 has no such code: the script's
``smp.init()`` is the initialisation. So a library call before ``smp.init()`` works by accident
under a SageMaker launch of a recent release, and fails (or silently does nothing) otherwise.

``InitialisationMode`` says which of these the job is; ``initialised_before`` says whether an
initialisation runs before a call on its path: an ``smp.init()`` of the file, a local function
that calls it, a function of another project module that calls it, or what initialises the
library implicitly (the Hugging Face ``TrainingArguments``, whose device set-up calls
``smp.init()`` when SageMaker model parallelism is enabled; importing
``transformers.sagemaker``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable, Optional

import libcst as cst

from smpfix.job.jobfacts import JobFacts, Tri
from smpfix.program.facts import FileFacts
from smpfix.program.order.execution import ExecutionOrder, Run, happens
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import ParsedFile

_TRAINING_ARGUMENTS = ("TrainingArguments", "Seq2SeqTrainingArguments")
_ARGUMENT_PARSERS = frozenset(
    {"parse_args_into_dataclasses", "parse_json_file", "parse_dict", "parse_yaml_file"}
)
# Modules whose import initialises the library inside a SageMaker model-parallel launch:
# ``transformers.training_args`` runs ``smp.init()`` at import when SageMaker model
# parallelism is enabled, and the Trainer modules and ``transformers.sagemaker`` import it.
_INITIALISING_IMPORTS = (
    "transformers.sagemaker",
    "transformers.training_args",
    "transformers.training_args_seq2seq",
    "transformers.trainer",
    "transformers.trainer_seq2seq",
)
# The names under which ``transformers`` exports what those modules define.
_INITIALISING_NAMES = frozenset(
    {
        "transformers.TrainingArguments",
        "transformers.Seq2SeqTrainingArguments",
        "transformers.Trainer",
        "transformers.Seq2SeqTrainer",
    }
)


class Mode(str, enum.Enum):
    """Who initialises the library in this job."""

    ON_IMPORT = "on import"  # a SageMaker launch of a release that initialises on import
    BY_SCRIPT = "by the script"  # only the script's smp.init() does
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class InitialisationMode:
    mode: Mode
    reason: str


def initialisation_mode(facts: FileFacts, job: JobFacts) -> InitialisationMode:
    """Whether the library initialises itself on import in this job, and how smpfix knows: the
    script's own ``SMP_MANUAL_INIT=1``, else the job's launcher and version
    (``JobFacts.on_import``).
    """
    if script_sets_manual_init(facts):
        return InitialisationMode(Mode.BY_SCRIPT, "the script sets SMP_MANUAL_INIT=1")
    mode = {Tri.ON: Mode.ON_IMPORT, Tri.OFF: Mode.BY_SCRIPT, Tri.UNKNOWN: Mode.UNKNOWN}[
        job.on_import
    ]
    return InitialisationMode(mode, job.on_import_reason)


def script_sets_manual_init(facts: FileFacts) -> bool:
    """``os.environ["SMP_MANUAL_INIT"] = "1"`` (or ``setdefault``/``putenv``) in the script."""
    for statement in facts.statements:
        if type(statement) is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if type(small) is cst.Assign:
                for target in small.targets:
                    key = _environ_key(facts, target.target)
                    if key is not None and _manual_init(facts, key, small.value):
                        return True
    for call in facts.call_order:
        func = call.func
        if (
            type(func) is cst.Attribute
            and func.attr.value in ("setdefault", "putenv")
            and len(call.args) >= 2
        ):
            if facts.qualified_name(func) in ("os.environ.setdefault", "os.putenv"):
                if _manual_init(facts, call.args[0].value, call.args[1].value):
                    return True
    return False


def _environ_key(facts: FileFacts, target: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    if (
        type(target) is cst.Subscript
        and facts.qualified_name(target.value) == "os.environ"
        and len(target.slice) == 1
    ):
        index = target.slice[0].slice
        if type(index) is cst.Index:
            return index.value
    return None


def _manual_init(facts: FileFacts, key: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    return facts.literal(key) == "SMP_MANUAL_INIT" and str(facts.literal(value)) == "1"


def imports_initialise(facts: FileFacts) -> bool:
    """The file imports a module that initialises the library when imported (inside a
    SageMaker launch with model parallelism enabled, which is where the library runs)."""
    return any(
        value in _INITIALISING_NAMES
        or any(value == name or value.startswith(name + ".") for name in _INITIALISING_IMPORTS)
        for value in facts.imports.bindings.values()
    )


class Initialisations:
    """Tests of runs: "is this an initialisation?" for one file, built once per rule."""

    def __init__(self, file: ParsedFile, modules: Optional[LocalModules]) -> None:
        facts = self.facts = file.facts
        self.modules = modules
        self.explicit: Callable[[Run], bool] = happens(
            file.module, lambda call: facts.is_smp_call(call, "init")
        )
        self._imported: dict[int, bool] = {}
        # Answers that depend on the file alone or on the function called, not on the call.
        self._training_arguments: Optional[bool] = None
        self._initialising: dict[int, tuple[cst.FunctionDef, bool]] = {}

    def any(self, run: Run) -> bool:
        """An explicit ``smp.init()``, or something that initialises the library implicitly."""
        return self.explicit(run) or self.implicit(run.call) or self.imported(run.call)

    def implicit(self, call: cst.Call) -> bool:
        """Building Hugging Face training arguments (their device set-up calls ``smp.init()``)."""
        qualified = self.facts.qualified_name(call.func) or ""
        if qualified.startswith("transformers.") and qualified.endswith(_TRAINING_ARGUMENTS):
            return True
        func = call.func
        return (
            type(func) is cst.Attribute
            and func.attr.value in _ARGUMENT_PARSERS
            and self._uses_training_arguments()
        )

    def _uses_training_arguments(self) -> bool:
        if self._training_arguments is None:
            self._training_arguments = any(
                value.startswith("transformers") and value.endswith(_TRAINING_ARGUMENTS)
                for value in self.facts.imports.bindings.values()
            )
        return self._training_arguments

    def imported(self, call: cst.Call) -> bool:
        """A function of another project module that calls ``smp.init()`` itself."""
        if self.modules is None:
            return False
        known = self._imported.get(id(call))
        if known is None:
            known = self._imported[id(call)] = self._imported_init(call)
        return known

    def _imported_init(self, call: cst.Call) -> bool:
        assert self.modules is not None
        qualified = self.facts.qualified_name(call.func)
        if qualified is None or qualified.startswith(("smdistributed.", "torch.", "transformers.")):
            return False
        found = self.modules.definition(qualified)
        if found is None:
            return False
        linked, name = found
        function = linked.facts.functions.get(name)
        if function is None:
            return False
        known = self._initialising.get(id(function))
        if known is None or known[0] is not function:
            from smpfix.base.walker import iter_nodes

            calls_init = any(
                linked.facts.is_smp_call(node, "init") for node in iter_nodes(function)
            )
            known = self._initialising[id(function)] = (function, calls_init)
        return known[1]


def initialised_before(order: ExecutionOrder, run: Run, inits: Initialisations) -> bool:
    """Whether an initialisation can have run before ``run`` on its path."""
    return bool(order.before(run, inits.any))


def init_dict_keys(facts: FileFacts) -> frozenset[str]:
    """The keys the script's ``smp.init({...})`` dict sets, whatever their values (a key set to
    ``not args.manual_partition`` is set, just not known): a dict display, or a name assigned
    one once."""
    from smpfix.base.calls import argument

    keys: set[str] = set()
    for call in facts.smp_init_calls:
        given = argument(call, "config", 0)
        value = given.value if given is not None else None
        if type(value) is cst.Name:
            assignment = facts.names.assignment(value.value, value)
            value = assignment.value if assignment is not None else None
        if type(value) is cst.Dict:
            for element in value.elements:
                if type(element) is cst.DictElement:
                    key = facts.literal(element.key)
                    if isinstance(key, str):
                        keys.add(key)
    return frozenset(keys)
