"""What one file does with the library: the questions every rule asks, answered once.

Built from one walk of the tree before the rules run: under which names the library is
imported, which names hold the ``DistributedModel`` and the optimizers, which functions are
step functions, which statement sits in which block, what the ``smp.init({...})`` dict says,
and which constructs show a feature in use. Rules ask these; none of them matches the text
``smp.``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Optional, TypeVar, Union

import libcst as cst

from smpfix.base.flavour import Flavour
from smpfix.base.imports import (
    SMP_TF,
    SMP_TF_V1,
    SMP_TORCH,
    SMP_V2,
    ImportTable,
    dotted_name,
    library_member,
    smp_member,
)
from smpfix.base.literals import UNKNOWN, literal_value
from smpfix.base.parents import CodeScope, ParentIndex
from smpfix.base.walker import NodeIndex, active_index
from smpfix.job.launcher import ESTIMATORS
from smpfix.program.names import Assignment, Names, StatementRef

RANK_FUNCTIONS = frozenset(
    {"rank", "local_rank", "dp_rank", "rdp_rank", "mp_rank", "pp_rank", "tp_rank"}
)
SIZE_FUNCTIONS = frozenset(
    {"size", "local_size", "dp_size", "rdp_size", "mp_size", "pp_size", "tp_size"}
)

_OPTIMIZER_MODULES = (
    "torch.optim.",
    "apex.optimizers.",
    "bitsandbytes.optim.",
    "deepspeed.ops.",
    "torch_optimizer.",
    f"{SMP_TORCH}.optimizers.",
)
_OPTIMIZER_NAMES = frozenset(
    {
        "transformers.AdamW",
        "transformers.Adafactor",
        "transformers.optimization.AdamW",
        "transformers.optimization.Adafactor",
    }
)
_NOT_OPTIMIZERS = ("torch.optim.lr_scheduler", "torch.optim.swa_utils", "torch.optim.Optimizer")
_HF_TRAINERS = frozenset(
    {
        "transformers.Trainer",
        "transformers.Seq2SeqTrainer",
        "transformers.trainer.Trainer",
        "transformers.trainer_seq2seq.Seq2SeqTrainer",
    }
)

T = TypeVar("T")


@dataclass(frozen=True)
class EvidenceNode:
    """A construct that shows a feature in use (``with smp.tensor_parallelism():``)."""

    feature: str
    description: str
    node: cst.CSTNode
    # Weak evidence (the script reads a setting) shows the script is written for the feature
    # but not that the feature is on; only strong evidence turns a feature ON.
    strong: bool = True


# ``nn.Module`` methods that change the module in place and return it.
_SELF_RETURNING = frozenset(
    {"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "train", "eval", "requires_grad_"}
)


@dataclass(frozen=True)
class Wrap:
    """A ``smp.DistributedModel(...)`` or ``smp.DistributedOptimizer(...)`` call.

    In TensorFlow the distributed model is an instance of a subclass of
    ``smp.DistributedModel`` (``model = MyModel()``): its construction is both the call and
    the model it builds, so ``argument`` is the call itself.
    """

    call: cst.Call
    target: Optional[str]
    argument: Optional[cst.BaseExpression]
    where: Optional[StatementRef]

    @property
    def argument_name(self) -> Optional[str]:
        """The wrapped model's name, also through the calls that return the module itself
        (``smp.DistributedModel(model.to(device))``, ``model.cuda()``: ``nn.Module.to`` and its
        kin move the module in place and return it)."""
        node = self.argument
        while (
            type(node) is cst.Call
            and type(node.func) is cst.Attribute
            and node.func.attr.value in _SELF_RETURNING
        ):
            node = node.func.value
        return node.value if type(node) is cst.Name else None


@dataclass(frozen=True)
class FileFacts:
    imports: ImportTable
    statements: Mapping[cst.CSTNode, StatementRef]
    # Every plain assignment, the definitions that reach a use, and the value a name holds.
    names: Names
    functions: Mapping[str, cst.FunctionDef]
    classes: Mapping[str, cst.ClassDef]
    distributed_models: tuple[Wrap, ...]
    distributed_optimizers: tuple[Wrap, ...]
    step_functions: frozenset[str]
    smp_init_calls: tuple[cst.Call, ...]
    init_config: Mapping[str, Any]
    init_config_call: Optional[cst.Call]
    evidence: tuple[EvidenceNode, ...]
    uses_hf_trainer: bool
    local_optimizer_classes: frozenset[str] = field(default=frozenset())
    call_order: Mapping[cst.Call, int] = field(default_factory=dict)
    # The statement holding each call (None for calls outside any statement, e.g. decorators).
    call_statements: Mapping[cst.Call, Optional[StatementRef]] = field(default_factory=dict)
    # SageMaker estimator constructions (this file is a launcher when there are any).
    estimator_calls: tuple[cst.Call, ...] = ()
    # Local classes deriving (directly or through each other) from TensorFlow's
    # ``smp.DistributedModel``.
    distributed_model_classes: frozenset[str] = field(default=frozenset())

    # -- what the file is -------------------------------------------------------------------
    @property
    def imports_smp(self) -> bool:
        return self.imports_smp_torch or self.imports_smp_tf

    @property
    def imports_smp_torch(self) -> bool:
        """The PyTorch flavour (also reached through ``import smdistributed.modelparallel``);
        rules about tensor parallelism or ``DistributedOptimizer`` need it, TensorFlow has neither.
        """
        return self.imports.imports_module(SMP_TORCH) or any(
            value == "smdistributed.modelparallel" for value in self.imports.bindings.values()
        )

    @property
    def imports_smp_v2(self) -> bool:
        """Imports SMP v2 (``torch.sagemaker``): an SMP v2 script, to which no v1 rule applies
        even if it also names v1 (``smpfix.job.smp_v2``)."""
        return self.imports.imports_module(SMP_V2)

    @property
    def imports_smp_tf(self) -> bool:
        """The TensorFlow flavour (``smdistributed.modelparallel.tensorflow``, its ``.v2`` or
        ``.v1``)."""
        return self.imports.imports_module(SMP_TF)

    @property
    def flavours(self) -> frozenset[Flavour]:
        """The flavours of the library this file imports (usually one; none for other files).

        A file that imports only the undocumented TensorFlow 1 API (``.tensorflow.v1``) has
        none the rules know: its step and model are other objects.
        """
        found = set()
        if self.imports_smp_torch:
            found.add(Flavour.PYTORCH)
        if self.imports_smp_tf and not self.tensorflow_v1_only:
            found.add(Flavour.TENSORFLOW)
        return frozenset(found)

    @property
    def is_tensorflow(self) -> bool:
        """A TensorFlow script: it imports the TensorFlow flavour and not the PyTorch one."""
        return self.imports_smp_tf and not self.imports_smp_torch

    @property
    def tensorflow_v1_only(self) -> bool:
        """Only the undocumented TensorFlow 1 API (``.tensorflow.v1``): no ``DistributedModel``
        class, another step."""
        values = [
            v for v in self.imports.bindings.values() if v == SMP_TF or v.startswith(SMP_TF + ".")
        ]
        return bool(values) and all(v == SMP_TF_V1 or v.startswith(SMP_TF_V1 + ".") for v in values)

    @property
    def imports_smp_v2_only(self) -> bool:
        return self.imports_smp_v2 and not self.imports_smp

    # -- names -------------------------------------------------------------------------------
    # ``qualified_name(node)`` and ``smp_member(node)`` are the import table's own methods,
    # set on each instance (``__post_init__``): rules ask them of nearly every call of a file,
    # and a method here that forwards to the table doubled the cost of each answer.
    qualified_name: Callable[[cst.BaseExpression], Optional[str]] = field(
        init=False, repr=False, compare=False
    )
    smp_member: Callable[[cst.BaseExpression], Optional[str]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "qualified_name", self.imports.qualified_name)
        object.__setattr__(self, "smp_member", self.imports.smp_member)

    def is_smp_call(self, node: cst.CSTNode, *members: str) -> bool:
        """Is ``node`` a call of one of the library's ``members`` (through any import form)?"""
        return type(node) is cst.Call and self.smp_member(node.func) in members

    def smp_rank_function(self, node: cst.CSTNode) -> Optional[str]:
        """``"dp_rank"`` for ``smp.dp_rank()``; also resolves a name assigned once from such a
        call."""
        if type(node) is cst.Call and not node.args:
            member = self.smp_member(node.func)
            if member in RANK_FUNCTIONS or member in SIZE_FUNCTIONS:
                return member
        if type(node) is cst.Name and self.may_hold_rank(node.value):
            bound = self.names.assignment(node.value, node)
            if bound is not None and bound.value is not node:
                return self.smp_rank_function(bound.value)
        return None

    def may_hold_rank(self, name: str) -> bool:
        """Some assignment of ``name`` is a rank or size call, or another name: the reaching
        definitions, which cost far more, are worked out only then."""
        return name in self._rank_holding_names

    @cached_property
    def _rank_holding_names(self) -> frozenset[str]:
        """The names ``may_hold_rank`` says yes to, found in one pass over the assignments
        (rules ask about the same few names thousands of times in a large script)."""
        holding = set()
        for name, assignments in self.names.assignments.items():
            for assignment in assignments:
                value = assignment.value
                if type(value) is cst.Name:
                    holding.add(name)
                    break
                if type(value) is cst.Call and not value.args:
                    member = self.smp_member(value.func)
                    if member in RANK_FUNCTIONS or member in SIZE_FUNCTIONS:
                        holding.add(name)
                        break
        return frozenset(holding)

    @property
    def assignments(self) -> Mapping[str, tuple[Assignment, ...]]:
        """Every plain assignment of the file by name (``names`` says which reach a use)."""
        return self.names.assignments

    def literal(self, node: cst.BaseExpression) -> Any:
        """The value of ``node`` if it is a literal, through the names that hold one there."""
        return literal_value(node, self.names.resolve)

    def is_optimizer_constructor(self, node: cst.CSTNode) -> bool:
        """``torch.optim.AdamW(...)``, apex/transformers/smp optimizers, or a local Optimizer
        subclass."""
        if type(node) is not cst.Call:
            return False
        if type(node.func) is cst.Name and node.func.value in self.local_optimizer_classes:
            return True
        qualified = self.qualified_name(node.func)
        if qualified is None:
            return False
        if qualified.startswith(_NOT_OPTIMIZERS):
            return False
        return qualified in _OPTIMIZER_NAMES or qualified.startswith(_OPTIMIZER_MODULES)

    def statement_of(self, node: cst.CSTNode) -> Optional[StatementRef]:
        return self.statements.get(node)

    def scope_of_call(self, call: cst.Call) -> Optional[CodeScope]:
        """The function whose body runs ``call`` (the module at top level)."""
        where = self.call_statements.get(call)
        return where.scope if where is not None else None

    @cached_property
    def calls_by_name(self) -> Mapping[str, tuple[cst.Call, ...]]:
        """Calls of plain names (``train_step(...)``, ``evaluate(...)``), grouped by the name."""
        grouped: dict[str, list[cst.Call]] = {}
        for call in self.call_order:
            if type(call.func) is cst.Name:
                grouped.setdefault(call.func.value, []).append(call)
        return {name: tuple(calls) for name, calls in grouped.items()}

    @cached_property
    def calls_by_qualified_name(self) -> Mapping[str, tuple[cst.Call, ...]]:
        """Calls of imported names (``torch.manual_seed(...)``, ``smp.init()``), grouped by the
        qualified name, in source order: a rule looking for a few callees reads their calls
        instead of resolving every call of the file again."""
        grouped: dict[str, list[cst.Call]] = {}
        qualify = self.imports.qualified_name
        for call in self.call_order:
            qualified = qualify(call.func)
            if qualified is not None:
                grouped.setdefault(qualified, []).append(call)
        return {name: tuple(calls) for name, calls in grouped.items()}

    @cached_property
    def _library_calls(self) -> Mapping[str, tuple[cst.Call, ...]]:
        grouped: dict[str, list[cst.Call]] = {}
        for qualified, calls in self.calls_by_qualified_name.items():
            member = library_member(qualified)
            if member is not None:
                grouped.setdefault(member, []).extend(calls)
        return {member: tuple(calls) for member, calls in grouped.items()}

    def calls_of(self, *qualified_names: str) -> list[cst.Call]:
        """The calls of these imported names (``"torch.manual_seed"``), in source order."""
        return self._in_order(self.calls_by_qualified_name, qualified_names)

    def library_calls(self, *members: str) -> list[cst.Call]:
        """The calls of these library members (``"tensor_parallelism"``), in source order."""
        return self._in_order(self._library_calls, members)

    def _in_order(
        self, grouped: Mapping[str, tuple[cst.Call, ...]], keys: Iterable[str]
    ) -> list[cst.Call]:
        found = [call for key in keys for call in grouped.get(key, ())]
        found.sort(key=self.call_order.__getitem__)
        return found

    @cached_property
    def optimizer_constructions(self) -> tuple[cst.Call, ...]:
        """The calls that construct an optimizer (``is_optimizer_constructor``), in source order."""
        return tuple(call for call in self.call_order if self.is_optimizer_constructor(call))

    @cached_property
    def attribute_assignments(self) -> Mapping[str, list[Optional[cst.BaseExpression]]]:
        """Every assignment of an attribute (``args.fp16 = args.fp16 or args.amp``), by attribute
        name: the value assigned, None where it is not one plain value (``+=``, an annotation
        alone). ``self.<name> = ...`` sets an object's own attribute, never the parsed arguments."""
        found: dict[str, list[Optional[cst.BaseExpression]]] = {}
        for (_, attribute), values in self.owned_attribute_assignments.items():
            found.setdefault(attribute, []).extend(values)
        return found

    @cached_property
    def owned_attribute_assignments(
        self,
    ) -> Mapping[tuple[str, str], list[Optional[cst.BaseExpression]]]:
        """The same, by owner name and attribute (``("args", "rank")`` for ``args.rank = ...``),
        in source order; ``self`` excluded."""
        found: dict[tuple[str, str], list[Optional[cst.BaseExpression]]] = {}
        for statement in self.statements:
            if type(statement) is not cst.SimpleStatementLine:
                continue
            for small in statement.body:
                targets: list[tuple[cst.BaseExpression, Optional[cst.BaseExpression]]] = []
                if type(small) is cst.Assign:
                    targets = [
                        (target.target, small.value if len(small.targets) == 1 else None)
                        for target in small.targets
                    ]
                elif type(small) is cst.AnnAssign:
                    targets = [(small.target, small.value)]
                elif type(small) is cst.AugAssign:
                    targets = [(small.target, None)]
                for target, value in targets:
                    if type(target) is not cst.Attribute:
                        continue
                    owner = target.value
                    name = owner.value if type(owner) is cst.Name else ""
                    if name != "self":
                        found.setdefault((name, target.attr.value), []).append(value)
        return found

    def distributed_model_names(self) -> frozenset[str]:
        return frozenset(w.target for w in self.distributed_models if w.target)

    def optimizer_names(self) -> frozenset[str]:
        return frozenset(w.target for w in self.distributed_optimizers if w.target)


