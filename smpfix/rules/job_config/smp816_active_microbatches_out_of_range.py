"""SMP816: ``active_microbatches`` outside ``[1, microbatches]``, or set where it changes nothing.

The library bounds ``active_microbatches`` by 1 and ``microbatches`` and refuses anything else
at start-up; left out, it defaults to ``pipeline_parallel_degree + 2`` clamped into that range.
A ``"simple"`` pipeline needs every microbatch active at once, otherwise the library quietly
switches to ``"interleaved"``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

from smpfix.base.findings import Severity
from smpfix.base.flavour import ONLY_PYTORCH
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism


class ActiveMicrobatchesOutOfRange(ConfigRule):
    flavours = ONLY_PYTORCH
    summary = (
        "`active_microbatches` must be between 1 and `microbatches`; it only matters with pipeline"
        " parallelism."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        microbatches = view.int_value("microbatches")
        pp = view.int_value("pipeline_parallel_degree")
        at = view.located("active_microbatches")
        active = view.int_value("active_microbatches") if at is not None else None
        mb_shown = f"microbatches {microbatches}" + (
            "" if view.located("microbatches") is not None else " (the library default)"
        )
        if active is not None and active < 1:
            yield ConfigProblem(
                at,
                f"active_microbatches {active} is less than 1: the job fails at start-up",
                Severity.ERROR,
                explanation=(
                    "The library's lower bound is 1 and it stops at start-up (\"cannot be less than"
                    ' 1"), after the instances are up. Leave it out for the default'
                    " (pipeline_parallel_degree + 2, at most microbatches) or set a value between 1"
                    " and microbatches."
                ),
            )
        elif active is not None and microbatches is not None and active > microbatches:
            yield ConfigProblem(
                at,
                f"active_microbatches {active} exceeds microbatches {microbatches}: the job fails"
                " at start-up",
                Severity.ERROR,
                explanation=(
                    "At most every microbatch of a step can be in flight, so the library stops at"
                    ' start-up ("cannot be larger than microbatches"), after the instances are up.'
                    f" Use at most {microbatches}, or raise microbatches."
                ),
                evidence=(mb_shown,),
            )
        elif active is not None and pp == 1:
            yield ConfigProblem(
                at,
                f"active_microbatches {active} has no effect without pipeline parallelism",
                Severity.HINT,
                explanation=(
                    "It caps how many microbatches are in flight across pipeline stages, so"
                    " without pipeline parallelism it has no effect. Remove it, or set"
                    " pipeline_parallel_degree."
                ),
                evidence=("pipeline_parallel_degree is 1",),
            )
        pipeline = view.located("pipeline")
        if pipeline is None or pipeline.plain() != "simple" or microbatches is None:
            return
        if active is not None and not 1 <= active <= microbatches:
            return  # the out-of-range value is the finding; the job never gets to choose a pipeline
        effective = active if active is not None else _default_active(pp, microbatches)
        if effective is None or effective == microbatches:
            return
        how = f"active_microbatches is {effective}" + (
            "" if active is not None else " (the default, pipeline_parallel_degree + 2)"
        )
        yield ConfigProblem(
            pipeline,
            f'pipeline "simple" runs as "interleaved": active_microbatches {effective} is not'
            f" microbatches {microbatches}",
            Severity.HINT,
            explanation=(
                'A "simple" pipeline needs every microbatch active at once, so the library silently'
                ' switches to the "interleaved" pipeline ("Simple pipeline is only supported when'
                " 'active_microbatches' is equal to 'microbatches'\"). Set active_microbatches to"
                f" {microbatches}, or drop `pipeline`."
            ),
            evidence=(how, mb_shown),
        )


def _default_active(pp: Optional[int], microbatches: int) -> Optional[int]:
    """``pipeline_parallel_degree + 2`` clamped into ``[1, microbatches]``, as the library computes
    it."""
    if pp is None:
        return None
    return max(1, min(pp + 2, microbatches))
