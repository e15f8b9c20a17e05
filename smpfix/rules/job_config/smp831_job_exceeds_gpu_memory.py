"""SMP831: by the memory plan's estimate, the job does not fit in GPU memory."""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.plan.results import MemoryPlan
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism


class JobExceedsGpuMemory(ConfigRule):
    summary = (
        "By the per-GPU memory estimate (`smpfix plan`), this launcher's job does not fit in the"
        " GPU memory of its instance type."
    )
    fix_availability = FixAvailability.NONE
    default_severity = Severity.WARNING
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        return iter(())

    def check_with_code(self, view: ConfigView) -> Iterator[ConfigProblem]:
        if view.kind != "launcher" or view.launcher is None or view.launcher.modelparallel is None:
            return
        from smpfix.plan.planner import declared_by, launcher_inputs, plan

        found = plan(
            launcher_inputs(
                view.launcher,
                self.program.path,
                None,
                declared_by(self.program.job),
                self.program.modules,
                self.program.file,
            )
        )
        if found.fits is False:
            yield ConfigProblem(
                None,
                title(found),
                Severity.WARNING,
                explanation=explanation(found),
                evidence=evidence(found),
            )


def title(found: MemoryPlan) -> str:
    """``job needs about 96.0 GiB per GPU, over the 80 GiB of ml.p4d.24xlarge (estimate)``."""
    split = found.per_gpu
    assert split is not None
    amount = "at least" if split.activations is None else "about"
    return (
        f"job needs {amount} {split.total:.1f} GiB per GPU, over the"
        f" {found.gpu_memory_gib:.0f} GiB of {found.instance_type} (estimate)"
    )


def explanation(found: MemoryPlan) -> str:
    return (
        "By smpfix's estimate this job does not fit in GPU memory: it would stop with CUDA out of"
        f" memory in its first steps, after every instance has started. {_first_fix(found)}It is"
        " an estimate: `smpfix plan` shows the assumptions behind it."
    )


def evidence(found: MemoryPlan) -> tuple[str, ...]:
    """The memory arithmetic, one line each."""
    split = found.per_gpu
    assert split is not None and found.gpu_memory_gib is not None
    count = (
        f"{found.parameters / 1e9:.1f}B"
        if found.parameters is not None and found.parameters >= 1e8
        else f"{found.parameters:,}"
    )
    if split.activations is None:
        parts = (
            f"model states {split.model_states:.1f} + other {split.other:.1f}"
            f" = at least {split.total:.1f} GiB per GPU before any activation"
        )
    else:
        parts = (
            f"model states {split.model_states:.1f} + activations {split.activations:.1f}"
            f" + other {split.other:.1f} = about {split.total:.1f} GiB per GPU"
        )
    return (
        f"model: {count} parameters, from {found.parameters_source}",
        parts,
        f"GPU: {found.gpu_memory_gib:.0f} GiB on {found.instance_type} ({found.gpu})",
    )


def _first_fix(found: MemoryPlan) -> str:
    if not found.suggestions:
        return (
            "No configuration smpfix tries fits on this cluster; use more instances or a smaller"
            " model. "
        )
    change = found.suggestions[0]
    if change.per_gpu.activations is None:
        return (
            f"First change that brings the model states under the GPU: {change.change} (at least"
            f" {change.per_gpu.total:.1f} GiB per GPU before activations). "
        )
    return (
        f"First change that fits, in the best-practices order: {change.change} (about"
        f" {change.per_gpu.total:.1f} GiB per GPU). "
    )
