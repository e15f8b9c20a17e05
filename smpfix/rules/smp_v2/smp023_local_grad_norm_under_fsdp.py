"""SMP023: ``torch.nn.utils.clip_grad_norm_`` over the parameters of an FSDP-sharded model."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.edits import ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.job.versions import FIRST_V2
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.scope import FileScope, Library
from smpfix.rules.smp_v2._script import FSDP, first_argument, keyword

_CLIP = frozenset({"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_norm_"})
_KEPT = frozenset({"max_norm", "norm_type"})
_NO_SHARD = "torch.distributed.fsdp.ShardingStrategy.NO_SHARD"


class LocalGradNormUnderFsdp(Rule):
    summary = (
        "`torch.nn.utils.clip_grad_norm_` over an FSDP model's parameters computes each rank's"
        " norm of its own shard, so every rank clips by a different, too small norm."
    )
    fix_availability = FixAvailability.UNSAFE
    tensor_parallelism = TensorParallelism.NONE
    library = Library.V2
    scope = FileScope.SMP_V2
    since = FIRST_V2

    def leave_Module(self, node: cst.Module) -> None:
        facts = self.program.facts
        for call in facts.call_order:
            if facts.qualified_name(call.func) not in _CLIP:
                continue
            wrap = self._fsdp_model(first_argument(call), call)
            if wrap is None:
                continue
            strategy = keyword(wrap, "sharding_strategy")
            if strategy is not None and facts.qualified_name(strategy.value) == _NO_SHARD:
                continue
            shard = self.program.job.value("hybrid_shard_degree")
            if shard == 1:
                continue  # SMP v2 falls back to NO_SHARD
            known = isinstance(shard, int) and not isinstance(shard, bool)
            title = (
                "`clip_grad_norm_` over FSDP shards clips by a local norm: the replicas drift apart"
                if known
                else "`clip_grad_norm_` over FSDP shards clips by a local norm unless"
                " `hybrid_shard_degree` is 1"
            )
            self.report(
                call,
                title,
                explanation=(
                    "`torch.nn.utils.clip_grad_norm_` sees only the parameter shards this rank"
                    " holds after the FSDP wrap, so it computes a local norm: every rank clips by"
                    " a different, too small norm, and the replicas' weights drift apart."
                    + (
                        ""
                        if known
                        else " (Unless the job sets `hybrid_shard_degree` 1, which smpfix cannot"
                        " see.)"
                    )
                    + " Clip with the sharded model's own method, `model.clip_grad_norm_(max_norm)`"
                    " on the root FSDP module, or SMP v2's"
                    " `torch.sagemaker.grad_norm.clip_grad_norm_(model, max_norm)`."
                ),
                severity=Severity.ERROR if known else Severity.WARNING,
                fix=self._root_clip(call),
            )

    def _root_clip(self, call: cst.Call) -> Optional[PendingFix]:
        """``model.clip_grad_norm_(max_norm, norm_type)``: FSDP's method takes the same two
        settings; a call passing more (``foreach``, ``error_if_nonfinite``) is left to a person.
        Unsafe: the method is a collective, so every rank must reach it, and it must be the
        root FSDP module's (a nested wrap's norm covers its own parameters only)."""
        parameters, *rest = call.args
        if parameters.keyword is not None or parameters.star:
            return None
        if any(arg.star or (arg.keyword and arg.keyword.value not in _KEPT) for arg in rest):
            return None
        model = cst.ensure_type(parameters.value, cst.Call).func
        owner = self.program.code_for(cst.ensure_type(model, cst.Attribute).value)
        code = self.program.code_for
        settings = ", ".join(
            f"{arg.keyword.value}={code(arg.value)}" if arg.keyword else code(arg.value)
            for arg in rest
        )
        return PendingFix(
            Applicability.UNSAFE,
            f"Clip with `{owner}.clip_grad_norm_(...)`, the FSDP module's own method",
            (ReplaceNode(call, f"{owner}.clip_grad_norm_({settings})"),),
        )

    def _fsdp_model(
        self, argument: Optional[cst.BaseExpression], at: cst.Call
    ) -> Optional[cst.Call]:
        """The FSDP wrap whose parameters ``argument`` (``model.parameters()``) passes."""
        if (
            type(argument) is not cst.Call
            or type(argument.func) is not cst.Attribute
            or argument.func.attr.value != "parameters"
            or type(argument.func.value) is not cst.Name
        ):
            return None
        name = argument.func.value.value
        facts = self.program.facts
        values = [a.value for a in self.program.names.reaching(name, at).assignments]
        wraps = [
            value
            for value in values
            if type(value) is cst.Call and facts.qualified_name(value.func) in FSDP
        ]
        return wraps[0] if wraps and len(wraps) == len(values) else None
