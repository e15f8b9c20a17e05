"""SMP810: ``SMP_NCCL_THROTTLE_LIMIT`` with a value the library cannot read, or where it does
nothing."""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.base.flavour import ONLY_PYTORCH
from smpfix.base.literals import UNKNOWN
from smpfix.job.launch_environment import integer, launch_variables
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.titles import snippet

VARIABLE = "SMP_NCCL_THROTTLE_LIMIT"


class NcclThrottleLimit(ConfigRule):
    flavours = ONLY_PYTORCH
    summary = (
        "`SMP_NCCL_THROTTLE_LIMIT` must be an integer (default 8, ≤ 0 disables throttling), and it"
        " only affects tensor parallelism."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        if view.launcher is None:
            return
        for variable in launch_variables(view.launcher):
            if variable.name != VARIABLE or variable.value is UNKNOWN:
                continue
            where = f"{VARIABLE} is set in {variable.where}"
            limit = integer(variable.value)
            if limit is None:
                yield ConfigProblem(
                    variable.at,
                    f"{VARIABLE} {snippet(repr(variable.value), 20)} is not an integer: every rank"
                    " crashes",
                    Severity.ERROR,
                    explanation=(
                        "The library reads it with `int(...)` when it initializes, so every rank"
                        " crashes at start-up, after the instances are up. Write an integer: the"
                        " default is 8, lower values save memory under tensor parallelism, -1"
                        " disables throttling."
                    ),
                    evidence=(where,),
                )
                continue
            tp = view.int_value("tensor_parallel_degree")
            if tp is not None and tp <= 1:
                located = view.located("tensor_parallel_degree")
                shown = "is not set (default 1)" if located is None else f"is {tp}"
                yield ConfigProblem(
                    variable.at,
                    f"{VARIABLE} has no effect without tensor parallelism",
                    Severity.HINT,
                    explanation=(
                        "It limits the concurrent NCCL calls of tensor parallelism. Remove it, or"
                        " check that tensor parallelism was meant to be on."
                    ),
                    evidence=(where, f"tensor_parallel_degree {shown}"),
                )
