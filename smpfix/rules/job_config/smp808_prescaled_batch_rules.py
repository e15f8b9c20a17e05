"""SMP808: ``prescaled_batch`` set inconsistently with tensor and pipeline parallelism or
``optimize``."""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.base.flavour import ONLY_PYTORCH
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism


class PrescaledBatchRules(ConfigRule):
    flavours = ONLY_PYTORCH
    summary = (
        '`prescaled_batch` requires `optimize: "speed"`, has no effect without tensor parallelism,'
        " and is recommended when tensor and pipeline parallelism are combined."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        prescaled = view.value("prescaled_batch")
        tp, pp = (
            view.int_value("tensor_parallel_degree"),
            view.int_value("pipeline_parallel_degree"),
        )
        if prescaled is True:
            optimize = view.located("optimize")
            if optimize is not None and optimize.plain() == "memory":
                yield ConfigProblem(
                    optimize,
                    'optimize "memory" with prescaled_batch True: the job fails at start-up',
                    Severity.ERROR,
                    explanation=(
                        'The library accepts prescaled_batch only with optimize "speed" and stops'
                        ' at start-up, after the instances are up. Set `"optimize": "speed"`'
                        " (the library's default) or turn prescaled_batch off."
                    ),
                )
            if tp == 1:
                located = view.located("tensor_parallel_degree")
                shown = "is not set (default 1)" if located is None else "is 1"
                yield ConfigProblem(
                    view.located("prescaled_batch"),
                    "prescaled_batch True has no effect without tensor parallelism",
                    Severity.HINT,
                    explanation=(
                        "prescaled_batch only tells the library that the ranks of a tensor-parallel"
                        " group read the same batch, so without tensor parallelism it has no"
                        " effect. Remove it, or check that tensor parallelism was meant to be on."
                    ),
                    evidence=(f"tensor_parallel_degree {shown}",),
                )
            return
        if prescaled is False and tp is not None and pp is not None and tp > 1 and pp > 1:
            located = view.located("prescaled_batch")
            yield ConfigProblem(
                located or view.located("tensor_parallel_degree"),
                f"tensor_parallel_degree {tp} with pipeline_parallel_degree {pp}: prescaled_batch"
                " is recommended",
                Severity.HINT,
                explanation=(
                    "With both, prescaled_batch is recommended, so that each tensor-parallel group"
                    " reads one combined batch (tp × the per-rank batch) and the per-pipeline batch"
                    " can grow for efficient pipelining without running out of memory. Set"
                    ' `"prescaled_batch": True` and shard the data by `smp.rdp_rank()` /'
                    " `smp.rdp_size()`."
                ),
                evidence=(
                    "prescaled_batch"
                    f" {'False' if located is not None else 'not set (default False)'}",
                ),
            )
