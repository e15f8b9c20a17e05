"""SMP704: the TensorFlow model is not a ``smp.DistributedModel`` subclass, or is used outside the
step.

The library partitions a model defined by subclassing ``smp.DistributedModel`` (a Keras
``Model``), with its layers built in ``__init__``: at the first step it builds a copy of the
model by calling the class again and places each layer on a partition. So a plain Keras
model (``tf.keras.Sequential``, the functional API, a ``tf.keras.Model`` subclass) is never
partitioned; calling the distributed model outside an ``@smp.step`` function raises
``GraphBuildError``; a layer object built outside ``__init__`` is shared by the copy (a
``ValueError`` at the first step); and a ``tf.Variable`` the model does not own cannot be
placed (``GraphBuildError``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Optional

import libcst as cst

from smpfix.base.calls import bound_names
from smpfix.base.findings import Severity
from smpfix.base.flavour import ONLY_TENSORFLOW
from smpfix.base.walker import Ancestry, iter_nodes
from smpfix.program.facts import FileFacts
from smpfix.program.model import Program
from smpfix.program.order.call_graph import innermost_function, run_inside_steps
from smpfix.program.tensorflow.models import imported_model_class, with_imported_models
from smpfix.program.tensorflow.training import KERAS_MODELS, constructed_by, keras_model_base
from smpfix.rules.rule import Rule, TensorParallelism
from smpfix.rules.titles import snippet

# Methods of a distributed model that call it outside a step (Keras' `predict_step` is not
# overridden).
_CALLING_METHODS = frozenset({"call", "__call__", "predict", "predict_on_batch", "predict_step"})
_LAYER_MODULES = ("tensorflow.keras.layers.", "keras.layers.")
_VARIABLES = frozenset({"tensorflow.Variable"})


class TfModelNotDistributedModelSubclass(Rule):
    summary = (
        "Define the TensorFlow model by subclassing `smp.DistributedModel`, build its layers in"
        " `__init__`, and call it only inside `@smp.step`."
    )
    flavours = ONLY_TENSORFLOW
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.models = with_imported_models(self.program.facts, self.program.modules)
        # Instances of subclasses; `smp.DistributedModel(inputs=..., outputs=...)` itself is the
        # functional API.
        self.model_names = frozenset(
            wrap.target
            for wrap in self.models.distributed_models
            if wrap.target and self.program.facts.smp_member(wrap.call.func) != "DistributedModel"
        )
        self.in_step = run_inside_steps(self.program.file)
        self.reported: set[int] = set()

    # -- (b) the distributed model outside a step --------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Name and func.value in self.model_names:
            self._outside_step(node, func.value, "")
        elif (
            type(func) is cst.Attribute
            and type(func.value) is cst.Name
            and func.value.value in self.model_names
        ):
            method = func.attr.value
            if method in _CALLING_METHODS:
                self._outside_step(node, func.value.value, method)
            elif method == "fit":
                self._fit_before_1_4(node, func.value.value)

    def _outside_step(self, call: cst.Call, model: str, method: str) -> None:
        if innermost_function(self.ancestry.stack, self.in_step) is not None:
            return
        if self.ancestry.nearest(cst.ClassDef) is not None and self._in_model_class():
            return
        shown = f"`{model}.{method}(...)`" if method else f"`{model}(...)`"
        if method.startswith("predict"):
            why = (
                "Keras' `predict` calls the model through `predict_step`, which the library does"
                " not override, so the model runs outside a step and raises `GraphBuildError`"
            )
        else:
            why = (
                "the library builds and runs the partitioned model only while tracing an"
                ' `@smp.step` function, and raises `GraphBuildError` ("Cannot execute'
                ' smp.DistributedModel.__call__ outside a smp.step-decorated function")'
            )
        message = (
            f"{shown} calls the `smp.DistributedModel` outside any `@smp.step` function: {why}."
            " Call the model inside a step function (an evaluation step may take"
            " `input_signature`), and use its combined outputs after it."
        )
        title = (
            f"{snippet(shown[1:-1], 30)} calls the `smp.DistributedModel` outside `@smp.step`:"
            f" raises"
        )
        self.report(call, title, explanation=message, severity=Severity.ERROR)

    def _in_model_class(self) -> bool:
        cls = self.ancestry.nearest(cst.ClassDef)
        return (
            type(cls) is cst.ClassDef
            and cls.name.value in self.program.facts.distributed_model_classes
        )

    def _fit_before_1_4(self, call: cst.Call, model: str) -> None:
        message = (
            f"`{model}.fit(...)` trains a `smp.DistributedModel` with Keras' `fit`, which the"
            " library supports from SMP 1.4.0 (TensorFlow 2.5 containers); this matters"
            f" {'because ' if self.program.job.smp_version else ''}"
            f"{self.version_condition(until=(1, 3))}."
            " Write the training loop with an `@smp.step` function, or use a TensorFlow 2.5 or"
            " later container."
        )
        title = (
            f"`{model}.fit(...)`: Keras `fit` on a `smp.DistributedModel` needs SMP 1.4 or later"
        )
        self.report(call, title, explanation=message, severity=Severity.ERROR, until=(1, 3))

    # -- (a), (c), (d) --------------------------------------------------------------------------
    def leave_Module(self, node: cst.Module) -> None:
        for name, call in self._plain_models():
            self._flag_plain_model(name, call)
        for cls_name in sorted(self.program.facts.distributed_model_classes):
            cls = self.program.facts.classes[cls_name]
            self._check_shared_layers(cls)
            self._check_outside_variables(cls)

    def _plain_models(self) -> Iterator[tuple[str, cst.Call]]:
        """Names called in a step function, or fitted, that hold a model the library does not
        distribute."""
        used: dict[str, cst.Name] = {}
        for name in sorted(self.in_step):
            function = self.program.facts.functions.get(name)
            if function is None:
                continue
            for inner in iter_nodes(function.body):
                if type(inner) is cst.Call and type(inner.func) is cst.Name:
                    used.setdefault(inner.func.value, inner.func)
        for call in self.program.facts.call_order:
            func = call.func
            if (
                type(func) is cst.Attribute
                and func.attr.value == "fit"
                and type(func.value) is cst.Name
            ):
                used.setdefault(func.value.value, func.value)
        for name, use in used.items():
            if name in self.model_names:
                continue
            built = constructed_by(self.program.facts, use)
            if (
                built is not None
                and self._plain_model_kind(built) is not None
                and id(built) not in self.reported
            ):
                self.reported.add(id(built))
                yield name, built

    def _plain_model_kind(self, call: cst.Call) -> Optional[str]:
        """What plain model ``call`` builds (words for the message), None when it is distributed or
        not a model."""
        qualified = self.program.facts.qualified_name(call.func)
        if qualified in KERAS_MODELS:
            return f"a plain Keras model (`{self.program.code_for(call.func)}`)"
        if self.program.facts.smp_member(call.func) == "DistributedModel":
            return "`smp.DistributedModel` itself, built with the functional API"
        func = call.func
        if (
            type(func) is cst.Name
            and func.value in self.program.facts.classes
            and func.value not in self.program.facts.imports.bindings
        ):
            if func.value in self.program.facts.distributed_model_classes:
                return None
            base = keras_model_base(
                self.program.facts,
                self.program.facts.classes[func.value],
                self.program.facts.classes,
            )
            return f"`{func.value}`, a subclass of `{base}`" if base is not None else None
        modules = self.program.modules
        if (
            qualified is None
            or modules is None
            or imported_model_class(self.program.facts, call, modules) is not None
        ):
            return None
        found = modules.definition(qualified)
        if found is None or found[1] not in found[0].facts.classes:
            return None
        linked, name = found
        base = keras_model_base(linked.facts, linked.facts.classes[name], linked.facts.classes)
        return f"`{name}`, a subclass of `{base}`" if base is not None else None

    def _flag_plain_model(self, name: str, call: cst.Call) -> None:
        kind = self._plain_model_kind(call)
        message = (
            f"`{name}` is {kind}, and it is what the training code runs: the library partitions"
            " only a model defined by subclassing `smp.DistributedModel` (a Keras `Model`), with"
            " its layers built in `__init__`, so this one is never split across ranks. Define"
            " `class MyModel(smp.DistributedModel)` with the layers in `__init__` and the forward"
            " pass in `call`."
        )
        title = f"model `{name}` is not a `smp.DistributedModel` subclass: never split"
        self.report(call, title, explanation=message, severity=Severity.ERROR)

    def _check_shared_layers(self, cls: cst.ClassDef) -> None:
        init = _method(cls, "__init__")
        if init is None:
            return
        params = {param.name.value for param in init.params.params[1:]}
        for target, value in _self_assignments(init):
            if type(value) is not cst.Name:
                continue
            if value.value in params:
                for argument in self._layer_arguments(cls, init, value.value):
                    self._flag_shared_layer(argument, cls, target)
            elif self._module_layer(value):
                self._flag_shared_layer(value, cls, target)

    def _module_value(self, use: cst.Name) -> Optional[cst.BaseExpression]:
        """What the name ``use`` holds where it stands, when one module-level assignment gives
        it."""
        assignment = self.program.facts.names.assignment(use.value, use)
        if (
            assignment is None
            or assignment.where is None
            or type(assignment.where.scope) is not cst.Module
        ):
            return None
        return assignment.value

    def _module_layer(self, use: cst.Name) -> bool:
        value = self._module_value(use)
        return value is not None and _is_layer(self.program.facts, value)

    def _layer_arguments(
        self, cls: cst.ClassDef, init: cst.FunctionDef, parameter: str
    ) -> Iterator[cst.BaseExpression]:
        """Layer constructions passed for ``parameter`` where the class is instantiated in this
        file."""
        for call in self.program.facts.call_order:
            if not (type(call.func) is cst.Name and call.func.value == cls.name.value):
                continue
            value = _argument_for(init, call, parameter)
            if value is not None and _is_layer(self.program.facts, value):
                yield value

    def _flag_shared_layer(self, node: cst.CSTNode, cls: cst.ClassDef, target: str) -> None:
        message = (
            f"This layer object is built outside `{cls.name.value}.__init__` and stored as"
            f" `self.{target}`: at the first step the library builds a second copy of the model by"
            " calling the class again, and a layer shared by both copies raises `ValueError`"
            ' ("Layers that have a build() method implemented must be created in the __init__'
            ' methods"). Build the layer inside `__init__` (pass its settings, not the layer).'
        )
        title = f"`self.{target}` is a layer built outside `{cls.name.value}.__init__`"
        self.report(node, title, explanation=message, severity=Severity.WARNING)

    def _check_outside_variables(self, cls: cst.ClassDef) -> None:
        call = _method(cls, "call")
        if call is None:
            return
        local = bound_names(call.body) | {param.name.value for param in call.params.params}
        for inner in iter_nodes(call.body):
            if (
                type(inner) is cst.Name
                and inner.value not in local
                and self._module_variable(inner)
                and id(inner) not in self.reported
            ):
                self.reported.add(id(inner))
                message = (
                    f"`{inner.value}` is a `tf.Variable` created outside the model and read in"
                    f" `{cls.name.value}.call`: the library places only variables the model owns,"
                    ' and raises `GraphBuildError` ("Any variable that is used in'
                    ' smp.DistributedModel.call function must be owned by the model") at the first'
                    " step. Create it in `__init__` (`self.add_weight(...)` or a layer)."
                )
                title = (
                    f"`{inner.value}` read in `{cls.name.value}.call` is a `tf.Variable` the model"
                    f" does not own"
                )
                self.report(inner, title, explanation=message, severity=Severity.ERROR)

    def _module_variable(self, use: cst.Name) -> bool:
        value = self._module_value(use)
        return (
            type(value) is cst.Call and self.program.facts.qualified_name(value.func) in _VARIABLES
        )


def _method(cls: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
    for statement in cls.body.body:
        if type(statement) is cst.FunctionDef and statement.name.value == name:
            return statement
    return None


def _self_assignments(function: cst.FunctionDef) -> Sequence[tuple[str, cst.BaseExpression]]:
    """``self.<attr> = value`` statements of ``function``."""
    found = []
    for node in iter_nodes(function.body):
        if type(node) is cst.Assign and len(node.targets) == 1:
            target = node.targets[0].target
            if (
                type(target) is cst.Attribute
                and type(target.value) is cst.Name
                and target.value.value == "self"
            ):
                found.append((target.attr.value, node.value))
    return found


def _is_layer(facts: FileFacts, value: cst.BaseExpression) -> bool:
    return type(value) is cst.Call and (facts.qualified_name(value.func) or "").startswith(
        _LAYER_MODULES
    )


def _argument_for(
    init: cst.FunctionDef, call: cst.Call, parameter: str
) -> Optional[cst.BaseExpression]:
    """The argument of ``Class(...)`` that ``__init__`` receives as ``parameter`` (``self`` is not
    passed)."""
    positional = [param.name.value for param in init.params.params[1:]]
    index = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is not None:
            if arg.keyword.value == parameter:
                return arg.value
            continue
        if index < len(positional) and positional[index] == parameter:
            return arg.value
        index += 1
    return None
