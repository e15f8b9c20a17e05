"""Code in a step function that assumes it runs once per batch.

The library runs a step function's body once per microbatch, on the pipeline's first stage
only (the others execute module requests), and once more while it traces the first call. The
API documentation warns that this "might affect the behavior of batch normalization, any
operation that explicitly uses the batch size information, or any other Python code that is
expected to run once"; the developer guide adds that modules must not depend on state modified
inside the step. This module finds, in one step body:

- ``batch size``: the batch size the file's ``DataLoader`` is built with (``args.batch_size``,
  ``BATCH_SIZE``) used as a shape: ``x.view(B, ...)``, ``reshape``, ``expand``, ``new_zeros``,
  ``torch.zeros(B, ...)``/``ones``/``empty``/``full``/``rand``/``randn``/``arange``;
- ``side effect``: printing and logging, ``wandb``/``mlflow``/TensorBoard logging, ``torch.save``,
  ``open``, augmented assignments to attributes or items of objects from outside the body
  (``self.steps += 1``), ``append``/``extend`` on lists from outside, assignments to ``global``
  names;
- ``model state``: attributes set on the wrapped model or its module (``model.module.step = i``);
- ``seed``: ``torch.manual_seed``, ``random.seed``, ``np.random.seed`` and the CUDA seeds.

``batch_norm_in`` answers the first item: does the wrapped model's class build an
``nn.BatchNorm*`` layer (whose statistics are then per microbatch)?

Code under ``if smp.is_tracing():`` (either side) is left alone: its author has thought about
the tracing pass. Nested functions and classes are not part of the body.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument, bound_names
from smpfix.base.imports import dotted_name
from smpfix.base.walker import children, iter_nodes
from smpfix.program.data.dataloaders import DATALOADERS
from smpfix.program.facts import FileFacts
from smpfix.program.objects.model_names import DistributedModelNames
from smpfix.program.objects.wrapped_model import ModelClass
from smpfix.program.steps import own_nodes

BATCH_SIZE = "batch size"
SIDE_EFFECT = "side effect"
MODEL_STATE = "model state"
SEED = "seed"

_SHAPE_METHODS = frozenset(
    {"view", "reshape", "expand", "new_zeros", "new_ones", "new_empty", "new_full"}
)
_SHAPE_FUNCTIONS = frozenset(
    {
        "torch.zeros",
        "torch.ones",
        "torch.empty",
        "torch.full",
        "torch.rand",
        "torch.randn",
        "torch.arange",
    }
)
_SEEDS = frozenset(
    {
        "torch.manual_seed",
        "torch.cuda.manual_seed",
        "torch.cuda.manual_seed_all",
        "random.seed",
        "numpy.random.seed",
    }
)
_LOGGING_CALLS = ("logging.", "wandb.log", "mlflow.log_", "torch.save")
_LOGGER_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "critical", "exception", "log"}
)
_LOGGER_NAME = re.compile(r"(^|_)(logger|log|LOGGER)$")
_WRITER_METHODS = frozenset({"add_scalar", "add_scalars", "add_histogram", "add_image", "add_text"})
_BUILTIN_EFFECTS = frozenset({"print", "open"})


@dataclass(frozen=True)
class StepHazard:
    """One construct of a step body and what kind of once-per-batch assumption it makes."""

    node: cst.CSTNode
    kind: str
    what: str


def loader_batch_sizes(facts: FileFacts) -> frozenset[str]:
    """The ``batch_size`` expressions (names, ``args.batch_size``) the file's DataLoaders use."""
    found: set[str] = set()
    for call in facts.calls_of(*DATALOADERS):
        size = argument(call, "batch_size", 1)
        spelled = dotted_name(size.value) if size is not None else None
        if spelled is not None:
            found.add(spelled)
    return frozenset(found)


