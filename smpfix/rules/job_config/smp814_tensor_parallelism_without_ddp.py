"""SMP814: tensor parallelism requires ``"ddp": True``."""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Applicability, Severity
from smpfix.base.flavour import ONLY_PYTORCH
from smpfix.rules.config_rule import ConfigFix, ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism


class TensorParallelismWithoutDdp(ConfigRule):
    flavours = ONLY_PYTORCH
    summary = (
        '`tensor_parallel_degree` > 1 requires `"ddp": True`; the library refuses to start'
        " otherwise."
    )
    fix_availability = FixAvailability.SAFE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        tp = view.int_value("tensor_parallel_degree")
        if tp is None or tp <= 1:
            return
        ddp = view.located("ddp")
        value = view.value("ddp")
        if value is True or type(value).__name__ == "_Unknown":
            return
        message = f'tensor_parallel_degree {tp} without `"ddp": True`: the job fails at start-up'
        explanation = (
            'The library requires `"ddp": True` with tensor parallelism and stops at start-up'
            ' ("requires ddp to be set to True"), after the instances are up. Set `"ddp": True`.'
        )
        evidence = (f"`ddp` is {'not set' if ddp is None else repr(value)}",)
        if ddp is not None:
            fix = ConfigFix(Applicability.SAFE, 'Set `"ddp": True`', replace=((ddp, "True"),))
            yield ConfigProblem(
                ddp, message, Severity.ERROR, fix, explanation=explanation, evidence=evidence
            )
        elif view.parameters is not None:
            fix = ConfigFix(
                Applicability.SAFE, 'Add `"ddp": True`', add=((view.parameters, '"ddp": True'),)
            )
            yield ConfigProblem(
                view.located("tensor_parallel_degree"),
                message,
                Severity.ERROR,
                fix,
                explanation=explanation,
                evidence=evidence,
            )
