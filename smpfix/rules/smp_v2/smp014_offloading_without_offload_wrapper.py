"""SMP014: SMP activation offloading switched on for a script that never applies
``offload_wrapper``."""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.rules.config_rule import ConfigProblem, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.smp_v2._config import V2ConfigRule
from smpfix.rules.smp_v2._offloading import offloading_code, offloads


class OffloadingWithoutOffloadWrapper(V2ConfigRule):
    summary = (
        "`sm_activation_offloading` is set to True, but the script (and the project modules it"
        " imports) never applies PyTorch's `offload_wrapper`: no activation is offloaded."
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
        if any(offloads(facts) for facts in files):
            return
        yield ConfigProblem(
            located,
            "SMP activation offloading is on, but the script never applies `offload_wrapper`",
            Severity.WARNING,
            explanation=(
                "SMP v2 offloads the activations of a model wrapped with PyTorch's"
                " `offload_wrapper` only, so nothing is offloaded and the job needs the GPU"
                " memory it was meant to save. Apply it after the FSDP wrap and activation"
                " checkpointing: `from torch.distributed.algorithms._checkpoint.checkpoint_wrapper"
                " import offload_wrapper`, `model = offload_wrapper(model)`; or set"
                " `sm_activation_offloading` to False."
            ),
            evidence=(
                f"{view.where} sets `sm_activation_offloading` to True",
                "no `offload_wrapper` in the script it runs or the project modules it imports",
            ),
        )
