"""SMP027: SMP activation offloading switched on for a script that applies ``offload_wrapper``
but never checkpoints activations."""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.rules.config_rule import ConfigProblem, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.smp_v2._config import V2ConfigRule
from smpfix.rules.smp_v2._offloading import checkpoints, offloading_code, offloads


class OffloadingWithoutActivationCheckpointing(V2ConfigRule):
    summary = (
        "`sm_activation_offloading` is set to True and the script applies `offload_wrapper`, but"
        " neither it nor the project modules it imports checkpoints activations: SMP v2's"
        " offloading applies only together with activation checkpointing."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.NONE
    default_severity = Severity.WARNING

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        return iter(())

    def check_with_code(self, view: ConfigView) -> Iterator[ConfigProblem]:
        found = offloading_code(self.program, view)
        if found is None:
            return
        located, files = found
        if any(facts.uses_hf_trainer for facts in files):
            return
        if not any(offloads(facts) for facts in files):
            return  # SMP014 says what is missing first
        if any(checkpoints(facts) for facts in files):
            return
        yield ConfigProblem(
            located,
            "SMP activation offloading is on, but the script never checkpoints activations",
            Severity.WARNING,
            explanation=(
                "The SMP v2 documentation says activation offloading is applicable only together"
                " with activation checkpointing: with no layer checkpointed the job does not get"
                " the GPU memory saving the configuration was written for. Checkpoint the"
                " transformer layers after the FSDP wrap and before `offload_wrapper`:"
                " `apply_activation_checkpointing(model, check_fn=...)` from"
                " `torch.distributed.algorithms._checkpoint.checkpoint_wrapper`; or set"
                " `sm_activation_offloading` to False."
            ),
            evidence=(
                f"{view.where} sets `sm_activation_offloading` to True",
                "the script applies `offload_wrapper`",
                "no `apply_activation_checkpointing`, `checkpoint_wrapper`,"
                " `torch.utils.checkpoint` or `gradient_checkpointing_enable` in the script it"
                " runs or the project modules it imports",
            ),
        )
