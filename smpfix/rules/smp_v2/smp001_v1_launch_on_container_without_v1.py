"""SMP001: a launcher starts SMP v1 (mpirun) in a container that has no SMP v1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

from smpfix.base.findings import Severity
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView, launcher_views
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.scope import FileScope, Library
from smpfix.rules.smp_v2._mixups import (
    ScriptLibraries,
    image,
    modelparallel_enabled,
    mpirun,
    script_libraries,
    torchrun,
)
from smpfix.rules.smp_v2._v1_keys import V1_ONLY_KEYS


class V1LaunchOnContainerWithoutV1(ConfigRule):
    summary = (
        "The launcher starts SMP v1 (`mpi` with `smdistributed.modelparallel`, v1 keys, or a v1"
        " script; no `torch_distributed`) with PyTorch 2.0.1 or later or the SMP v2 image: no"
        " SMP v1 exists there, and the job fails when the script imports it."
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
        if launcher is None or not modelparallel_enabled(launcher) or torchrun(launcher):
            return
        container = image(launcher)
        if container.has_v1 is not False:
            return
        libraries = script_libraries(self.program, view)
        if libraries is not None and libraries.v2 and not libraries.v1:
            return  # the script is SMP v2's: SMP002 says how to launch it
        sign = self._v1_sign(view, libraries)
        if sign is None:
            return
        at = launcher.keyword("image_uri") if container.framework is None else None
        at = at or launcher.keyword("framework_version") or launcher.keyword("image_uri")
        if container.smp_v2:
            holds = f"the container: {container.written}, which holds SMP v2 and no SMP v1"
            why = "SMP v2 (`torch.sagemaker`) is a different library."
        else:
            holds = f"the container: {container.written}, which has no SMP v1"
            why = (
                "SMP v1 ended with 1.15.0 in the PyTorch 2.0.0 container, and SMP v2"
                " (`torch.sagemaker`) comes only in its own image, which the SageMaker SDK picks"
                " only when `torch_distributed` is beside `modelparallel`."
            )
        yield ConfigProblem(
            at or view.parameters,
            "launcher starts SMP v1 in a container without SMP v1: the script's import fails",
            Severity.ERROR,
            explanation=(
                "The job starts and fails when the script imports `smdistributed.modelparallel`:"
                f' {why} To stay on SMP v1, set `framework_version="2.0.0"` (or 1.13.1) and'
                ' `py_version="py310"`; to move to SMP v2, replace `mpi` with'
                ' `"torch_distributed": {"enabled": True}`, keep only SMP v2 keys in'
                " `parameters`, and port the script to `torch.sagemaker`."
            ),
            evidence=(f"SMP v1: {sign}, and no `torch_distributed`", holds),
        )

    @staticmethod
    def _v1_sign(view: ConfigView, libraries: Optional[ScriptLibraries]) -> Optional[str]:
        """What says the launcher means SMP v1: mpirun, a key only SMP v1 has, or the script."""
        assert view.launcher is not None
        if mpirun(view.launcher) is not None:
            return "`mpi` with `smdistributed.modelparallel`: the script runs under mpirun"
        parameters = view.parameters
        keys = (
            sorted(key for key in parameters.value if key in V1_ONLY_KEYS)
            if parameters is not None and parameters.is_dict
            else []
        )
        if keys:
            return f"`{keys[0]}` in its parameters is a setting of SMP v1 alone"
        if libraries is not None and libraries.v1:
            return f"{libraries.script} imports `smdistributed.modelparallel`"
        return None