class StepHazards:
    """Finds the hazards of step bodies of one file."""

    def __init__(self, facts: FileFacts, models: DistributedModelNames) -> None:
        self.facts = facts
        self.models = models
        self.batch_sizes = loader_batch_sizes(facts)

    def of(self, step: cst.FunctionDef) -> list[StepHazard]:
        declared = _globals(step)
        local = bound_names(step.body) - declared
        found: list[StepHazard] = []
        for node in _body_nodes(step, self.facts):
            found.extend(self._classify(node, step, local, declared))
        return found

    def _classify(
        self, node: cst.CSTNode, step: cst.FunctionDef, local: set[str], declared: set[str]
    ) -> Iterator[StepHazard]:
        if type(node) is cst.Call:
            yield from self._call(node, local)
        elif type(node) is cst.AugAssign:
            root = _root(node.target)
            if (
                isinstance(node.target, (cst.Attribute, cst.Subscript))
                and root is not None
                and root not in local
            ):
                yield StepHazard(
                    node, SIDE_EFFECT, f"`{_code(node.target)} {_code(node.operator).strip()} ...`"
                )
            elif type(node.target) is cst.Name and node.target.value in declared:
                yield StepHazard(node, SIDE_EFFECT, f"the global `{node.target.value}`")
        elif type(node) is cst.Assign:
            for target in node.targets:
                yield from self._assignment(node, target.target, step, declared)

    def _assignment(
        self,
        node: cst.Assign,
        target: cst.BaseExpression,
        step: cst.FunctionDef,
        declared: set[str],
    ) -> Iterator[StepHazard]:
        if type(target) is cst.Name and target.value in declared:
            yield StepHazard(node, SIDE_EFFECT, f"the global `{target.value}`")
        elif type(target) is cst.Attribute:
            holder = _model_holder(target.value)
            if holder is not None and self.models.holds_model(holder, [step]):
                yield StepHazard(node, MODEL_STATE, f"`{_code(target)} = ...`")

    def _call(self, call: cst.Call, local: set[str]) -> Iterator[StepHazard]:
        func = call.func
        qualified = self.facts.qualified_name(func) or ""
        if qualified in _SEEDS:
            yield StepHazard(call, SEED, f"`{_code(func)}(...)`")
            return
        if qualified in _SHAPE_FUNCTIONS or (
            type(func) is cst.Attribute and func.attr.value in _SHAPE_METHODS and not qualified
        ):
            size = self._batch_size_argument(call)
            if size is not None:
                yield StepHazard(size, BATCH_SIZE, f"`{_code(func)}({_code(size)}, ...)`")
            return
        if self._logs(call, qualified):
            yield StepHazard(call, SIDE_EFFECT, f"`{_code(func)}(...)`")
            return
        if (
            type(func) is cst.Attribute
            and func.attr.value in ("append", "extend")
            and type(func.value) is cst.Name
        ):
            if func.value.value not in local:
                yield StepHazard(call, SIDE_EFFECT, f"`{_code(func)}(...)`")

    def _batch_size_argument(self, call: cst.Call) -> Optional[cst.BaseExpression]:
        if not call.args or call.args[0].keyword is not None or not self.batch_sizes:
            return None
        first = call.args[0].value
        if isinstance(first, (cst.Tuple, cst.List)) and first.elements:
            first = first.elements[0].value
        return first if dotted_name(first) in self.batch_sizes else None

    def _logs(self, call: cst.Call, qualified: str) -> bool:
        func = call.func
        if type(func) is cst.Name and func.value in _BUILTIN_EFFECTS:
            return (
                func.value not in self.facts.imports.bindings
                and func.value not in self.facts.functions
            )
        if qualified.startswith(_LOGGING_CALLS):
            return True
        if type(func) is cst.Attribute and not qualified:
            receiver = dotted_name(func.value) or ""
            last = receiver.rsplit(".", 1)[-1]
            if func.attr.value in _LOGGER_METHODS and _LOGGER_NAME.search(last):
                return True
            return func.attr.value in _WRITER_METHODS
        return False


def _body_nodes(step: cst.FunctionDef, facts: FileFacts) -> Iterator[cst.CSTNode]:
    """The nodes of the step's own body, minus nested definitions and ``smp.is_tracing()``
    branches."""
    stack: list[cst.CSTNode] = [step.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if type(node) is cst.If and _tests_tracing(node.test, facts):
            continue
        yield node
        stack.extend(children(node))


def _tests_tracing(test: cst.BaseExpression, facts: FileFacts) -> bool:
    inner = test.expression if type(test) is cst.UnaryOperation else test
    return type(inner) is cst.Call and facts.smp_member(inner.func) == "is_tracing"


def _globals(step: cst.FunctionDef) -> set[str]:
    names: set[str] = set()
    for node in own_nodes(step):
        if isinstance(node, (cst.Global, cst.Nonlocal)):
            names.update(item.name.value for item in node.names)
    return names


def _root(expr: cst.BaseExpression) -> Optional[str]:
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return expr.value if type(expr) is cst.Name else None


def _model_holder(expr: cst.BaseExpression) -> Optional[str]:
    """``model`` in ``model``, ``model.module``, ``model.module.encoder``,
    ``model.get_module()``."""
    while True:
        if type(expr) is cst.Name:
            return expr.value
        if type(expr) is cst.Attribute:
            expr = expr.value
        elif (
            type(expr) is cst.Call
            and type(expr.func) is cst.Attribute
            and expr.func.attr.value == "get_module"
        ):
            expr = expr.func.value
        else:
            return None


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


_BATCH_NORMS = frozenset({"torch.nn.BatchNorm1d", "torch.nn.BatchNorm2d", "torch.nn.BatchNorm3d"})


def batch_norm_in(cls: ModelClass, depth: int = 0) -> Optional[str]:
    """``"nn.BatchNorm2d"`` when the model class (or a class of the same file it builds, two
    levels deep) creates a batch-norm layer."""
    for node in iter_nodes(cls.node):
        if type(node) is not cst.Call:
            continue
        qualified = cls.facts.qualified_name(node.func)
        if qualified in _BATCH_NORMS:
            return f"nn.{qualified.rsplit('.', 1)[-1]}"
        if (
            depth < 2
            and type(node.func) is cst.Name
            and node.func.value in cls.facts.classes
            and node.func.value != cls.name
        ):
            inner = ModelClass(
                node.func.value,
                cls.facts.classes[node.func.value],
                cls.module,
                cls.facts,
                cls.linked,
            )
            found = batch_norm_in(inner, depth + 1)
            if found is not None:
                return found
    return None
