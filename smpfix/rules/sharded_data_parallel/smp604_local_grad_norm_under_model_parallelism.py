"""SMP604: ``clip_grad_norm_`` on the model's parameters, which sees one partition (or, with
fp16/bf16, nothing the optimizer uses)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.edits import ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.walker import Ancestry
from smpfix.job.jobfacts import FeatureState, Tri
from smpfix.program.facts import FileFacts
from smpfix.program.flow.numeric_values import enclosing_scope
from smpfix.program.model import Program
from smpfix.program.objects.model_names import DistributedModelNames
from smpfix.program.objects.unwrapped import raw_name
from smpfix.program.steps import enclosing_step, step_bodies
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet

_CLIP_NORM = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad_norm",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
        "torch.nn.utils.clip_grad.clip_grad_norm",
    }
)
_PARAMETER_METHODS = frozenset({"parameters", "local_parameters"})


class LocalGradNormUnderModelParallelism(Rule):
    summary = (
        "`clip_grad_norm_(model.parameters())` clips by one partition's norm under pipeline/tensor"
        " parallelism, and does nothing with fp16/bf16."
    )
    fix_availability = FixAvailability.UNSAFE
    depends_on = ("PP", "TP", "FP16", "BF16", "SDP")
    tensor_parallelism = TensorParallelism.BOTH

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        return bool(facts.distributed_models)

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        steps = self.program.steps
        self.bodies = step_bodies(steps)
        self.models = self.program.file.answer(DistributedModelNames)

    def visit_Call(self, node: cst.Call) -> None:
        if self.program.facts.qualified_name(node.func) not in _CLIP_NORM:
            return
        if enclosing_step(self.ancestry, self.bodies, self.program.facts) is not None:
            return  # inside the step: SMP404's finding
        parameters = argument(node, "parameters", 0)
        if parameters is None or not self._model_parameters(parameters.value, node):
            return
        sdp = self.feature("SDP", node)
        if sdp.state is Tri.ON:
            return  # SMP601: the library clips by sdp_gradient_clipping itself
        fp16, bf16 = self.feature("FP16", node), self.feature("BF16", node)
        spelled = (
            f"`{self.program.code_for(node.func)}({self.program.code_for(parameters.value)}, ...)`"
        )
        if fp16.state is Tri.ON:
            self._flag_half_precision(node, spelled, fp16, sdp)
        elif bf16.state is Tri.ON:
            if sdp.state is Tri.OFF:
                self._flag_half_precision(node, spelled, bf16, sdp)
        else:
            self._flag_partition_norm(node, spelled)

    def _model_parameters(self, expr: cst.BaseExpression, call: cst.Call) -> bool:
        """``model.parameters()``, ``model.local_parameters()``,
        ``model.get_module().parameters()``, ``model.module.parameters()``, or ``net.parameters()``
        of the module ``model`` wraps."""
        if not (
            type(expr) is cst.Call
            and type(expr.func) is cst.Attribute
            and expr.func.attr.value in _PARAMETER_METHODS
        ):
            return False
        receiver = expr.func.value
        if (
            type(receiver) is cst.Call
            and type(receiver.func) is cst.Attribute
            and receiver.func.attr.value == "get_module"
        ):
            receiver = receiver.func.value
        elif type(receiver) is cst.Attribute and receiver.attr.value == "module":
            receiver = receiver.value
        if type(receiver) is not cst.Name:
            return False
        functions: list[cst.FunctionDef] = self.ancestry.all_of(cst.FunctionDef)  # type: ignore[assignment]
        if self.models.holds_model(receiver.value, functions):
            return True
        return (
            raw_name(self.program.file, receiver, self.program.facts.distributed_models, call)
            is not None
        )

    def _flag_half_precision(
        self, call: cst.Call, spelled: str, precision: FeatureState, sdp: FeatureState
    ) -> None:
        fp16 = precision.feature.key == "FP16"
        unless = (
            ""
            if sdp.state is Tri.OFF
            else " (unless sharded data parallelism is enabled, where SMP601 applies)"
        )
        if fp16:
            advice = (
                "Clip the fp32 master gradients with `optimizer.clip_master_grads(max_norm)` before"
                " `optimizer.step()`."
            )
        else:
            advice = (
                "The library offers no bf16 clipping outside sharded data parallelism"
                " (`clip_master_grads` returns without clipping under bf16 in 1.12): drop the call,"
                " or clip with sharded data parallelism's `sdp_gradient_clipping`."
            )
        dtype = "fp16" if fp16 else "bf16"
        function = snippet(self.program.code_for(call.func), 32)
        title = f"{function} clips {dtype} gradients after their fp32 copy: no effect"
        explanation = (
            f"{spelled} clips the model's half-precision gradients, but the library has already"
            " copied them to the fp32 master gradients at the end of the step call, and"
            f" `optimizer.step()` updates from those: the clipping has no effect{unless}. {advice}"
        )
        severity = Severity.ERROR if fp16 and sdp.state is Tri.OFF else Severity.WARNING
        fix = self._master_grads_fix(call) if fp16 else None
        self.report(
            call,
            title,
            explanation=explanation,
            severity=severity,
            fix=fix,
            job_facts=(precision, sdp),
        )

    def _flag_partition_norm(self, call: cst.Call, spelled: str) -> None:
        pp, tp = self.feature("PP", call), self.tp_distributed(call)
        on = [s for s in (pp, tp) if s.state is Tri.ON]
        unknown = [s for s in (pp, tp) if s.state is Tri.UNKNOWN]
        if not on and not unknown:
            # one partition: data-parallel gradients are already averaged, the norm is global
            return
        function = snippet(self.program.code_for(call.func), 32)
        if on:
            condition = "because " + " and ".join(s.condition() for s in on)
            title = f"{function} uses a partition's norm: each partition clips differently"
            severity = Severity.WARNING
        else:
            condition = "if " + " or ".join(s.feature.title for s in unknown) + " is enabled"
            short = (
                "pipeline or tensor parallelism" if len(unknown) > 1 else unknown[0].feature.title
            )
            title = f"{function} uses a partition's norm if {short} is on"
            severity = Severity.HINT
        self.report(
            call,
            title,
            explanation=(
                f"{spelled} computes the gradient norm of this rank's partition only, {condition}:"
                " each rank holds and sees gradients of its own pipeline stage or tensor slice, so"
                " every partition clips by a different factor and the update is not the globally"
                " clipped one. Gather the norms across the model-parallel group (the developer"
                " guide's advice), or use fp16 with `optimizer.clip_master_grads(max_norm)`, which"
                " does."
            ),
            severity=severity,
            job_facts=tuple(on or unknown),
        )

    def _master_grads_fix(self, call: cst.Call) -> Optional[PendingFix]:
        """``torch.nn.utils.clip_grad_norm_(model.parameters(), m)`` ->
        ``optimizer.clip_master_grads(m)`` when the result is unused, the norm is the default 2-norm
        and the file has one wrapped optimizer.
        """
        if type(self.ancestry.parent()) is not cst.Expr:
            return None
        scope = enclosing_scope(self.ancestry.stack, self.program.module)
        optimizers = {
            wrap.target
            for wrap in self.program.facts.distributed_optimizers
            if wrap.target
            and wrap.where is not None
            and (wrap.where.scope is scope or type(wrap.where.scope) is cst.Module)
        }
        max_norm = argument(call, "max_norm", 1)
        norm_type = argument(call, "norm_type", 2)
        if len(optimizers) != 1 or max_norm is None or len(call.args) > 2 + (norm_type is not None):
            return None
        if norm_type is not None and self.program.facts.literal(norm_type.value) not in (2, 2.0):
            return None
        replacement = (
            f"{next(iter(optimizers))}.clip_master_grads({self.program.code_for(max_norm.value)})"
        )
        return PendingFix(
            Applicability.UNSAFE,
            "Clip the fp32 master gradients",
            (ReplaceNode(call, replacement),),
        )
