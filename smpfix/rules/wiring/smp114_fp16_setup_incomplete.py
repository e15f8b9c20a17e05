"""SMP114: fp16 is on, but the script skips the fp16 guide's set-up (``model_creation``, loss
scaling)."""

from __future__ import annotations

import libcst as cst

from smpfix.base.calls import argument, has_star_kwargs
from smpfix.base.findings import Severity
from smpfix.job.jobfacts import Tri
from smpfix.program.facts import FileFacts, Wrap
from smpfix.program.objects.creation_contexts import enclosing_contexts
from smpfix.program.objects.wrapped_model import reaching_assignments, wrapped_constructions
from smpfix.rules.rule import Rule, TensorParallelism


def _dtype_given(call: cst.Call) -> bool:
    return any(argument(call, keyword) is not None for keyword in ("torch_dtype", "dtype"))


class Fp16SetupIncomplete(Rule):
    summary = (
        "With fp16 on, build the model in `smp.model_creation(dtype=torch.float16)` and turn on"
        " loss scaling in `smp.DistributedOptimizer`."
    )
    depends_on = ("FP16", "DELAYED_INIT")
    satisfied_by_hf_trainer = True
    default_severity = Severity.HINT
    since = (1, 10)
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        return bool(facts.distributed_models or facts.distributed_optimizers)

    def leave_Module(self, node: cst.Module) -> None:
        fp16 = self.feature("FP16")
        if fp16.state is not Tri.ON:
            return
        for wrap in self.program.facts.distributed_models:
            if not self._built_in_model_creation(node, wrap):
                self._flag_creation(wrap)
        for wrap in self.program.facts.distributed_optimizers:
            self._check_loss_scaling(wrap)

    def _built_in_model_creation(self, module: cst.Module, wrap: Wrap) -> bool:
        """Whether the model (or the statement naming it, or a builder call) sits in
        ``smp.model_creation``. Unknown constructions count as built there: smpfix stays quiet when
        it cannot see them."""
        built = wrapped_constructions(self.program.facts, wrap)
        if not built or any(_dtype_given(construction.call) for construction in built):
            # A model built with an explicit dtype (`from_config(config, torch_dtype=dtype)`) is
            # created in that dtype: what model_creation(dtype=...) would do.
            return True
        parents = self.program.parents
        places: list[cst.CSTNode] = [construction.call for construction in built]
        if type(wrap.argument) is cst.Name and wrap.where is not None:
            for assignment in reaching_assignments(self.program.facts, wrap.argument):
                places.append(assignment.value)
        for place in places:
            stack = [*reversed(list(parents.ancestors(place))), place]
            if any(
                context.member == "model_creation"
                for context in enclosing_contexts(self.program.facts, stack)
            ):
                return True
        return False

    def _flag_creation(self, wrap: Wrap) -> None:
        delayed = self.feature("DELAYED_INIT")
        fp16 = self.feature("FP16")
        lead = (
            f"`fp16` is enabled ({fp16.source}), but the model given to `smp.DistributedModel` is"
            " not built inside `with smp.model_creation(dtype=torch.float16, ...)`, as the fp16"
            " guide says"
        )
        if delayed.state is Tri.ON:
            message = (
                f"{lead}, and {delayed.condition()}: the parameters must then be created in fp16 to"
                " be initialised later. Build the model inside `with"
                " smp.model_creation(dtype=torch.float16):`."
            )
            self.report(
                wrap.call,
                "model not built in `smp.model_creation(dtype=torch.float16)` under delayed init",
                explanation=message,
                severity=Severity.WARNING,
                job_facts=(fp16, delayed),
            )
            return
        message = (
            f"{lead}. This is advice, not a failure: the library still casts it to fp16 when it"
            " wraps it, so training is correct,"
            " but the whole model is first built in fp32 on every process (twice the CPU memory"
            " and time). Build it inside `with smp.model_creation(dtype=torch.float16):`."
        )
        self.report(
            wrap.call,
            "fp16 guide advice: build the model in `smp.model_creation(dtype=torch.float16)`",
            explanation=message,
            severity=Severity.HINT,
            job_facts=(fp16,),
        )

    def _check_loss_scaling(self, wrap: Wrap) -> None:
        if has_star_kwargs(wrap.call):
            return
        dynamic = argument(wrap.call, "dynamic_loss_scale")
        static = argument(wrap.call, "static_loss_scale")
        if dynamic is not None and self.program.facts.literal(dynamic.value) is not False:
            return
        if static is not None and self.program.facts.literal(static.value) != 1.0:
            return
        fp16 = self.feature("FP16")
        message = (
            f"`fp16` is enabled ({fp16.source}), and `smp.DistributedOptimizer` keeps its default"
            " static loss scale of 1.0. That trains, but small fp16 gradients can underflow to"
            " zero; the fp16 guide recommends dynamic loss scaling:"
            " `smp.DistributedOptimizer(optimizer, static_loss_scale=None,"
            " dynamic_loss_scale=True)`."
        )
        self.report(
            wrap.call,
            "fp16 guide advice: dynamic loss scaling instead of the static scale of 1.0",
            explanation=message,
            severity=Severity.HINT,
            job_facts=(fp16,),
        )
