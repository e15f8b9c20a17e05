"""SMP819: manual partitioning needs ``default_partition``, and it must name a pipeline stage.

With ``"auto_partition": False`` every module not placed with ``smp.partition(i)`` goes to
``default_partition``; the library has no default for it (the docs' table says 0, the 1.12
schema says None) and refuses to start without one. It must also lie in
``[0, pipeline_parallel_degree - 1]``.
"""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.config_entries import value_in_entry
from smpfix.config_rule import ConfigFix, ConfigProblem, ConfigRule, ConfigView
from smpfix.findings import Applicability, Severity
from smpfix.literals import UNKNOWN
from smpfix.rule import FixAvailability


class ManualPartitionWithoutDefaultPartition(ConfigRule):
    code = "SMP819"
    name = "manual-partition-without-default-partition"
    summary = "`\"auto_partition\": False` requires `default_partition`, which must be below `pipeline_parallel_degree`."
    fix_availability = FixAvailability.SAFE

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
    message = (
        f"`auto_partition` is False but `default_partition` is {'None' if written is not None else 'not set'}: with "
        "manual partitioning, every module not placed with `smp.partition(i)` goes to the default partition, and the "
        "library refuses to start without one (\"requires default_partition to not be None\"), after the instances "
        "are up. Add `\"default_partition\": 0` (the first pipeline stage, the value the documentation lists)."
    )
    if written is not None:
        target = value_in_entry(written)
        fix = ConfigFix(Applicability.SAFE, "Set `default_partition` to 0", replace=((target, "0"),)) if target is not None else None
        yield ConfigProblem(written, message, Severity.ERROR, fix)
        return
    fix = ConfigFix(Applicability.SAFE, 'Add `"default_partition": 0`', add=((view.parameters.display, '"default_partition": 0'),))
    yield ConfigProblem(auto, message, Severity.ERROR, fix)


def _out_of_range(view: ConfigView) -> Iterator[ConfigProblem]:
    at = view.located("default_partition")
    default = view.int_value("default_partition") if at is not None else None
    if default is None:
        return
    pp = view.int_value("pipeline_parallel_degree")
    pp_value = view.value("pipeline_parallel_degree")
    if default < 0:
        bound = "0"
    elif pp is not None and pp >= 1 and default >= pp and pp_value is not UNKNOWN:
        bound = f"pipeline_parallel_degree - 1 = {pp - 1}"
    else:
        return
    shown = f"pipeline_parallel_degree {pp}" + ("" if view.located("pipeline_parallel_degree") is not None else " (the library default)")
    yield ConfigProblem(
        at,
        f"default_partition {default} is outside the pipeline stages 0..{(pp or 1) - 1} of {shown}: the library "
        f"requires it to be between 0 and pipeline_parallel_degree - 1 and stops at start-up (bound {bound}), after "
        "the instances are up. Use a stage index below pipeline_parallel_degree, usually 0.",
        Severity.ERROR,
    )
