"""SMP807: ``offload_activations`` without the features it relies on."""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.base.flavour import ONLY_PYTORCH
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.launched_code import launched_code
from smpfix.rules.rule import FixAvailability, TensorParallelism

# The library's activation checkpointing entry points; offloading moves what they checkpoint.
CHECKPOINTING = (
    "set_activation_checkpointing",
    "patches.checkpoint.checkpoint",
    "patches.checkpoint.checkpoint_sequential",
)


class OffloadActivationsPrerequisites(ConfigRule):
    flavours = ONLY_PYTORCH
    summary = (
        "`offload_activations` moves checkpointed activations to the CPU: it needs activation"
        " checkpointing, and with pipeline parallelism more than one microbatch;"
        " `activation_loading_horizon` must be above 0."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        if view.value("offload_activations") is not True:
            return
        at = view.located("offload_activations")
        horizon = view.int_value("activation_loading_horizon")
        if horizon is not None and horizon <= 0:
            yield ConfigProblem(
                view.located("activation_loading_horizon"),
                f"activation_loading_horizon {horizon} is not above 0",
                Severity.WARNING,
                explanation=(
                    "It sets how early offloaded activations are loaded back to the GPU before the"
                    " backward pass needs them, and the documented range is an int larger than 0"
                    " (default 4); without a horizon the backward pass waits for each transfer."
                    " Use 1 or more."
                ),
            )
        pp, mb = view.int_value("pipeline_parallel_degree"), view.int_value("microbatches")
        if pp is not None and pp > 1 and mb is not None and mb <= 1:
            yield ConfigProblem(
                view.located("microbatches") or at,
                f"offload_activations with pipeline_parallel_degree {pp} but microbatches {mb}:"
                " no memory saved",
                Severity.WARNING,
                explanation=(
                    "Offloading moves the activations of the microbatches that are not running to"
                    " the CPU and loads them back in the background, so with a single microbatch"
                    " it saves no memory and only adds transfers. Use microbatches > 1 (2 or 4 to"
                    " start) or turn offloading off."
                ),
            )
        if _without_pipeline_or_sharding(view):
            yield ConfigProblem(
                at,
                "offload_activations without pipeline or sharded data parallelism may save nothing",
                Severity.HINT,
                explanation=(
                    "Offloading is documented for pipelines with more than one microbatch, where it"
                    " works in the background; since SMP 1.8.1 per-layer preloading makes it usable"
                    " without a pipeline too. Check that it saves memory in this job, or turn it"
                    " off."
                ),
                evidence=("pipeline_parallel_degree 1, sharded data parallelism off",),
            )

    def problems(self, view: ConfigView) -> Iterator[ConfigProblem]:
        """Offloading that does nothing (no checkpointing) is one finding: not also the hint that
        it may not save memory without a pipeline."""
        with_code = list(self.check_with_code(view))
        for problem in self.check(view):
            if not (
                with_code
                and problem.severity is Severity.HINT
                and _without_pipeline_or_sharding(view)
            ):
                yield problem
        yield from with_code

    def check_with_code(self, view: ConfigView) -> Iterator[ConfigProblem]:
        if view.value("offload_activations") is not True:
            return
        code = launched_code(self.program, view)
        if code is None or code.uses_hf_trainer or any(code.smp_calls(*CHECKPOINTING)):
            return
        yield ConfigProblem(
            view.located("offload_activations"),
            "offload_activations without activation checkpointing has no effect",
            Severity.WARNING,
            explanation=(
                f"{code.script} (and the project modules it imports) never checkpoints activations"
                " (`smp.set_activation_checkpointing`, or the library's `checkpoint` /"
                " `checkpoint_sequential`): offloading moves checkpointed activations only, so"
                " without checkpointing it has no effect. Call"
                " `smp.set_activation_checkpointing(module)` on the transformer layers after"
                " `smp.DistributedModel`, or turn offloading off."
            ),
        )


def _without_pipeline_or_sharding(view: ConfigView) -> bool:
    sdp = view.int_value("sharded_data_parallel_degree")
    return view.int_value("pipeline_parallel_degree") == 1 and sdp is not None and sdp <= 1
