"""SMP823: a ``placement_strategy`` the library or the SageMaker SDK refuses.

The library (1.12 schema) accepts ``cluster``, ``spread`` and the six orders of ``D``, ``P`` and
``T`` (``cluster`` is ``DPT``, ``spread`` is ``TPD``); anything else stops ``smp.init``. The
SageMaker SDK's ``validate_mp_config`` accepts only ``spread`` and ``cluster`` in a launcher,
so a documented permutation there makes submitting the job raise ``ValueError``. The
TensorFlow documentation lists only ``spread`` and ``cluster``.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import permutations

from smpfix.base.findings import Severity
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.titles import snippet

NAMED = ("cluster", "spread")
ORDERS = tuple("".join(order) for order in permutations("DPT"))


class PlacementStrategyValue(ConfigRule):
    summary = (
        "`placement_strategy` is `cluster`, `spread` or an order of D, P, T; a launcher may only"
        " say `cluster` or `spread`."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        located = view.located("placement_strategy")
        value = located.plain() if located is not None else None
        if located is None or not isinstance(value, str) or value in NAMED:
            return
        if value not in ORDERS:
            yield ConfigProblem(
                located,
                f"placement_strategy {snippet(repr(value), 24)[1:-1]} is not one the library knows:"
                " start-up fails",
                Severity.ERROR,
                explanation=(
                    'The library accepts "cluster" (the default, the same as "DPT"), "spread"'
                    ' ("TPD") or another order of D, P and T written in capitals'
                    f"{_suggestion(value)}, and stops at start-up otherwise, after the instances"
                    " are up."
                ),
            )
            return
        if view.launcher is not None:
            yield ConfigProblem(
                located,
                f"placement_strategy {value!r} in a launcher: the SDK accepts only cluster or"
                " spread",
                Severity.ERROR,
                explanation=(
                    f"{value!r} is a documented order of D, P and T, but the SageMaker SDK's"
                    ' validator accepts only "cluster" and "spread" in a launcher, so submitting'
                    ' the job raises ValueError. Use "cluster" (DPT) or "spread" (TPD); another'
                    " order can only be set in the script's `smp.init({...})` dict, which the"
                    " library reads only when the launcher's `environment` sets"
                    " `SMP_MANUAL_INIT=1` (from the 1.12 era it initializes itself on import and"
                    " ignores that dict)."
                ),
            )
        elif view.tensorflow:
            yield ConfigProblem(
                located,
                f"placement_strategy {value!r} is not documented for TensorFlow",
                Severity.WARNING,
                explanation=(
                    'The TensorFlow flavour\'s documentation lists only "cluster" and "spread";'
                    " the orders of D, P and T came with tensor parallelism (PyTorch, SMP 1.6)."
                    ' Use "cluster" or "spread".'
                ),
            )


def _suggestion(value: str) -> str:
    """``"dpt"`` -> ``"DPT"``; ``"Spread"`` -> ``"spread"``."""
    if value.upper() in ORDERS:
        return f" (did you mean {value.upper()!r}?)"
    if value.lower() in NAMED:
        return f" (did you mean {value.lower()!r}?)"
    return ""
