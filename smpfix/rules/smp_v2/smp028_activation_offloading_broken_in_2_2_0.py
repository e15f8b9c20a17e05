"""SMP028: SMP activation offloading switched on for a job that runs SMP 2.2.0, where it does
not work."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar, Optional

from smpfix.base.findings import Severity
from smpfix.job.versions import Version
from smpfix.rules.config_rule import ConfigProblem, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.smp_v2._config import V2ConfigRule

# The release whose activation offloading the developer guide says does not work.
BROKEN_OFFLOADING: Version = (2, 2, 0)


class ActivationOffloadingBrokenIn220(V2ConfigRule):
    summary = (
        "`sm_activation_offloading` is set to True for a job that runs SMP 2.2.0, whose"
        " activation offloading does not work: use PyTorch's native offloading there."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.NONE
    since: ClassVar[Optional[Version]] = BROKEN_OFFLOADING
    until: ClassVar[Optional[Version]] = BROKEN_OFFLOADING

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        located = view.located("sm_activation_offloading")
        if located is None or located.plain() is not True:
            return
        yield ConfigProblem(
            located,
            "SMP activation offloading does not work in SMP 2.2.0: use PyTorch's native offloading",
            Severity.ERROR,
            explanation=(
                "The developer guide says the SMP library's activation offloading does not work in"
                " SMP 2.2.0 and to use PyTorch's native activation offloading instead. Set"
                " `sm_activation_offloading` to False and keep `offload_wrapper(model)` in the"
                " script (PyTorch's own offloading), or run a container with a later SMP v2"
                " release."
            ),
            evidence=(
                f"{view.where} sets `sm_activation_offloading` to True",
                view.version_condition(BROKEN_OFFLOADING, BROKEN_OFFLOADING),
            ),
        )
