"""SMP804: the sharded data parallel degree must divide the data-parallel degree."""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.base.flavour import ONLY_PYTORCH
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism


class SdpDegreeDoesNotDivideDp(ConfigRule):
    flavours = ONLY_PYTORCH
    summary = (
        "`sharded_data_parallel_degree` must be between 1 and the data-parallel degree and divide"
        " it evenly."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        sdp = view.int_value("sharded_data_parallel_degree")
        if sdp is None or sdp == 1:
            return
        at = view.located("sharded_data_parallel_degree")
        if sdp < 1:
            yield ConfigProblem(
                at,
                f"sharded_data_parallel_degree {sdp} is not a degree: it must be 1 or more",
                Severity.ERROR,
                explanation=(
                    "The degree must be between 1 (sharding off) and the data-parallel degree. Use"
                    " 1 to turn sharded data parallelism off, or a divisor of the data-parallel"
                    " degree."
                ),
            )
            return
        world = view.world
        pp, tp = (
            view.int_value("pipeline_parallel_degree"),
            view.int_value("tensor_parallel_degree"),
        )
        if world is None or pp is None or tp is None or pp < 1 or tp < 1 or world % (pp * tp):
            return  # unknown, or SMP801's mistake
        per_host, count = view.launch("processes_per_host"), view.launch("instance_count")
        layout = (
            f"{world} processes = {per_host} per host × {count} instance{'s' if count != 1 else ''}"
        )
        divided = "".join(
            f" / {name} {value}"
            for name, value in (("tensor_parallel_degree", tp), ("pipeline_parallel_degree", pp))
            if value > 1
        )
        if tp > 1:
            degree, named = world // (pp * tp), "reduced data-parallel degree"
            why = (
                "With tensor parallelism each sharding group lives inside a reduced data-parallel"
                " group"
            )
        else:
            degree, named = world // pp, "data-parallel degree"
            why = (
                "The training state is sharded over groups of that many data-parallel ranks, which"
                " must tile them exactly"
            )
        evidence = [f"{named} {degree} = {world} processes{divided}"] if divided else []
        evidence.append(layout)
        if sdp > degree:
            wrong = "exceeds"
        elif degree % sdp:
            wrong = "does not divide"
            evidence.append(f"{degree} % {sdp} = {degree % sdp}")
        else:
            return
        yield ConfigProblem(
            at,
            f"sharded_data_parallel_degree {sdp} {wrong} the {named} {degree}",
            Severity.ERROR,
            explanation=(
                f"{why}, so the library cannot form the sharding groups and the job fails at"
                f" start-up after the instances are up. Choose one of {_divisors(degree)}, or"
                " change the instance count so that the degree divides."
            ),
            evidence=tuple(evidence),
        )


def _divisors(degree: int) -> str:
    """``2, 4 or 8`` for 8: the degrees that would work (1 turns sharding off)."""
    found = [str(d) for d in range(2, degree + 1) if degree % d == 0]
    if not found:
        return "1 (there is only one data-parallel rank, so there is nothing to shard over)"
    if len(found) > 12:
        found = [*found[:11], "…", found[-1]]
    return found[0] if len(found) == 1 else f"{', '.join(found[:-1])} or {found[-1]}"
