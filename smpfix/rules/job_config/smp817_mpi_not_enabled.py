"""SMP817: model parallelism is enabled but the launcher does not enable MPI with processes per
host.

SMP v1 runs on MPI: the SageMaker SDK starts the script through ``mpirun`` only when
``distribution["mpi"]["enabled"]`` is set, and the documentation marks both ``enabled`` and
``processes_per_host`` as required. ``torch_distributed`` launches start SMP v2, to which no v1
rule applies (``smpfix.job.smp_v2``; the configuration rules never see them).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

from smpfix.base.findings import Applicability, Severity
from smpfix.base.literals import UNKNOWN
from smpfix.job.config_keys import MPI_KEYS, misspelling_of
from smpfix.job.launcher import Located
from smpfix.rules.config_rule import ConfigFix, ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.titles import snippet


class MpiNotEnabled(ConfigRule):
    summary = (
        'A modelparallel launch needs `"mpi": {"enabled": True, "processes_per_host": <GPUs per'
        " instance>}`."
    )
    fix_availability = FixAvailability.UNSAFE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        launcher = view.launcher
        if launcher is None:
            return
        mp, distribution = launcher.modelparallel, launcher.distribution
        enabled = mp.get("enabled") if mp is not None else None
        if (
            enabled is None
            or enabled.plain() is not True
            or distribution is None
            or not distribution.is_dict
        ):
            return
        instance = view.instance
        per_host = f'"processes_per_host": {instance.gpus}' if instance is not None else None
        gpus = (
            f" ({instance.gpus}, the GPUs of one {instance.name})" if instance is not None else ""
        )
        mpi = distribution.get("mpi")
        if mpi is None:
            fix = (
                ConfigFix(
                    Applicability.UNSAFE,
                    'Add `"mpi": {"enabled": True, ...}`',
                    add=((distribution.display, f'"mpi": {{"enabled": True, {per_host}}}'),),
                )
                if per_host is not None
                else None
            )
            yield ConfigProblem(
                distribution.display,
                "`distribution` has no `mpi` entry: the script starts without MPI",
                Severity.ERROR,
                fix,
                explanation=(
                    "Model parallelism is enabled, and the library runs on MPI: the SageMaker SDK"
                    " starts the script through mpirun only when"
                    ' `"mpi": {"enabled": True, ...}` is given, so the script starts without MPI'
                    " and fails when the library initializes, after the instances are up. Add"
                    ' `"mpi": {"enabled": True, "processes_per_host": <GPUs per instance>}`'
                    f"{gpus}."
                ),
            )
            return
        if not mpi.is_dict:
            return
        yield from _check_mpi(mpi, per_host, gpus)


def _check_mpi(mpi: Located, per_host: Optional[str], gpus: str) -> Iterator[ConfigProblem]:
    enabled = mpi.get("enabled")
    value = enabled.plain() if enabled is not None else None
    # A key written but misspelled (`enable`, `process_per_host`) is SMP812's finding, with the
    # rename as its fix: one mistake, one finding.
    not_enabled = (enabled is None and misspelling_of(mpi.value, "enabled", MPI_KEYS) is None) or (
        enabled is not None and value is not UNKNOWN and value is not True
    )
    missing_per_host = (
        mpi.get("processes_per_host") is None
        and misspelling_of(mpi.value, "processes_per_host", MPI_KEYS) is None
    )
    if not not_enabled and not missing_per_host:
        return
    problems, why, remedy, actions = [], [], [], []
    replace: list[tuple[Located, str]] = []
    add: list[str] = []
    if not_enabled:
        problems.append(
            'has no `"enabled": True`'
            if enabled is None
            else f'has `"enabled": {snippet(repr(value), 20)[1:-1]}`, not True'
        )
        why.append(
            "the SageMaker SDK starts the script through mpirun only when `enabled` is set, and the"
            " library runs on MPI, so without it the job fails when the library initializes, after"
            " the instances are up"
        )
        remedy.append('`"enabled": True`')
        if enabled is None:
            add.append('"enabled": True')
            actions.append('add `"enabled": True`')
        elif enabled.node is not None:
            replace.append((enabled, "True"))
            actions.append('set `"enabled": True`')
    if missing_per_host:
        problems.append("has no `processes_per_host`")
        why.append(
            "the documentation marks `processes_per_host` as required: it is how many ranks start"
            " on each instance, and without it the number depends on the training toolkit's version"
            " (one per GPU in recent ones, a single process in older ones), so the parallel degrees"
            " may not match the ranks that start"
        )
        remedy.append(f'`"processes_per_host"` set to the GPUs per instance{gpus}')
        if per_host is not None:
            add.append(per_host)
            actions.append(f"add `{per_host}`")
    # False, 0, None or a missing `enabled` certainly start no mpirun; a truthy non-True value
    # (1, "true") may still work, and so may a missing processes_per_host with a recent toolkit.
    certain = not_enabled and not value
    fix = (
        ConfigFix(
            Applicability.UNSAFE,
            _sentence(", ".join(actions)),
            replace=tuple(replace),
            add=((mpi.display, ", ".join(add)),) if add else (),
        )
        if replace or add
        else None
    )
    yield ConfigProblem(
        enabled if replace else mpi.display,
        f"`mpi` {' and '.join(problems)}"
        + (": the script starts without mpirun" if certain else ""),
        Severity.ERROR if certain else Severity.WARNING,
        fix,
        explanation=(
            f"Model parallelism is enabled, but {'; and '.join(why)}. Write {' and '.join(remedy)}."
        ),
    )


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]