def _uses_hf_trainer(imports: ImportTable, collector: _Collector) -> bool:
    """A ``transformers`` Trainer is built here, directly or through a local subclass of one."""
    trainers = set(_HF_TRAINERS)
    local: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, cls in collector.classes.items():
            if name in local:
                continue
            for base in cls.bases:
                qualified = imports.qualified_name(base.value) or ""
                if qualified in trainers or dotted_name(base.value) in local:
                    local.add(name)
                    changed = True
                    break
    for call, _ in collector.calls:
        if (imports.qualified_name(call.func) or "") in trainers:
            return True
        if type(call.func) is cst.Name and call.func.value in local:
            return True
    return False


def _distributed_model_classes(
    imports: ImportTable, classes: Mapping[str, cst.ClassDef]
) -> frozenset[str]:
    """Local classes deriving from TensorFlow's ``smp.DistributedModel``, directly or through
    other local classes (``class Base(smp.DistributedModel)``, ``class Net(Base)``)."""
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, cls in classes.items():
            if name in found:
                continue
            for base in cls.bases:
                qualified = imports.qualified_name(base.value) or ""
                direct = (
                    qualified.startswith(SMP_TF + ".")
                    and smp_member(imports, base.value) == "DistributedModel"
                )
                local = (
                    type(base.value) is cst.Name
                    and base.value.value in found
                    and base.value.value not in imports.bindings
                )
                if direct or local:
                    found.add(name)
                    changed = True
                    break
    return frozenset(found)


