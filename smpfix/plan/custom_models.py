"""Parameter counts of models the project defines itself from ``torch.nn`` layers.

``GPT(args.vocab, args.hidden, args.layers, args.heads)``, where ``GPT`` is an ``nn.Module``
of the project, is counted by reading its ``__init__``: ``nn.Linear``, ``nn.Embedding``,
``nn.LayerNorm``, ``nn.MultiheadAttention``, convolutions (``nn.Conv2d`` and the other
``Conv``/``ConvTranspose`` kinds), batch, instance and group norms, parameter-free layers,
``nn.Sequential``, ``nn.ModuleList([Block(...) for _ in range(n)])``,
``nn.Parameter(torch.zeros(...))``, other project modules, and
``self.head.weight = self.embed.weight`` ties. The count is exact for what it reads, and
anything else in ``__init__`` that may hold parameters (a call it does not know, a branch,
a loop) makes it unknown.

For the activations, a model whose repeated block holds an ``nn.MultiheadAttention`` is
taken as a standard transformer: layers = repetitions, hidden size and heads from the
attention, MLP width from the block's first widening ``nn.Linear``, vocabulary from the
largest embedding of that width. ``docs/plan.md`` lists this approximation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.plan.models import ModelShape, ParameterCount
from smpfix.program.facts import FileFacts
from smpfix.program.project.parsed_file import ParsedFile

_MAX_DEPTH = 6
_NO_PARAMETERS = frozenset(
    {
        "Dropout",
        "GELU",
        "ReLU",
        "SiLU",
        "Tanh",
        "Sigmoid",
        "Identity",
        "Softmax",
        "LogSoftmax",
        "LeakyReLU",
        "Mish",
        "CrossEntropyLoss",
        "MSELoss",
        "Flatten",
        "Dropout1d",
        "Dropout2d",
        "ReLU6",
        "ELU",
        "Softplus",
        "Hardswish",
        "Hardtanh",
        "LogSigmoid",
        "GLU",
        "Softmax2d",
        "Upsample",
        "NLLLoss",
        "BCELoss",
        "BCEWithLogitsLoss",
        *(
            f"{kind}{dims}d"
            for kind in ("MaxPool", "AvgPool", "AdaptiveMaxPool", "AdaptiveAvgPool", "Dropout")
            for dims in (1, 2, 3)
        ),
    }
)
# Convolutions: (in_channels, out_channels, kernel_size, ...) with ``groups`` and ``bias``.
_CONVOLUTIONS = frozenset(
    f"{kind}{dims}d" for kind in ("Conv", "ConvTranspose") for dims in (1, 2, 3)
)
# Normalisations with one scale and one shift per feature when affine: (keyword, position).
_NORMS = {
    **{f"BatchNorm{dims}d": ("num_features", 0) for dims in (1, 2, 3)},
    **{f"InstanceNorm{dims}d": ("num_features", 0) for dims in (1, 2, 3)},
    "GroupNorm": ("num_channels", 1),
}
# ``affine`` by default: BatchNorm and GroupNorm yes, InstanceNorm no.
_NORM_AFFINE_POSITION = {"GroupNorm": 3}
_TENSORS = frozenset({"zeros", "ones", "randn", "rand", "empty"})


class _Unreadable(Exception):
    """Something in a constructor that may hold parameters smpfix cannot count."""


@dataclass(frozen=True)
class Counted:
    """A module as built: its parameters, and what its layers reveal of a transformer's shape."""

    total: int = 0
    small: int = 0  # biases and norms (1-D tensors)
    weight: int = 0  # the ``weight`` of a Linear or Embedding (for ties)
    attention: Optional[tuple[int, int]] = (
        None  # (embed_dim, num_heads) of the first nn.MultiheadAttention
    )
    linears: tuple[tuple[int, int], ...] = ()  # (in_features, out_features), in order
    embeddings: tuple[tuple[int, int], ...] = ()  # (num_embeddings, embedding_dim)
    repeated: Optional[tuple[int, Counted]] = (
        None  # the repeated block that holds attention, and how often
    )
    children: Mapping[str, Counted] = field(
        default_factory=dict
    )  # self.<name> submodules, for ties

    def plus(self, other: Counted, times: int = 1) -> Counted:
        repeated = self.repeated or other.repeated
        if times > 1 and other.attention is not None and (repeated is None or times > repeated[0]):
            repeated = (times, other)
        return Counted(
            self.total + other.total * times,
            self.small + other.small * times,
            0,
            self.attention or other.attention,
            self.linears + other.linears,
            self.embeddings + other.embeddings,
            repeated,
            self.children,
        )


@dataclass(frozen=True)
class CustomModel:
    count: ParameterCount
    shape: Optional[ModelShape]


