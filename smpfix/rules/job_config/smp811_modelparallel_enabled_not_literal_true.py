"""SMP811: ``modelparallel.enabled`` that is not the literal ``True`` silently drops the
parameters."""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Applicability, Severity
from smpfix.job.config_keys import MODELPARALLEL_KEYS, misspelling_of
from smpfix.rules.config_rule import ConfigFix, ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.titles import snippet


class ModelparallelEnabledNotLiteralTrue(ConfigRule):
    summary = (
        "The SageMaker SDK passes the modelparallel parameters on only when `enabled` is the"
        " literal `True`."
    )
    fix_availability = FixAvailability.SAFE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        if view.launcher is None:
            return
        mp = view.launcher.modelparallel
        if mp is None or not mp.is_dict:
            return
        enabled = mp.get("enabled")
        has_parameters = mp.get("parameters") is not None
        if enabled is None:
            # `"enable": True` is SMP812's finding, renamed by its fix: one mistake, one finding.
            if has_parameters and misspelling_of(mp.value, "enabled", MODELPARALLEL_KEYS) is None:
                yield ConfigProblem(
                    mp.display,
                    'the `modelparallel` dict has no `"enabled": True`: its parameters are dropped',
                    Severity.ERROR,
                    ConfigFix(
                        Applicability.SAFE, 'Add `"enabled": True`', add=((mp, '"enabled": True'),)
                    ),
                    explanation=(
                        "The SageMaker SDK only passes the `parameters` on when `enabled` is the"
                        " literal `True`, so the job starts with none of them (no tensor or"
                        " pipeline parallelism, default microbatches) and nothing reports it. Add"
                        ' `"enabled": True`.'
                    ),
                )
            return
        value = enabled.plain()
        if value is True or value is False:
            return
        shown = repr(value) if value is not None else "None"
        unknown = type(value).__name__ == "_Unknown"
        if unknown:
            yield ConfigProblem(
                enabled,
                "`modelparallel.enabled` is not a literal: unless it is `True`, parameters are"
                " dropped",
                Severity.WARNING,
                explanation=(
                    "The SageMaker SDK passes the `parameters` on only when it is exactly `True`"
                    " (`is True`), so anything else (a string, 1, a variable holding one) silently"
                    " drops every model-parallel setting. Write `True`."
                ),
            )
            return
        yield ConfigProblem(
            enabled,
            f"`modelparallel.enabled` is {snippet(shown, 25)}, not `True`: every parameter is"
            " dropped",
            Severity.ERROR,
            (
                ConfigFix(Applicability.SAFE, "Write `True`", replace=((enabled, "True"),))
                if enabled.node is not None
                else None
            ),
            explanation=(
                "The SageMaker SDK checks `enabled is True`, so it silently drops every parameter"
                " and the job runs without model parallelism. Write `True`."
            ),
        )
