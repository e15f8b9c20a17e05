"""SMP112: a PyTorch or apex feature the library does not support, on the library's path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import libcst as cst

from smpfix.base.edits import NodeEdit, ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.walker import iter_nodes
from smpfix.fixes.references import smp_reference
from smpfix.job.jobfacts import Tri
from smpfix.program.objects.wrapped_model import latest_assignment, wrapped_constructions
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet
from smpfix.rules.wiring._conditions import condition_evidence, condition_title
from smpfix.rules.wiring._library_code import LibraryCode, library_import_optional
from smpfix.rules.wiring._scaler_uses import ScalerUse, scaler_use


@dataclass(frozen=True)
class _Replacement:
    """A documented drop-in: the library member with the same constructor, from a version on."""

    member: str
    since: Optional[tuple[int, ...]] = None


_SCALERS = frozenset(
    {
        "torch.cuda.amp.GradScaler",
        "torch.cuda.amp.grad_scaler.GradScaler",
        "torch.amp.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
    }
)
_DROP_INS = {
    "apex.normalization.FusedLayerNorm": _Replacement("nn.FusedLayerNorm", (1, 6)),
    "apex.normalization.fused_layer_norm.FusedLayerNorm": _Replacement("nn.FusedLayerNorm", (1, 6)),
    "apex.optimizers.FusedAdam": _Replacement("optimizers.FusedAdam"),
    "apex.optimizers.FusedLAMB": _Replacement("optimizers.FusedLAMB"),
    "apex.optimizers.FusedNovoGrad": _Replacement("optimizers.FusedNovoGrad"),
    "apex.optimizers.fused_adam.FusedAdam": _Replacement("optimizers.FusedAdam"),
    "apex.optimizers.fused_lamb.FusedLAMB": _Replacement("optimizers.FusedLAMB"),
    "apex.optimizers.fused_novograd.FusedNovoGrad": _Replacement("optimizers.FusedNovoGrad"),
}
_APEX_AMP = frozenset(
    {
        "apex.amp.initialize",
        "apex.amp.scale_loss",
        "apex.amp.frontend.initialize",
        "apex.amp.handle.scale_loss",
    }
)
_JIT = frozenset({"torch.jit.script", "torch.jit.trace", "torch.jit.trace_module"})
_COMPILE = frozenset({"torch.compile"})


class UnsupportedFrameworkFeature(Rule):
    summary = (
        "PyTorch AMP's GradScaler, apex amp and fused layers, TorchScript, `torch.compile` and"
        " `super().forward` do not work with the library."
    )
    fix_availability = FixAvailability.SOMETIMES_SAFE
    depends_on = ("PP",)
    default_severity = Severity.WARNING
    tensor_parallelism = TensorParallelism.NONE

    def leave_Module(self, node: cst.Module) -> None:
        library: Optional[LibraryCode] = None
        for call in self.program.facts.call_order:
            qualified = self.program.facts.qualified_name(call.func) or ""
            check = self._check_for(qualified)
            if check is None:
                continue
            library = library or LibraryCode(self.program.file)
            if library.runs_with_library(call):
                check(call, qualified, node)
        self._model_transforms()
        if self.program.facts.distributed_models:
            self._super_forward()

    def _check_for(self, qualified: str) -> Optional[Callable[[cst.Call, str, cst.Module], None]]:
        if qualified in _SCALERS:
            return self._scaler
        if qualified in _DROP_INS:
            return self._drop_in
        if qualified in _APEX_AMP:
            return self._apex_amp
        return None

    # -- items ------------------------------------------------------------------------------
    def _scaler(self, call: cst.Call, qualified: str, module: cst.Module) -> None:
        uses = scaler_use(self.program, call)
        if uses.verdict is ScalerUse.OFF_LIBRARY:
            # Built on a line every back end runs, used only where the library does not run.
            return
        pp = self.feature("PP")
        why = (
            "its overflow check sees only this rank's gradients, so the pipeline stages disagree"
            ' on whether to skip a step, and on a stage without local parameters it fails with "No'
            ' inf checks were recorded"'
        )
        if pp.state is Tri.ON:
            severity, lead = (
                Severity.ERROR,
                (
                    f"`{qualified}` does not work with the model parallelism library, and"
                    f" {pp.condition()}: {why}"
                ),
            )
        else:
            severity = Severity.WARNING
            lead = (
                f"`{qualified}` does not work with the model parallelism library (API"
                ' documentation: it "currently '
                f"doesn't work with the library\"); with pipeline parallelism {why}"
            )
        message = (
            f"{lead}. Use `smp.amp.GradScaler`, a subclass with the same arguments that agrees on"
            " overflow across the pipeline stages and skips the step where a stage has no"
            " parameters."
        )
        shown = snippet(qualified, 40)
        title = (
            f"{shown}{condition_title(self.program, call)}: stages disagree on overflow"
            if severity is Severity.ERROR
            else f"{shown}{condition_title(self.program, call)} does not work with the library"
        )
        evidence = condition_evidence(self.program, call)
        optional = library_import_optional(self.program.file)
        fix = self._rename(
            call,
            module,
            _Replacement("amp.GradScaler"),
            "smp.amp.GradScaler",
            shared=uses.shared or optional,
        )
        if uses.verdict is ScalerUse.UNSEEN and (uses.shared or optional):
            # Maybe only the other back end uses it, where the library's class may not exist.
            severity, fix = Severity.HINT, None
            evidence = (
                *evidence,
                "smpfix cannot see every use of this scaler, and "
                + (
                    "some run without the library"
                    if uses.shared
                    else "the file also runs without the library (its import is optional)"
                ),
            )
        self.report(
            call,
            title,
            explanation=message,
            evidence=evidence,
            severity=severity,
            fix=fix,
            job_facts=(pp,),
        )

    def _drop_in(self, call: cst.Call, qualified: str, module: cst.Module) -> None:
        replacement = _DROP_INS[qualified]
        name = qualified.rsplit(".", 1)[1]
        message = (
            f"apex's `{name}` is not supported by the model parallelism library (developer guide,"
            " unsupported framework features); use the library's drop-in"
            f" `smp.{replacement.member}`, which takes the same arguments."
        )
        self.report(
            call,
            f"apex's `{name}`{condition_title(self.program, call)} is not supported: use"
            f" `smp.{replacement.member}`",
            explanation=message,
            evidence=condition_evidence(self.program, call),
            severity=Severity.WARNING,
            fix=self._rename(call, module, replacement, f"smp.{replacement.member}"),
        )

    def _apex_amp(self, call: cst.Call, qualified: str, module: cst.Module) -> None:
        name = qualified.rsplit(".", 1)[1]
        message = (
            f"`apex.amp.{name}` is not supported by the model parallelism library (developer guide,"
            " unsupported framework features): it patches the model and optimizer behind the"
            ' library\'s back. For mixed precision, set `"fp16": True` in the modelparallel'
            " parameters, or use `torch.cuda.amp.autocast` with `smp.amp.GradScaler`."
        )
        self.report(
            call,
            f"`apex.amp.{name}`{condition_title(self.program, call)} is not supported by the"
            " library",
            explanation=message,
            evidence=condition_evidence(self.program, call),
            severity=Severity.WARNING,
        )

    def _model_transforms(self) -> None:
        """TorchScript or ``torch.compile`` on the module that reaches ``smp.DistributedModel``, on
        the result, or TorchScript on a submodule of either (developer guide, unsupported framework
        features: "on the model or submodules")."""
        seen: set[int] = set()
        for wrap in self.program.facts.distributed_models:
            for built in wrapped_constructions(self.program.facts, wrap):
                self._transform(built.call, seen, before=True)
        library: Optional[LibraryCode] = None
        for call in self.program.facts.call_order:
            qualified = self.program.facts.qualified_name(call.func) or ""
            if qualified not in _JIT | _COMPILE or not call.args:
                continue
            first = call.args[0].value
            if self.program.facts.is_smp_call(first, "DistributedModel") or self._holds_model(
                first, call
            ):
                self._transform(call, seen, before=False)
            elif qualified in _JIT and type(first) is cst.Attribute:
                root: cst.BaseExpression = first
                while type(root) is cst.Attribute:
                    root = root.value
                if type(root) is not cst.Name:
                    continue
                library = library or LibraryCode(self.program.file)
                if not library.runs_with_library(call):
                    continue
                if self._holds_model(root, call):
                    self._submodule(call, first, seen, before=False)
                elif self._becomes_model(root, call):
                    self._submodule(call, first, seen, before=True)

    def _holds_model(self, expr: cst.BaseExpression, call: cst.Call) -> bool:
        if type(expr) is not cst.Name:
            return False
        for wrap in self.program.facts.distributed_models:
            if (
                wrap.target != expr.value
                or wrap.where is None
                or not self.program.order.runs_before(wrap.call, call)
            ):
                continue
            found = latest_assignment(self.program.facts, expr)
            if found is not None and found.value is wrap.call:
                return True
        return False

    def _becomes_model(self, name: cst.Name, call: cst.Call) -> bool:
        """``name`` is the module a later ``smp.DistributedModel(name)`` wraps."""
        return any(
            type(wrap.argument) is cst.Name
            and wrap.argument.value == name.value
            and self.program.order.runs_before(call, wrap.call)
            for wrap in self.program.facts.distributed_models
        )

    def _submodule(
        self, call: cst.Call, submodule: cst.Attribute, seen: set[int], before: bool
    ) -> None:
        if id(call) in seen:
            return
        seen.add(id(call))
        qualified = self.program.facts.qualified_name(call.func) or ""
        code = self.program.code_for(submodule)
        place = (
            "the module given to `smp.DistributedModel`" if before else "the `smp.DistributedModel`"
        )
        message = (
            f"`{qualified}` is applied to `{code}`, a submodule of {place}: the library partitions"
            " and runs the model through its Python modules (it traces them and patches their"
            " `forward`), which a TorchScript module does not have (developer guide, unsupported"
            " framework features; TorchScript is unsupported on the model and on its submodules)."
            " Keep the submodule a plain `nn.Module` while it is part of the model."
        )
        self.report(
            call,
            f"`{qualified}` on {snippet(code, 30)}, part of the `smp.DistributedModel`",
            explanation=message,
            severity=Severity.WARNING,
        )

    def _transform(self, call: cst.Call, seen: set[int], before: bool) -> None:
        qualified = self.program.facts.qualified_name(call.func) or ""
        if id(call) in seen or qualified not in _JIT | _COMPILE:
            return
        seen.add(id(call))
        place = (
            "the module given to `smp.DistributedModel`" if before else "the `smp.DistributedModel`"
        )
        if qualified in _JIT:
            message = (
                f"`{qualified}` is applied to {place}: the library partitions and runs the model"
                " through its Python modules (it traces them and patches their `forward`), which a"
                " TorchScript module does not have (developer guide, unsupported framework"
                " features). Wrap the plain `nn.Module`."
            )
            self.report(
                call,
                f"`{qualified}` on the model {'before' if before else 'after'}"
                " `smp.DistributedModel`: it cannot be partitioned",
                explanation=message,
            )
            return
        message = (
            f"`torch.compile` is applied to {place}; the library does not support `torch.compile`"
            " (release notes of SMP 1.15, the PyTorch 2.0 release): the compiled wrapper hides the"
            " modules the library partitions and patches. Wrap the plain `nn.Module` and leave"
            " compilation out."
        )
        self.report(
            call,
            f"`torch.compile` on {place} is not supported by the library",
            explanation=message,
            severity=Severity.WARNING,
        )

    def _super_forward(self) -> None:
        """``super().forward(...)`` in a ``forward`` of a module class of this file."""
        for cls in self.program.facts.classes.values():
            for statement in cls.body.body:
                if not (type(statement) is cst.FunctionDef and statement.name.value == "forward"):
                    continue
                for node in iter_nodes(statement.body):
                    if _is_super_forward(node):
                        assert type(node) is cst.Call and type(node.func) is cst.Attribute
                        message = (
                            "`super().forward(...)` inside a module's `forward`: the library"
                            " replaces the `forward` of the modules it wraps, so this call can come"
                            " back to the patched method and raise RecursionError (troubleshooting"
                            " guide). Call `super()._orig_forward(...)`, the original method the"
                            " library keeps."
                        )
                        fix = PendingFix(
                            Applicability.UNSAFE,
                            "Call `super()._orig_forward(...)`",
                            (ReplaceNode(node.func.attr, "_orig_forward"),),
                        )
                        self.report(
                            node,
                            "`super().forward(...)` in `forward` can recurse into the library's"
                            " patch",
                            explanation=message,
                            severity=Severity.WARNING,
                            fix=fix,
                        )

    # -- fixes ------------------------------------------------------------------------------
    def _rename(
        self,
        call: cst.Call,
        module: cst.Module,
        replacement: _Replacement,
        shown: str,
        *,
        shared: bool = False,
    ) -> Optional[PendingFix]:
        """The library's drop-in; unsafe when ``shared`` (the line also serves a path without
        the library, where the library's class may not even be importable) or when the drop-in
        may be newer than the job's library."""
        reference = smp_reference(self.program.file, replacement.member)
        if reference is None or ("." in replacement.member and reference.edits):
            # `from smdistributed.modelparallel.torch import X` cannot import `amp.GradScaler`.
            return None
        safe = not shared and (
            replacement.since is None
            or self.program.job.version_applies(replacement.since, None) is Tri.ON
        )
        edits: tuple[NodeEdit, ...] = (*reference.edits, ReplaceNode(call.func, reference.text))
        return PendingFix(
            Applicability.SAFE if safe else Applicability.UNSAFE, f"Use `{shown}`", edits
        )


def _is_super_forward(node: cst.CSTNode) -> bool:
    if not (
        type(node) is cst.Call
        and type(node.func) is cst.Attribute
        and node.func.attr.value == "forward"
    ):
        return False
    receiver = node.func.value
    return (
        type(receiver) is cst.Call
        and type(receiver.func) is cst.Name
        and receiver.func.value == "super"
    )
