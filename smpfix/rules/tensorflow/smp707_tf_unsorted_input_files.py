"""SMP707: input files listed in an order that can differ between ranks feed a ``tf.data`` dataset.

The developer guide's TensorFlow troubleshooting: with multi-node training "the loss may not
converge as expected because the order of training input files may be different on each
node"; "sort the input file names in the training script". ``glob``, ``os.listdir`` and
``tf.io.gfile.glob`` return files in file-system order, and ``tf.data.Dataset.list_files``
shuffles them unless told ``shuffle=False`` or given a seed (TensorFlow's documentation), so
the ranks of one model replica would read different files.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.calls import argument, has_star_kwargs
from smpfix.base.edits import NodeEdit, ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.flavour import ONLY_TENSORFLOW
from smpfix.base.parents import CodeScope
from smpfix.base.walker import Ancestry, iter_nodes
from smpfix.fixes.arguments import append_arguments
from smpfix.fixes.references import smp_reference, spelled
from smpfix.job.groups import DataJob
from smpfix.job.jobfacts import Feature, FeatureState, Tri
from smpfix.program.model import Program
from smpfix.program.objects.wrapped_model import reaching_assignments
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet

# Listings in file-system order; the ones whose items ``sorted`` can order get the fix.
_LISTINGS = {
    "glob.glob": True,
    "glob.iglob": True,
    "os.listdir": True,
    "os.scandir": False,
    "tensorflow.io.gfile.glob": True,
    "tensorflow.io.gfile.listdir": True,
    "tensorflow.compat.v1.gfile.Glob": True,
    "tensorflow.compat.v1.gfile.ListDirectory": True,
    "tensorflow.gfile.Glob": True,
    "tensorflow.gfile.ListDirectory": True,
}
_PATH_LISTINGS = frozenset({"glob", "rglob", "iterdir"})
_PATH_CLASSES = ("pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath")
# Datasets built from a list of file names (the first argument).
_FILE_DATASETS = frozenset(
    {
        "tensorflow.data.TFRecordDataset",
        "tensorflow.data.TextLineDataset",
        "tensorflow.data.FixedLengthRecordDataset",
        "tensorflow.data.Dataset.from_tensor_slices",
        "tensorflow.data.Dataset.from_tensors",
    }
)
_LIST_FILES = frozenset({"tensorflow.data.Dataset.list_files"})
_MAX_DEPTH = 4
_NODES = Feature("NODES", "instance_count", "multi-node training (instance_count > 1)")


class TfUnsortedInputFiles(Rule):
    summary = (
        "Sort the input file names (`sorted(glob.glob(...))`) and seed `list_files`, so every rank"
        " reads the files in the same order."
    )
    flavours = ONLY_TENSORFLOW
    fix_availability = FixAvailability.SOMETIMES_SAFE
    depends_on = ("PP",)
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.reported: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.program.facts.qualified_name(node.func)
        if qualified in _LIST_FILES:
            self._check_list_files(node)
        elif (
            qualified in _FILE_DATASETS
            and node.args
            and not node.args[0].keyword
            and not node.args[0].star
        ):
            function = self.ancestry.nearest(cst.FunctionDef)
            scope: CodeScope = (
                function if type(function) is cst.FunctionDef else self.program.module
            )
            listing = self._listing(node.args[0].value, scope, node, 0)
            if listing is not None and id(listing) not in self.reported:
                self.reported.add(id(listing))
                self._flag_listing(listing, node)

    # -- following the file names ----------------------------------------------------------------
    def _listing(
        self, expr: cst.BaseExpression, scope: CodeScope, before: Optional[cst.Call], depth: int
    ) -> Optional[cst.Call]:
        """The unsorted directory listing ``expr`` carries, if any (None once it is sorted).

        Followed through names (the assignments that reach ``before`` in ``scope``), list
        comprehensions, ``list(...)``, ``+``, and local functions returning a listing.
        """
        if depth > _MAX_DEPTH:
            return None
        if type(expr) is cst.Call:
            func = expr.func
            if type(func) is cst.Name and func.value == "sorted":
                return None
            if self._is_listing(expr):
                return expr
            if type(func) is cst.Name and func.value in ("list", "tuple") and expr.args:
                return self._listing(expr.args[0].value, scope, before, depth + 1)
            if (
                type(func) is cst.Name
                and func.value in self.program.facts.functions
                and func.value not in self.program.facts.classes
            ):
                return self._returned_listing(self.program.facts.functions[func.value], depth + 1)
            return None
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            return self._listing(expr.for_in.iter, scope, before, depth + 1)
        if type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Add:
            return self._listing(expr.left, scope, before, depth + 1) or self._listing(
                expr.right, scope, before, depth + 1
            )
        if type(expr) is cst.Name and not self._sorted_in_place(expr.value):
            for assignment in reaching_assignments(self.program.facts, expr):
                value_before = assignment.value if type(assignment.value) is cst.Call else None
                found = self._listing(assignment.value, scope, value_before, depth + 1)
                if found is not None:
                    return found
        return None

    def _returned_listing(self, function: cst.FunctionDef, depth: int) -> Optional[cst.Call]:
        """The listing a local function returns (``return glob.glob(...)``)."""
        for node in iter_nodes(function.body):
            if type(node) is cst.Return and node.value is not None:
                found = self._listing(node.value, function, None, depth)
                if found is not None:
                    return found
        return None

    def _is_listing(self, call: cst.Call) -> bool:
        if self.program.facts.qualified_name(call.func) in _LISTINGS:
            return True
        func = call.func
        if type(func) is not cst.Attribute or func.attr.value not in _PATH_LISTINGS:
            return False
        receiver = func.value
        if type(receiver) is cst.Name:
            assignment = self.program.facts.names.assignment(receiver.value, receiver)
            receiver = assignment.value if assignment is not None else receiver
        return type(receiver) is cst.Call and (
            self.program.facts.qualified_name(receiver.func) or ""
        ).startswith(_PATH_CLASSES)

    def _sorted_in_place(self, name: str) -> bool:
        """``files.sort()`` somewhere in the file."""
        return any(
            type(call.func) is cst.Attribute
            and call.func.attr.value == "sort"
            and type(call.func.value) is cst.Name
            and call.func.value.value == name
            for call in self.program.facts.call_order
        )

    # -- reports -----------------------------------------------------------------------------------
    def _nodes(self) -> FeatureState:
        """More than one node: ``instance_count`` > 1 (a launcher or ``[tool.smpfix.job]`` states
        it)."""
        setting = self.program.job.settings.get("instance_count")
        if (
            setting is not None
            and isinstance(setting.value, int)
            and not isinstance(setting.value, bool)
        ):
            return FeatureState(
                _NODES, Tri.ON if setting.value > 1 else Tri.OFF, setting.source, setting.value
            )
        return FeatureState(_NODES, Tri.UNKNOWN, "instance_count not known")

    def _flag_listing(self, listing: cst.Call, dataset: cst.Call) -> None:
        nodes = self._nodes()
        severity = {Tri.ON: Severity.ERROR, Tri.UNKNOWN: Severity.WARNING, Tri.OFF: Severity.HINT}[
            nodes.state
        ]
        spelled_listing = self.program.code_for(listing.func)
        sortable = self.program.facts.qualified_name(listing.func) not in ("os.scandir",)
        if nodes.state is Tri.OFF:
            when = (
                f"{nodes.condition()}, where the ranks usually list one file system alike, so this"
                " is a precaution"
            )
        elif nodes.state is Tri.ON:
            when = f"this breaks training because {nodes.condition()}"
        else:
            when = f"this breaks training {nodes.condition()}"
        message = (
            f"`{spelled_listing}(...)` lists files in file-system order, which can differ from node"
            f" to node, and the list feeds `{self.program.code_for(dataset.func)}`: the ranks of"
            " one model replica then read different files, and the developer guide warns that the"
            " loss may not converge; "
            + when
            + f". Sort the file names: `sorted({spelled_listing}(...))`."
        )
        fix = None
        if sortable:
            # One replacement, so a line it makes too long is wrapped as a formatter would.
            edits: tuple[NodeEdit, ...] = (
                ReplaceNode(listing, f"sorted({self.program.code_for(listing)})"),
            )
            fix = PendingFix(Applicability.SAFE, "Sort the file names", edits)
        title = (
            f"{snippet(spelled_listing + '(...)', 24)} is unsorted: file order can differ"
            f" {'between the nodes' if nodes.state is Tri.ON else 'if the job has several nodes'}"
        )
        self.report(
            listing, title, explanation=message, severity=severity, fix=fix, job_facts=(nodes,)
        )

    def _check_list_files(self, call: cst.Call) -> None:
        if has_star_kwargs(call) or argument(call, "seed", 2) is not None:
            return
        shuffle = argument(call, "shuffle", 1)
        if shuffle is not None and self.program.facts.literal(shuffle.value) is not True:
            return  # shuffle=False (or a value smpfix cannot know)
        pp = DataJob.of(self.program.job, self.program.facts.is_tensorflow).pp
        severity = {Tri.ON: Severity.ERROR, Tri.UNKNOWN: Severity.WARNING, Tri.OFF: Severity.HINT}[
            pp.state
        ]
        dp_rank = spelled(
            self.program.file,
            "dp_rank",
            DataJob.of(self.program.job, self.program.facts.is_tensorflow).flavour,
        )
        if pp.state is Tri.OFF:
            when = f"It only matters with pipeline parallelism, and {pp.condition()}."
        else:
            when = f"This is wrong {'because ' if pp.state is Tri.ON else ''}{pp.condition()}."
        message = (
            f"`{self.program.code_for(call.func)}(...)` returns the file names in a random order of"
            " its own on every rank (it shuffles unless given `shuffle=False` or a seed), and the"
            f" pipeline-parallel peers of one model replica must read the same files. {when} Pass"
            f" `seed={dp_rank}` (or `shuffle=False`)."
        )
        fix = None
        reference = smp_reference(
            self.program.file,
            "dp_rank",
            DataJob.of(self.program.job, self.program.facts.is_tensorflow).flavour,
        )
        if reference is not None and call.args:
            insertion = append_arguments(call, [f"seed={reference.text}()"])
            if insertion is not None:
                fix = PendingFix(
                    Applicability.UNSAFE,
                    "Seed `list_files` with `dp_rank()`",
                    (*reference.edits, insertion),
                )
        title = (
            f"{snippet(self.program.code_for(call.func) + '(...)', 24)} shuffles per rank: pipeline"
            f" peers read different files{'' if pp.state is Tri.ON else ' if pipelined'}"
        )
        self.report(call, title, explanation=message, severity=severity, fix=fix, job_facts=(pp,))