def is_step_decorator(imports: ImportTable, decorator: cst.BaseExpression) -> bool:
    target = decorator.func if type(decorator) is cst.Call else decorator
    return smp_member(imports, target) == "step"


class _Collector:
    """The raw candidates of one file, read from its node index (the one traversal of the
    tree): each kind of node the facts need is a list of the index, in source order, so no
    walk replays the tree; ``FileFacts`` is built from these once imports are known."""

    def __init__(self, index: NodeIndex) -> None:
        order, parents, by_type = index.order, index.parents, index.by_type()

        def nodes(*kinds: type) -> list[Any]:
            found = [position for kind in kinds for position in by_type.get(kind, ())]
            if len(kinds) > 1:
                found.sort()
            return [order[position] for position in found]

        self.statements: dict[cst.CSTNode, StatementRef] = {}
        # By position: the statement each node of a block's body is (its ``StatementRef``).
        refs: dict[int, StatementRef] = {}
        for position in sorted(
            p
            for kind in (cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite)
            for p in by_type.get(kind, ())
        ):
            block = order[position]
            scope = _scope_at(order, parents, position)
            for number, statement in enumerate(block.body):  # type: ignore[attr-defined]
                ref = StatementRef(statement, block, number, scope)  # type: ignore[arg-type]
                self.statements[statement] = ref
                refs[id(statement)] = ref

        def statement_of(position: int) -> Optional[StatementRef]:
            while position >= 0:
                found = refs.get(id(order[position]))
                if found is not None:
                    return found
                position = parents[position]
            return None

        positions = index.positions
        self.calls: list[tuple[cst.Call, Optional[StatementRef]]] = [
            (order[position], statement_of(position))  # type: ignore[misc]
            for position in by_type.get(cst.Call, ())
        ]
        self.assignments: list[
            tuple[str, cst.BaseExpression, Optional[StatementRef], Optional[cst.Call]]
        ] = []
        for node in nodes(cst.Assign, cst.AnnAssign):
            where = statement_of(positions[id(node)])
            value = node.value
            if type(node) is cst.Assign:
                targets = [target.target for target in node.targets]
            elif value is not None:
                targets = [node.target]
            else:
                continue
            call = value if type(value) is cst.Call else None
            for target in targets:
                if type(target) is cst.Name:
                    self.assignments.append((target.value, value, where, call))
        self.functions: dict[str, cst.FunctionDef] = {}
        for function in nodes(cst.FunctionDef):
            self.functions.setdefault(function.name.value, function)
        self.classes: dict[str, cst.ClassDef] = {}
        for cls in nodes(cst.ClassDef):
            self.classes.setdefault(cls.name.value, cls)
        self.imports: list[Union[cst.Import, cst.ImportFrom]] = nodes(cst.Import, cst.ImportFrom)
        self.withs: list[cst.With] = nodes(cst.With)
        self.ifs: list[cst.If] = nodes(cst.If)
        # A name test first: there is one attribute node in every few of the file.
        self.sdp_setting_reads: list[cst.Attribute] = [
            node
            for node in nodes(cst.Attribute)
            if node.attr.value == "sharded_data_parallel_degree"
            or node.attr.value.startswith("sdp_")
        ]


