"""SMP818: ``processes_per_host`` should equal the GPUs of the instance type.

More processes than GPUs put two ranks on one GPU; fewer leave GPUs idle, and in multi-node
jobs the documentation reports network-timeout crashes when not all GPUs are used.
"""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Applicability, Severity
from smpfix.job.config_entries import value_in_entry
from smpfix.rules.config_rule import ConfigFix, ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism


class ProcessesPerHostVsGpus(ConfigRule):
    summary = (
        "`mpi.processes_per_host` must not exceed the instance's GPUs, and should equal them on"
        " multi-node jobs."
    )
    fix_availability = FixAvailability.UNSAFE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        launcher = view.launcher
        mpi = launcher.mpi if launcher is not None else None
        at = mpi.get("processes_per_host") if mpi is not None else None
        instance = view.instance
        if at is None or instance is None:
            return
        per_host = at.plain()
        if not isinstance(per_host, int) or isinstance(per_host, bool) or per_host < 1:
            return
        count = view.launch("instance_count")
        gpus, name = instance.gpus, instance.name
        target = value_in_entry(at)
        fix = (
            ConfigFix(
                Applicability.UNSAFE,
                f"Set processes_per_host to {gpus}",
                replace=((target, str(gpus)),),
            )
            if target is not None
            else None
        )
        if per_host > gpus:
            yield ConfigProblem(
                at,
                f"processes_per_host {per_host} exceeds the {gpus} GPUs of one {name}: start-up"
                " fails",
                Severity.ERROR,
                fix,
                explanation=(
                    "Each rank needs a GPU of its own (`smp.init` sets the device to"
                    f" `smp.local_rank()`), so ranks {gpus} and up find no GPU and the job fails"
                    f" at start-up, after the instances are up. Use {gpus}."
                ),
            )
        elif (
            per_host < gpus and isinstance(count, int) and not isinstance(count, bool) and count > 1
        ):
            yield ConfigProblem(
                at,
                f"processes_per_host {per_host} leaves {gpus - per_host} of {gpus} GPUs idle per"
                f" {name} on {count} instances",
                Severity.WARNING,
                fix,
                explanation=(
                    "The documentation reports that multi-node jobs which do not use all GPUs can"
                    " crash with a network timeout, and the idle GPUs are paid for anyway. Use"
                    f" {gpus}, and check that the parallel degrees still divide the new number of"
                    " processes."
                ),
                evidence=(
                    f"{per_host} processes per instance on a {name} with {gpus} GPUs,"
                    f" instance_count {count}",
                ),
            )
