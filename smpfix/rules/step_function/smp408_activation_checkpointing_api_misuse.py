"""SMP408: activation checkpointing set up with PyTorch's or Hugging Face's API, in the wrong order,
or with arguments the library refuses."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.findings import Severity
from smpfix.base.imports import dotted_name
from smpfix.base.parents import ParentIndex
from smpfix.base.walker import Ancestry, iter_nodes
from smpfix.program.model import Program
from smpfix.rules.rule import Rule, TensorParallelism
from smpfix.rules.titles import snippet

_STRATEGY = re.compile(r"^(each|contiguous|group_\d+)$")
_TORCH_CHECKPOINT = frozenset(
    {"torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential"}
)
_SMP_CHECKPOINT = frozenset(
    {"patches.checkpoint.checkpoint", "patches.checkpoint.checkpoint_sequential"}
)
_SEQUENTIAL = frozenset({"torch.nn.Sequential", "torch.nn.modules.container.Sequential"})
_SMP_CHECKPOINT_ADVICE = (
    "Use the library's own: `smp.set_activation_checkpointing(module)` on a submodule after"
    " `smp.DistributedModel`, or `from smdistributed.modelparallel.torch.patches.checkpoint import"
    " checkpoint` inside `forward`."
)


@dataclass(frozen=True)
class _Setting:
    """One ``smp.set_activation_checkpointing(module, ...)`` call and the module it names."""

    call: cst.Call
    module: Optional[str]


class ActivationCheckpointingApiMisuse(Rule):
    summary = (
        "Activation checkpointing through `torch.utils.checkpoint` or Hugging Face,"
        " `smp.set_activation_checkpointing` before the wrap, nested or with a bad `strategy`."
    )
    default_severity = Severity.ERROR
    runs_on_helper_modules = True
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.settings: list[_Setting] = []

    # -- detection -----------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        member = self.program.facts.smp_member(node.func)
        if member == "set_activation_checkpointing":
            self._check_setting(node)
        elif member in _SMP_CHECKPOINT:
            self._check_smp_checkpoint(node)
        elif self.program.facts.qualified_name(node.func) in _TORCH_CHECKPOINT:
            self._flag_torch_checkpoint(node)
        elif (
            type(node.func) is cst.Attribute
            and node.func.attr.value == "gradient_checkpointing_enable"
        ):
            if not self._behind_gradient_checkpointing_flag():
                self._flag_hugging_face(node, f"`{self.program.code_for(node.func)}()`")
        else:
            self._check_hugging_face_config(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            attribute = target.target
            if (
                type(attribute) is cst.Attribute
                and attribute.attr.value == "gradient_checkpointing"
            ):
                if self.program.facts.literal(node.value) is True:
                    self._flag_hugging_face(node, f"`{self.program.code_for(attribute)} = True`")

    def _check_setting(self, call: cst.Call) -> None:
        module = argument(call, "module", 0)
        self.settings.append(
            _Setting(call, dotted_name(module.value) if module is not None else None)
        )
        strategy = argument(call, "strategy", 3)
        value = self.program.facts.literal(strategy.value) if strategy is not None else "each"
        if isinstance(value, str) and not _STRATEGY.match(value):
            message = (
                f'`strategy={value!r}` is none of the strategies the library documents: `"each"`,'
                ' `"contiguous"` or `"group_<n>"` (e.g. `"group_2"` checkpoints every two layers'
                ' together, which saves more memory than `"each"`).'
            )
            title = (
                f"strategy {snippet(repr(value), 24)} is not a documented checkpointing strategy"
            )
            self.report(strategy or call, title, explanation=message, severity=Severity.WARNING)
        elif (
            isinstance(value, str)
            and value != "each"
            and module is not None
            and self._not_sequential(module.value)
        ):
            message = (
                f"`strategy={value!r}` groups the layers of an `nn.Sequential`, but"
                f" `{self.program.code_for(module.value)}` is not one: the library raises"
                " CheckpointingConfigError. Pass an `nn.Sequential` of the layers, or call"
                " `smp.set_activation_checkpointing` on each layer without `strategy`."
            )
            grouped = snippet(self.program.code_for(module.value), 24)
            title = (
                f"strategy {snippet(repr(value), 16)} on {grouped}, not an `nn.Sequential`:"
                " the library raises"
            )
            self.report(strategy or call, title, explanation=message, severity=Severity.ERROR)

    def _not_sequential(self, expr: cst.BaseExpression) -> bool:
        """The module is built visibly as something other than an ``nn.Sequential``."""
        if type(expr) is cst.Name:
            built = self.program.facts.names.assignment(expr.value, expr)
            if built is None:
                return False
            expr = built.value
        if type(expr) is not cst.Call:
            return False
        qualified = self.program.facts.qualified_name(expr.func)
        if qualified is not None:
            last = qualified.rsplit(".", 1)[-1]
            return (
                qualified.startswith("torch.nn.")
                and qualified not in _SEQUENTIAL
                and last[:1].isupper()
            )
        return type(expr.func) is cst.Name and self._local_module_not_sequential(expr.func.value, 0)

    def _local_module_not_sequential(self, name: str, depth: int) -> bool:
        cls = self.program.facts.classes.get(name)
        if cls is None or depth > 5 or not cls.bases:
            return False
        for base in cls.bases:
            qualified = self.program.facts.qualified_name(base.value)
            if qualified in _SEQUENTIAL:
                return False
            if qualified == "torch.nn.Module":
                continue
            if type(base.value) is cst.Name and self._local_module_not_sequential(
                base.value.value, depth + 1
            ):
                continue
            return False
        return True

    def _check_smp_checkpoint(self, call: cst.Call) -> None:
        first = argument(call, "module", 0)
        if first is None:
            return
        function = self._plain_function(first.value)
        if function is None:
            return
        message = (
            "The library's `checkpoint` takes a module, but"
            f" `{self.program.code_for(first.value)}` is {function}: it raises CheckpointingError"
            ' ("... is not a Module"). Pass the submodule itself (`checkpoint(self.block, x)`), or'
            " put the code in an `nn.Module`."
        )
        title = (
            f"`checkpoint` given {function} {snippet(self.program.code_for(first.value), 24)},"
            " not a module: the library raises"
        )
        self.report(call, title, explanation=message, severity=Severity.ERROR)

    def _plain_function(self, expr: cst.BaseExpression) -> Optional[str]:
        """ "a lambda", "a function" or "a method" when ``expr`` certainly is not a module."""
        if type(expr) is cst.Lambda:
            return "a lambda"
        if (
            type(expr) is cst.Name
            and expr.value in self.program.facts.functions
            and expr.value not in self.program.facts.classes
        ):
            return "a function"
        if (
            type(expr) is cst.Attribute
            and type(expr.value) is cst.Name
            and expr.value.value == "self"
        ):
            cls = self.ancestry.nearest(cst.ClassDef)
            if type(cls) is cst.ClassDef and any(
                type(s) is cst.FunctionDef and s.name.value == expr.attr.value
                for s in cls.body.body
            ):
                return "a method"
        return None

    def _flag_torch_checkpoint(self, call: cst.Call) -> None:
        if self._behind_gradient_checkpointing_flag():
            return
        message = (
            f"`{self.program.code_for(call.func)}(...)` is PyTorch's activation checkpointing,"
            " which the developer guide says is not compatible with the library: the library"
            " schedules the forward and backward passes of each partition and microbatch itself,"
            f" and recomputation it does not know of breaks that. {_SMP_CHECKPOINT_ADVICE}"
        )
        title = (
            f"{snippet(self.program.code_for(call.func) + '(...)', 30)} is PyTorch checkpointing,"
            " incompatible with the library"
        )
        self.report(call, title, explanation=message, severity=Severity.WARNING)

    def _behind_gradient_checkpointing_flag(self) -> bool:
        """Code that checkpoints only ``if self.gradient_checkpointing`` (Hugging Face model
        code, and the Trainer's ``if args.gradient_checkpointing:
        model.gradient_checkpointing_enable()``): it runs only when a configuration turns it on,
        which this rule reports there."""
        for node in self.ancestry.stack:
            if isinstance(node, (cst.If, cst.IfExp)):
                if any(
                    isinstance(n, (cst.Name, cst.Attribute)) and _names_flag(n)
                    for n in iter_nodes(node.test)
                ):
                    return True
        return False

    def _check_hugging_face_config(self, call: cst.Call) -> None:
        qualified = self.program.facts.qualified_name(call.func) or ""
        if not qualified.startswith("transformers."):
            return
        flag = argument(call, "gradient_checkpointing")
        if (
            flag is not None
            and self.program.facts.literal(flag.value) is True
            and "TrainingArguments" not in qualified
        ):
            self._flag_hugging_face(flag, "`gradient_checkpointing=True`")

    def _flag_hugging_face(self, node: cst.CSTNode, what: str) -> None:
        message = (
            f"{what} turns on Hugging Face gradient checkpointing, which runs"
            " `torch.utils.checkpoint` inside the model: the developer guide says PyTorch's native"
            f" checkpointing is not compatible with the library. {_SMP_CHECKPOINT_ADVICE}"
        )
        if len(what) > 2 and what.startswith("`") and what.endswith("`"):
            what = snippet(what[1:-1], 28)
        title = f"{what}: Hugging Face checkpointing is incompatible with the library"
        self.report(node, title, explanation=message, severity=Severity.WARNING)

    # -- order and nesting ---------------------------------------------------------------
    def leave_Module(self, node: cst.Module) -> None:
        if not self.settings:
            return
        parents = self.program.parents
        for setting in self.settings:
            if self._before_wrap(setting.call, parents):
                message = (
                    f"`{self.program.code_for(setting.call.func)}(...)` runs before"
                    " `smp.DistributedModel`: it raises DistributedModelNotWrappedError. Call it"
                    " after the wrap, on the module as the wrapped model holds it"
                    " (`model.get_module()...`); with tensor parallelism the wrap may replace the"
                    " module object."
                )
                title = (
                    f"{snippet(self.program.code_for(setting.call.func) + '(...)')} runs before"
                    " `smp.DistributedModel`: the library raises"
                )
                self.report(setting.call, title, explanation=message, severity=Severity.ERROR)
        for outer in self.settings:
            for inner in self.settings:
                if self._nested(outer, inner, parents):
                    message = (
                        f"`{inner.module}` is checkpointed inside `{outer.module}`, which is"
                        ' checkpointed too: the library raises "Checkpointing module ... inside a'
                        ' checkpointed module ... is not supported" at the first step. Checkpoint'
                        " one of the two."
                    )
                    title = (
                        f"{snippet(str(inner.module), 24)} checkpointed inside checkpointed"
                        f" {snippet(str(outer.module), 24)}: the library raises"
                    )
                    self.report(inner.call, title, explanation=message, severity=Severity.ERROR)

    def _before_wrap(self, call: cst.Call, parents: ParentIndex) -> bool:
        order = self.program.order
        wraps = [
            w for w in self.program.facts.distributed_models if order.same_function(w.call, call)
        ]
        if any(order.runs_before(wrap.call, call) for wrap in wraps):
            return False
        return any(order.runs_before(call, wrap.call) for wrap in wraps)

    def _nested(self, outer: _Setting, inner: _Setting, parents: ParentIndex) -> bool:
        """``outer.module`` is an ancestor path of ``inner.module`` naming the same object: one
        function, one binding of the root name (the same ``for`` loop, or a single assignment),
        and both calls can run in one pass."""
        if (
            outer.module is None
            or inner.module is None
            or not inner.module.startswith(outer.module + ".")
        ):
            return False
        scope = parents.scope_of(outer.call)
        if scope is not parents.scope_of(inner.call) or self.program.order.exclusive(
            outer.call, inner.call
        ):
            return False
        root = outer.module.split(".", 1)[0]
        if _loop_binding(parents, outer.call, root) is not _loop_binding(parents, inner.call, root):
            return False
        assigned = list(self.program.facts.names.in_scope(root, scope))
        return len(assigned) <= 1


def _loop_binding(parents: ParentIndex, node: cst.CSTNode, name: str) -> Optional[cst.For]:
    """The innermost ``for`` around ``node`` whose target binds ``name``."""
    for ancestor in parents.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            return None
        if type(ancestor) is cst.For and any(
            type(n) is cst.Name and n.value == name for n in iter_nodes(ancestor.target)
        ):
            return ancestor
    return None


def _names_flag(node: cst.CSTNode) -> bool:
    name = (
        node.attr.value
        if type(node) is cst.Attribute
        else node.value
        if type(node) is cst.Name
        else ""
    )
    return "gradient_checkpointing" in name
