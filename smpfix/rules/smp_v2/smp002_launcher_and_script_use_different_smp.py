"""SMP002: a launcher starts one SMP library and its script imports the other."""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView, launcher_views
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.scope import FileScope, Library
from smpfix.rules.smp_v2._mixups import (
    image,
    modelparallel_enabled,
    mpirun,
    script_libraries,
    torchrun,
)


class LauncherAndScriptUseDifferentSmp(ConfigRule):
    summary = (
        "The launcher starts SMP v2 (`torch_distributed` with `smdistributed.modelparallel`) and"
        " its script imports SMP v1 (`smdistributed.modelparallel`), or the launcher gets a"
        " container without SMP v2 and its script imports `torch.sagemaker`."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.NONE
    library = Library.EITHER
    scope = FileScope.CONFIGURATION

    def views(self) -> list[ConfigView]:
        return launcher_views(self.program)

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        return iter(())

    def check_with_code(self, view: ConfigView) -> Iterator[ConfigProblem]:
        launcher = view.launcher
        if launcher is None or not modelparallel_enabled(launcher):
            return
        libraries = script_libraries(self.program, view)
        if libraries is None or libraries.v1 == libraries.v2:
            return  # neither (SMP832's), or both (SMP004 reports the script)
        container = image(launcher)
        script = libraries.script
        if libraries.v1 and container.smp_v2 and mpirun(launcher) is None:
            started = torchrun(launcher)
            removed = (
                " SMP v2 has no TensorFlow flavour: the TensorFlow library ends with SMP v1."
                if libraries.tensorflow
                else " SMP v2 also has no pipeline parallelism, no `smp.step` and no"
                " `smp.DistributedModel`."
            )
            yield ConfigProblem(
                started or launcher.keyword("image_uri") or view.parameters,
                "launcher starts SMP v2, but its script imports SMP v1: the import fails",
                Severity.ERROR,
                explanation=(
                    "The SMP v2 image does not have SMP v1 (`smdistributed.modelparallel`), so"
                    f" the job fails at the import.{removed} Either port the script to SMP v2"
                    " (`import torch.sagemaker as tsm`, `tsm.init()`, PyTorch FSDP,"
                    " `tsm.transform` for tensor parallelism), or launch SMP v1:"
                    ' `"mpi": {"enabled": True}` instead of `torch_distributed`, with'
                    ' `framework_version="2.0.0"` or earlier.'
                ),
                evidence=(
                    f"the container: {container.written}",
                    f"{script} (with the project modules it imports) imports"
                    " `smdistributed.modelparallel`",
                ),
            )
        elif libraries.v2 and not container.smp_v2:
            yield ConfigProblem(
                launcher.keyword("distribution") or view.parameters,
                "script imports SMP v2, but this launcher gets an image without it: the import"
                " fails",
                Severity.ERROR,
                explanation=(
                    "The SageMaker SDK picks the SMP v2 image only when `torch_distributed` is"
                    " beside `smdistributed.modelparallel` in the `distribution`, so the job"
                    " fails at the import. Launch it the way SMP v2 starts:"
                    ' `"torch_distributed": {"enabled": True}` instead of `mpi`, with'
                    ' `framework_version="2.2.0"` or later and only SMP v2 keys in `parameters`.'
                ),
                evidence=(
                    f"{script} imports SMP v2 (`torch.sagemaker`)",
                    f"the container: {container.written}, which has no SMP v2",
                ),
            )