def _scope_at(order: list[cst.CSTNode], parents: list[int], position: int) -> CodeScope:
    """The innermost function holding the node at ``position`` (the module at top level)."""
    position = parents[position]
    while position >= 0:
        node = order[position]
        if type(node) is cst.FunctionDef:
            return node
        position = parents[position]
    return order[0]  # type: ignore[return-value]


def _evidence(imports: ImportTable, collector: _Collector) -> Iterator[EvidenceNode]:
    for with_node in collector.withs:
        for item in with_node.items:
            call = item.item
            if type(call) is cst.Call and smp_member(imports, call.func) == "tensor_parallelism":
                enabled = _keyword(call, "enabled", 0)
                if enabled is None or literal_value(enabled) is True:
                    yield EvidenceNode("TP", "`with smp.tensor_parallelism()`", call)
    for call, _ in collector.calls:
        member = smp_member(imports, call.func)
        if member == "model_creation":
            tp = _keyword(call, "tensor_parallelism", 0)
            if tp is not None and literal_value(tp) is True:
                yield EvidenceNode("TP", "`smp.model_creation(tensor_parallelism=True)`", call)
        elif member == "set_tensor_parallelism":
            enabled = _keyword(call, "enabled", 1)
            if enabled is None or literal_value(enabled) is True:
                yield EvidenceNode("TP", "`smp.set_tensor_parallelism(...)`", call)
        elif member is not None and member.startswith("nn.Distributed"):
            yield EvidenceNode("TP", f"`smp.{member}`", call)
        elif member == "register_parameter":
            yield EvidenceNode("SDP", "`smp.register_parameter(...)`", call)
        elif member in ("partition", "set_partition"):
            yield EvidenceNode("PP", f"`smp.{member}(...)` (manual partitioning)", call)
    for if_node in collector.ifs:
        test = if_node.test
        if (
            type(test) is cst.Comparison
            and type(test.left) is cst.Call
            and smp_member(imports, test.left.func) == "tp_size"
            and len(test.comparisons) == 1
            and type(test.comparisons[0].operator) is cst.GreaterThan
            and literal_value(test.comparisons[0].comparator) == 1
        ):
            # A script written to run both ways: tensor-parallel-aware, not proof that it is on.
            yield EvidenceNode("TP", "`if smp.tp_size() > 1:` branch", if_node, strong=False)
    for read in collector.sdp_setting_reads:
        member = smp_member(imports, read)
        if member is not None and member.startswith("state.cfg."):
            yield EvidenceNode("SDP", f"`smp.{member}` is read", read, strong=False)


