"""SMP801: the parallel degrees must divide the number of processes."""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism


class ParallelDegreesDoNotDivideWorld(ConfigRule):
    summary = (
        "`pipeline_parallel_degree` (TensorFlow: `partitions`) × `tensor_parallel_degree` must"
        " divide processes_per_host × instance_count."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        world = view.world
        pp, tp = (
            view.int_value("pipeline_parallel_degree"),
            view.int_value("tensor_parallel_degree"),
        )
        if world is None or pp is None or tp is None or pp < 1 or tp < 1:
            return
        if world % (pp * tp) == 0:
            return
        per_host, count = view.launch("processes_per_host"), view.launch("instance_count")
        at = (
            view.located("tensor_parallel_degree")
            if tp > 1
            else view.located("pipeline_parallel_degree")
        )
        arithmetic = (
            f"{world} processes = {per_host} per host × {count} instances;"
            f" {world} % {pp * tp} = {world % (pp * tp)}"
        )
        if view.tensorflow:
            yield ConfigProblem(
                at or view.parameters,
                f"partitions {pp} does not divide the {world} processes: the job fails at start-up",
                Severity.ERROR,
                explanation=(
                    f"Every model replica needs {pp} whole processes (the number of replicas is the"
                    " processes divided by the partitions), so the library cannot lay out the ranks"
                    " and the job fails at start-up after the instances are up. Choose a number of"
                    f" partitions that divides {world}."
                ),
                evidence=(arithmetic,),
            )
            return
        yield ConfigProblem(
            at or view.parameters,
            f"pipeline × tensor degree {pp} × {tp} does not divide the {world} processes: the job"
            " fails at start-up",
            Severity.ERROR,
            explanation=(
                "Every model replica needs pipeline_parallel_degree × tensor_parallel_degree whole"
                " processes, so the library cannot lay out the ranks and the job fails at start-up"
                f" after the instances are up. Choose degrees whose product divides {world}."
            ),
            evidence=(
                f"pipeline_parallel_degree {pp} × tensor_parallel_degree {tp} = {pp * tp}",
                arithmetic,
            ),
        )
