"""SMP014: SMP activation offloading switched on for a script that never applies
``offload_wrapper``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

from smpfix.base.findings import Severity
from smpfix.program.facts import FileFacts
from smpfix.rules.config_rule import ConfigProblem, ConfigView
from smpfix.rules.launched_code import launched_code
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.smp_v2._config import V2ConfigRule

_OFFLOAD_WRAPPER = "torch.distributed.algorithms._checkpoint.checkpoint_wrapper.offload_wrapper"
# How many levels of project imports below the script are searched.
_DEPTH = 3


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
        located = view.located("sm_activation_offloading")
        if located is None or located.plain() is not True:
            return
        files = self._code(view)
        if files is None or any(_offloads(facts) for facts in files):
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

    def _code(self, view: ConfigView) -> Optional[tuple[FileFacts, ...]]:
        """The script the configuration runs and its project modules, when smpfix can read them."""
        if view.launcher is not None:
            code = launched_code(self.program, view)
            return code.files if code is not None and code.files else None
        modules = self.program.modules
        if modules is None:
            return None
        closure = modules.imported_closure(self.program.file, _DEPTH)
        return (self.program.facts, *(linked.facts for linked in closure))


def _offloads(facts: FileFacts) -> bool:
    """The file applies ``offload_wrapper``, or an offloading call of ``torch.sagemaker``."""
    for call in facts.call_order:
        name = facts.qualified_name(call.func) or ""
        if name == _OFFLOAD_WRAPPER or (
            name.startswith("torch.sagemaker.") and "offload" in name.lower()
        ):
            return True
    return False