def _keyword(
    call: cst.Call, name: str, position: Optional[int] = None
) -> Optional[cst.BaseExpression]:
    from smpfix.base.calls import argument

    found = argument(call, name, position)
    return found.value if found is not None else None


def collect(
    module: cst.Module,
    aliases: Optional[Mapping[str, str]] = None,
    reached: tuple[str, ...] = (),
) -> FileFacts:
    """The facts of ``module``, from its node index (the one the analysis holds, else one
    built for the question). ``aliases`` and ``reached``: the project's names that stand for
    the library and the library modules its functions run (``ImportTable``), for a script
    that reaches the library through its own helpers."""
    index = active_index(module) or NodeIndex(module)
    collector = _Collector(index)
    imports = ImportTable.from_statements(collector.imports)
    if aliases or reached:
        imports = ImportTable(imports.bindings, aliases or {}, reached)

    assignments: dict[str, list[Assignment]] = {}
    for name, value, where, _ in collector.assignments:
        assignments.setdefault(name, []).append(Assignment(name, value, where))

    local_optimizers = frozenset(
        name
        for name, cls in collector.classes.items()
        if any(
            (imports.qualified_name(base.value) or "").endswith("Optimizer")
            or dotted_name(base.value) == "Optimizer"
            for base in cls.bases
        )
    )

    model_classes = _distributed_model_classes(imports, collector.classes)

    def wraps(member: str) -> tuple[Wrap, ...]:
        found = []
        targets = {id(call): name for name, _, _, call in collector.assignments if call is not None}
        for call, where in collector.calls:
            func = call.func
            if (
                member == "DistributedModel"
                and type(func) is cst.Name
                and func.value in model_classes
            ):
                found.append(Wrap(call, targets.get(id(call)), call, where))
                continue
            if smp_member(imports, func) == member:
                argument = call.args[0].value if call.args and not call.args[0].keyword else None
                if argument is None:
                    for arg in call.args:
                        if arg.keyword is not None and arg.keyword.value in (
                            "module",
                            "optimizer",
                            "opt",
                        ):
                            argument = arg.value
                found.append(Wrap(call, targets.get(id(call)), argument, where))
        return tuple(found)

    step_functions = set()
    for name, function in collector.functions.items():
        if any(is_step_decorator(imports, d.decorator) for d in function.decorators):
            step_functions.add(name)
    for name, _value, _, call in collector.assignments:
        # `train_step = smp.step(f)` and `smp.step(non_split_inputs=[...])(f)`
        if call is not None:
            func = call.func
            if smp_member(imports, func) == "step" and call.args and not call.args[0].keyword:
                step_functions.add(name)
            elif type(func) is cst.Call and smp_member(imports, func.func) == "step":
                step_functions.add(name)

    init_calls = tuple(
        call for call, _ in collector.calls if smp_member(imports, call.func) == "init"
    )
    partial = FileFacts(
        imports=imports,
        statements=collector.statements,
        names=Names(
            module,
            {k: tuple(v) for k, v in assignments.items()},
            ParentIndex(module, index),
        ),
        functions=collector.functions,
        classes=collector.classes,
        distributed_models=wraps("DistributedModel"),
        distributed_optimizers=wraps("DistributedOptimizer"),
        step_functions=frozenset(step_functions),
        smp_init_calls=init_calls,
        init_config={},
        init_config_call=None,
        evidence=tuple(_evidence(imports, collector)),
        uses_hf_trainer=_uses_hf_trainer(imports, collector),
        local_optimizer_classes=local_optimizers,
        call_order={call: index for index, (call, _) in enumerate(collector.calls)},
        call_statements=dict(collector.calls),
        estimator_calls=tuple(
            call
            for call, _ in collector.calls
            if (imports.qualified_name(call.func) or "") in ESTIMATORS
        ),
        distributed_model_classes=model_classes,
    )
    for call in init_calls:
        config = _keyword(call, "config", 0)
        if config is not None:
            value = partial.literal(config)
            if isinstance(value, dict):
                known = {k: v for k, v in value.items() if isinstance(k, str) and v is not UNKNOWN}
                return replace(partial, init_config=known, init_config_call=call)
    return partial
