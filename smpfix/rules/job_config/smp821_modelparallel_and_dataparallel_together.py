"""SMP821: ``modelparallel`` and ``dataparallel`` under one ``smdistributed`` dict.

The SageMaker SDK's ``validate_smdistributed`` counts the strategies by their keys: more than
one raises ``ValueError("Cannot use more than 1 smdistributed strategy")`` when the framework
estimator is built, whatever each strategy's ``enabled`` says. Data parallelism with the model
parallelism library is the library's own ``"ddp": True``, not the separate SMDDP strategy.
"""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism


class ModelparallelAndDataparallelTogether(ConfigRule):
    summary = (
        "`smdistributed` holds one strategy: `modelparallel` and `dataparallel` together make the"
        " SDK raise ValueError."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        distribution = view.launcher.distribution if view.launcher is not None else None
        smdistributed = distribution.get("smdistributed") if distribution is not None else None
        if smdistributed is None or smdistributed.get("modelparallel") is None:
            return
        dataparallel = smdistributed.get("dataparallel")
        if dataparallel is None:
            return
        yield ConfigProblem(
            dataparallel,
            "`smdistributed` holds both `modelparallel` and `dataparallel`: the SDK raises"
            " ValueError",
            explanation=(
                "One job runs one of the two libraries, and the SageMaker SDK counts the keys"
                ' (even `"enabled": False` counts), so building the estimator raises ValueError'
                ' ("Cannot use more than 1 smdistributed strategy"). Remove `dataparallel`; to'
                ' add data parallelism to a model-parallel job, set `"ddp": True` in the'
                " modelparallel `parameters` and run more processes than pipeline × tensor"
                " degree."
            ),
            severity=Severity.ERROR,
        )