class ModelReader:
    """Counts the project's ``nn.Module`` classes by name (classes of any of ``modules``)."""

    def __init__(self, modules: tuple[ParsedFile, ...]) -> None:
        self.classes: dict[str, tuple[FileFacts, cst.ClassDef]] = {}
        for linked in modules:
            for name, definition in linked.facts.classes.items():
                if _is_module_class(linked.facts, definition):
                    self.classes.setdefault(name, (linked.facts, definition))

    def is_model_class(self, name: str) -> bool:
        return name in self.classes

    def model(
        self, name: str, arguments: tuple[Any, ...], keywords: Mapping[str, Any]
    ) -> Optional[CustomModel]:
        """The model ``name(*arguments, **keywords)`` builds, or None when it cannot be counted."""
        try:
            counted = self._instance(name, arguments, keywords, 0)
        except (_Unreadable, RecursionError):
            return None
        if counted.total <= 0:
            return None
        return _as_model(counted)

    def _instance(
        self, name: str, arguments: tuple[Any, ...], keywords: Mapping[str, Any], depth: int
    ) -> Counted:
        if depth > _MAX_DEPTH or name not in self.classes:
            raise _Unreadable(name)
        facts, definition = self.classes[name]
        init = next(
            (
                s
                for s in definition.body.body
                if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"
            ),
            None,
        )
        if init is None:
            raise _Unreadable(f"{name} has no __init__")
        env = _bind(init, facts, arguments, keywords)
        return _Constructor(self, facts, env, depth).run(init)


def _is_module_class(facts: FileFacts, definition: cst.ClassDef) -> bool:
    return any(
        (facts.qualified_name(base.value) or "")
        in ("torch.nn.Module", "torch.nn.modules.module.Module")
        for base in definition.bases
    )


def _bind(
    init: cst.FunctionDef, facts: FileFacts, arguments: tuple[Any, ...], keywords: Mapping[str, Any]
) -> dict[str, Any]:
    params = [*init.params.posonly_params, *init.params.params][1:]  # without self
    env: dict[str, Any] = {}
    for index, param in enumerate(params):
        name = param.name.value
        if index < len(arguments):
            env[name] = arguments[index]
        elif name in keywords:
            env[name] = keywords[name]
        elif param.default is not None:
            env[name] = facts.literal(param.default)
        else:
            raise _Unreadable(f"no value for {name}")
    for param in init.params.kwonly_params:
        name = param.name.value
        env[name] = keywords.get(
            name, facts.literal(param.default) if param.default is not None else None
        )
    return env


