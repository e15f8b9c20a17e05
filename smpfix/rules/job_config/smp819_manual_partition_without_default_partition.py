"""SMP819: manual partitioning needs ``default_partition``, and it must name a pipeline stage.

With ``"auto_partition": False`` every module not placed with ``smp.partition(i)`` goes to
``default_partition``; the library has no default for it (the docs' table says 0, the 1.12
schema says None) and refuses to start without one. It must also lie in
``[0, pipeline_parallel_degree - 1]``.
"""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Applicability, Severity
from smpfix.job.config_entries import value_in_entry
from smpfix.rules.config_rule import ConfigFix, ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism


class ManualPartitionWithoutDefaultPartition(ConfigRule):
    summary = (
        '`"auto_partition": False` requires `default_partition`, which must be below'
        " `pipeline_parallel_degree`."
    )
    fix_availability = FixAvailability.SAFE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        yield from _missing_default(view)
        yield from _out_of_range(view)


def _missing_default(view: ConfigView) -> Iterator[ConfigProblem]:
    auto = view.located("auto_partition")
    if auto is None or auto.plain() is not False or view.parameters is None:
        return
    default = view.value("default_partition")
    if default is not None:
        return
    written = view.located("default_partition")
    refused = (
        'the SageMaker SDK refuses it when the job is submitted ("default_partition must be'
        ' supplied if auto_partition is set to False!") and the library at start-up'
        if view.launcher is not None
        else "the library refuses to start without one, after the instances are up"
    )
    title = (
        "`auto_partition` is False but `default_partition` is"
        f" {'None' if written is not None else 'not set'}: "
        + ("the SDK refuses the job" if view.launcher is not None else "start-up fails")
    )
    explanation = (
        "With manual partitioning, every module not placed with `smp.partition(i)` goes to the"
        f" default partition, and {refused}. Add {_entry(view)} (the first pipeline stage, the"
        " value the documentation lists)." + _partitions_note(view)
    )
    if written is not None:
        target = value_in_entry(written)
        fix = (
            ConfigFix(Applicability.SAFE, "Set `default_partition` to 0", replace=((target, "0"),))
            if target is not None
            else None
        )
        yield ConfigProblem(written, title, Severity.ERROR, fix, explanation=explanation)
        return
    fix = ConfigFix(
        Applicability.SAFE,
        'Add `"default_partition": 0`',
        add=((view.parameters.display, '"default_partition": 0'),),
    )
    yield ConfigProblem(auto, title, Severity.ERROR, fix, explanation=explanation)


def _entry(view: ConfigView) -> str:
    return "`default_partition = 0`" if view.kind == "job table" else '`"default_partition": 0`'


def _partitions_note(view: ConfigView) -> str:
    """The SDK reads the degree as ``partitions`` once ``default_partition`` is set (SMP820)."""
    parameters = view.parameters
    if view.launcher is None or parameters is None or parameters.get("partitions") is not None:
        return ""
    if parameters.get("pipeline_parallel_degree") is None:
        return ""
    return " The SDK then also needs the degree under the key `partitions` (SMP820)."


def _out_of_range(view: ConfigView) -> Iterator[ConfigProblem]:
    at = view.located("default_partition")
    default = view.int_value("default_partition") if at is not None else None
    if default is None:
        return
    pp = view.int_value("pipeline_parallel_degree")
    if default >= 0 and (pp is None or pp < 1 or default < pp):
        return
    stated = view.located("pipeline_parallel_degree") is not None
    stages = (
        f"the {pp} pipeline stage{'s' if pp != 1 else ''} (0..{pp - 1}) of pipeline_parallel_degree"
        f" {pp}" + ("" if stated else ", the library default")
        if pp is not None and pp >= 1
        else "the pipeline stages"
    )
    sdk = (
        ' (the SageMaker SDK already refuses it when the job is submitted: "default_partition must'
        ' be less than the number of partitions!")'
        if view.launcher is not None
        else ", after the instances are up"
    )
    yield ConfigProblem(
        at,
        f"default_partition {default} is not a pipeline stage: "
        + ("the SDK refuses the job" if view.launcher is not None else "start-up fails"),
        Severity.ERROR,
        explanation=(
            f"default_partition {default} is not one of {stages}: the library requires 0 <="
            f" default_partition <= pipeline_parallel_degree - 1 and stops at start-up{sdk}. Use"
            " a stage index, usually 0."
        ),
    )