class _Constructor:
    """Replays one ``__init__`` over known numbers."""

    def __init__(
        self, reader: ModelReader, facts: FileFacts, env: dict[str, Any], depth: int
    ) -> None:
        self.reader, self.facts, self.env, self.depth = reader, facts, env, depth
        self.counted = Counted()
        self.children: dict[str, Counted] = {}

    def run(self, init: cst.FunctionDef) -> Counted:
        for statement in init.body.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                raise _Unreadable("a compound statement in __init__")
            for small in statement.body:
                self._statement(small)
        return replace(self.counted, children=dict(self.children))

    def _statement(self, small: cst.BaseSmallStatement) -> None:
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            self._assign(small.targets[0].target, small.value)
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            self._assign(small.target, small.value)
        elif isinstance(small, (cst.Expr, cst.Pass)):
            # super().__init__(), self.register_buffer(...), initialisation calls: no new parameters
            return
        else:
            raise _Unreadable("a statement smpfix does not follow")

    def _assign(self, target: cst.BaseAssignTargetExpression, value: cst.BaseExpression) -> None:
        tied = self._tie(target, value)
        if tied:
            return
        result = self._value(value)
        if isinstance(target, cst.Name):
            self.env[target.value] = result
            return
        if not (
            isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value == "self"
        ):
            raise _Unreadable("an assignment smpfix does not follow")
        if isinstance(result, Counted):
            self.counted = self.counted.plus(result)
            self.children[target.attr.value] = result
        elif result is _NOT_A_MODULE:
            raise _Unreadable("self.<name> set from a call smpfix cannot count")
        else:
            self.env[f"self.{target.attr.value}"] = result

    def _tie(self, target: cst.BaseAssignTargetExpression, value: cst.BaseExpression) -> bool:
        """``self.head.weight = self.embed.weight``: the head's weight is the embedding's."""
        names = [_self_weight(target), _self_weight(value)]
        if names[0] is None or names[1] is None:
            return False
        child = self.children.get(names[0])
        if child is None:
            raise _Unreadable("a tie smpfix cannot place")
        self.counted = replace(self.counted, total=self.counted.total - child.weight)
        return True

    def _value(self, expr: cst.BaseExpression) -> Any:
        if isinstance(expr, cst.Call):
            return self._call(expr)
        if isinstance(expr, (cst.List, cst.ListComp, cst.Tuple)):
            return self._modules(expr)
        return self._number(expr)

    def _call(self, call: cst.Call) -> Any:
        qualified = self.facts.qualified_name(call.func) or ""
        name = qualified.rsplit(".", 1)[-1] if qualified.startswith("torch.nn.") else None
        if name is not None:
            return self._layer(name, call)
        local = call.func.value if isinstance(call.func, cst.Name) else None
        if local is not None and self.reader.is_model_class(local):
            arguments = tuple(
                self._number(arg.value) for arg in call.args if arg.keyword is None and not arg.star
            )
            keywords = {
                arg.keyword.value: self._number(arg.value)
                for arg in call.args
                if arg.keyword is not None
            }
            if any(arg.star for arg in call.args):
                raise _Unreadable("* arguments")
            return self.reader._instance(local, arguments, keywords, self.depth + 1)
        if qualified.startswith("torch.nn."):
            raise _Unreadable(qualified)
        return _NOT_A_MODULE

    def _layer(self, name: str, call: cst.Call) -> Counted:
        if name in _NO_PARAMETERS:
            return Counted()
        if name == "Linear":
            i, o = self._int(call, "in_features", 0), self._int(call, "out_features", 1)
            bias = o if self._flag(call, "bias", 2, True) else 0
            return Counted(i * o + bias, bias, i * o, linears=((i, o),))
        if name == "Embedding":
            n, d = self._int(call, "num_embeddings", 0), self._int(call, "embedding_dim", 1)
            return Counted(n * d, 0, n * d, embeddings=((n, d),))
        if name in _CONVOLUTIONS:
            return self._convolution(name, call)
        if name in _NORMS:
            keyword, position = _NORMS[name]
            features = self._int(call, keyword, position)
            affine = self._flag(
                call, "affine", _NORM_AFFINE_POSITION.get(name, 3), not name.startswith("Instance")
            )
            return Counted(2 * features if affine else 0, 2 * features if affine else 0)
        if name == "LayerNorm":
            d = self._int(call, "normalized_shape", 0)
            affine = self._flag(call, "elementwise_affine", 2, True)
            return Counted(2 * d if affine else 0, 2 * d if affine else 0)
        if name == "MultiheadAttention":
            if argument(call, "kdim", 7) is not None or argument(call, "vdim", 8) is not None:
                raise _Unreadable("attention with other key or value widths")
            e, h = self._int(call, "embed_dim", 0), self._int(call, "num_heads", 1)
            bias = 4 * e if self._flag(call, "bias", 3, True) else 0
            return Counted(4 * e * e + bias, bias, attention=(e, h))
        if name in ("Sequential", "ModuleList"):
            if name == "ModuleList" and len(call.args) == 1:
                return self._modules(call.args[0].value)
            total = Counted()
            for arg in call.args:
                total = total.plus(self._module(arg.value))
            return total
        if name == "Parameter":
            return self._parameter(call)
        raise _Unreadable(f"torch.nn.{name}")

    def _convolution(self, name: str, call: cst.Call) -> Counted:
        """``nn.Conv2d(in, out, kernel_size, stride, padding, dilation, groups, bias)``: a
        weight of out x in/groups x kernel (in x out/groups x kernel transposed), and a bias
        of ``out``."""
        transposed = name.startswith("ConvTranspose")
        i = self._int(call, "in_channels", 0)
        o = self._int(call, "out_channels", 1)
        found = argument(call, "groups", 6)  # the same place in both kinds

        groups = self._positive(self._number(found.value)) if found is not None else 1
        kernel = argument(call, "kernel_size", 2)
        if kernel is None:
            raise _Unreadable("kernel_size missing")
        size = self._kernel(kernel.value, int(name[-2]))
        if (i if not transposed else o) % groups:
            raise _Unreadable("groups does not divide the channels")
        weight = i * o // groups * size
        bias = o if self._flag(call, "bias", 7, True) else 0
        return Counted(weight + bias, bias)

    def _kernel(self, expr: cst.BaseExpression, dims: int) -> int:
        """The number of weights of one filter position: ``3`` is 3 x 3 in two dimensions."""
        if isinstance(expr, (cst.Tuple, cst.List)):
            size = 1
            for element in expr.elements:
                size *= self._positive(self._number(element.value))
            return size
        return self._positive(self._number(expr)) ** dims

    def _modules(self, expr: cst.BaseExpression) -> Counted:
        if (
            isinstance(expr, cst.ListComp)
            and len(expr.for_in.ifs) == 0
            and expr.for_in.inner_for_in is None
        ):
            times = self._range(expr.for_in.iter)
            if isinstance(expr.for_in.target, cst.Name):
                self.env[expr.for_in.target.value] = 0
            return Counted().plus(self._module(expr.elt), times)
        if isinstance(expr, (cst.List, cst.Tuple)):
            total = Counted()
            for element in expr.elements:
                total = total.plus(self._module(element.value))
            return total
        raise _Unreadable("a module list smpfix cannot count")

    def _module(self, expr: cst.BaseExpression) -> Counted:
        found = self._value(expr)
        if not isinstance(found, Counted):
            raise _Unreadable("not a module")
        return found

    def _range(self, expr: cst.BaseExpression) -> int:
        if (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Name)
            and expr.func.value == "range"
            and len(expr.args) == 1
        ):
            return self._positive(self._number(expr.args[0].value))
        raise _Unreadable("a loop that is not range(n)")

    def _parameter(self, call: cst.Call) -> Counted:
        """``nn.Parameter(torch.zeros(a, b))`` and the like: a * b parameters."""
        inner = call.args[0].value if call.args else None
        qualified = self.facts.qualified_name(inner.func) if isinstance(inner, cst.Call) else None
        if (
            not isinstance(inner, cst.Call)
            or not qualified
            or qualified.rsplit(".", 1)[-1] not in _TENSORS
        ):
            raise _Unreadable("a parameter of a shape smpfix cannot read")
        size = 1
        dims = [arg for arg in inner.args if arg.keyword is None]
        for arg in dims:
            size *= self._positive(self._number(arg.value))
        return Counted(size, size if len(dims) == 1 else 0)

    def _int(self, call: cst.Call, name: str, position: int) -> int:
        found = argument(call, name, position)
        if found is None:
            raise _Unreadable(f"{name} missing")
        return self._positive(self._number(found.value))

    def _flag(self, call: cst.Call, name: str, position: int, default: bool) -> bool:
        found = argument(call, name, position)
        if found is None:
            return default
        value = self._number(found.value)
        if not isinstance(value, bool):
            raise _Unreadable(f"{name} unknown")
        return value

    def _number(self, expr: cst.BaseExpression) -> Any:
        """An int, float or bool from literals, parameters, ``self.<name>`` set earlier,
        arithmetic."""
        if isinstance(expr, cst.Name) and expr.value in self.env:
            return self.env[expr.value]
        if (
            isinstance(expr, cst.Attribute)
            and isinstance(expr.value, cst.Name)
            and expr.value.value == "self"
        ):
            return self.env.get(f"self.{expr.attr.value}", _NOT_A_MODULE)
        if isinstance(expr, cst.BinaryOperation):
            left, right = self._number(expr.left), self._number(expr.right)
            if isinstance(left, (int, float)) and isinstance(right, (int, float)):
                operations = {
                    cst.Add: lambda a, b: a + b,
                    cst.Subtract: lambda a, b: a - b,
                    cst.Multiply: lambda a, b: a * b,
                    cst.FloorDivide: lambda a, b: a // b if b else _NOT_A_MODULE,
                }
                operation = operations.get(type(expr.operator))
                if operation is not None:
                    return operation(left, right)
            return _NOT_A_MODULE
        value = self.facts.literal(expr)
        return value if isinstance(value, (int, float, bool)) else _NOT_A_MODULE

    @staticmethod
    def _positive(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _Unreadable("not a positive integer")
        return value


class _NotAModule:
    def __repr__(self) -> str:
        return "NOT_A_MODULE"


_NOT_A_MODULE = _NotAModule()


def _self_weight(expr: cst.BaseExpression) -> Optional[str]:
    """``self.<name>.weight`` -> ``<name>``."""
    if (
        isinstance(expr, cst.Attribute)
        and expr.attr.value == "weight"
        and isinstance(expr.value, cst.Attribute)
        and isinstance(expr.value.value, cst.Name)
        and expr.value.value.value == "self"
    ):
        return expr.value.attr.value
    return None


def _as_model(counted: Counted) -> CustomModel:
    repeated = counted.repeated
    if repeated is None or repeated[1].attention is None:
        return CustomModel(ParameterCount(counted.total, 0, counted.small, 0), None)
    layers, block = repeated
    hidden, heads = block.attention  # type: ignore[misc]
    count = ParameterCount(counted.total, layers * block.total, counted.small, layers)
    ffn = next((o for i, o in block.linears if i == hidden and o != hidden), None)
    if ffn is None:
        return CustomModel(count, None)
    widths = sorted(n for n, d in counted.embeddings if d == hidden)
    vocab = widths[-1] if widths else 0
    positions = widths[0] if len(widths) > 1 else 0
    shape = ModelShape("custom", hidden, layers, heads, vocab, ffn, positions, lm_head=vocab > 0)
    return CustomModel(count, shape)
