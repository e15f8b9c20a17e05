"""SMP829: ``"smdistributed": {"enabled": True, "parameters": {...}}`` without the ``modelparallel``
level.

The developer guide's bring-your-own-container sample writes the options one level too high.
The SageMaker SDK reads ``distribution["smdistributed"]["modelparallel"]``; a framework
estimator (PyTorch, TensorFlow, Hugging Face) checks the strategy names when it is built and
raises ``ValueError("Invalid smdistributed strategy provided: enabled")``; an estimator that
skips that check finds no ``modelparallel`` dict and starts the job without the library.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

import libcst as cst

from smpfix.base.findings import Applicability, Severity
from smpfix.job.launcher import Located
from smpfix.rules.config_rule import ConfigFix, ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism

# Keys of the ``modelparallel`` dict; written directly under ``smdistributed`` they lack a level.
_LEVEL_KEYS = ("enabled", "parameters")
_FRAMEWORKS = ("PyTorch", "TensorFlow", "HuggingFace")


class SmdistributedMissingModelparallelLevel(ConfigRule):
    summary = (
        '`enabled`/`parameters` belong in `smdistributed["modelparallel"]`, not directly under'
        " `smdistributed`."
    )
    fix_availability = FixAvailability.SAFE
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        launcher = view.launcher
        distribution = launcher.distribution if launcher is not None else None
        smdistributed = distribution.get("smdistributed") if distribution is not None else None
        if launcher is None or smdistributed is None or not smdistributed.is_dict:
            return
        misplaced = [key for key in _LEVEL_KEYS if smdistributed.get(key) is not None]
        if not misplaced or smdistributed.get("modelparallel") is not None:
            return
        framework = launcher.estimator.rsplit(".", 1)[-1] in _FRAMEWORKS
        consequence = (
            'the estimator raises ValueError when it is built ("Invalid smdistributed strategy'
            f' provided: {misplaced[0]}")'
            if framework
            else (
                "the SDK finds no `modelparallel` dict, so the job starts without the library and"
                " none of the parameters apply"
            )
        )
        keys = " and ".join(f"`{key}`" for key in misplaced)
        yield ConfigProblem(
            smdistributed.display,
            f"{keys} sit directly under `smdistributed`: "
            + ("the estimator raises ValueError" if framework else "the job runs without SMP"),
            Severity.ERROR,
            _wrap(smdistributed),
            explanation=(
                'The SageMaker SDK reads them from `smdistributed["modelparallel"]`, and'
                f" {consequence}. Wrap them:"
                ' `"smdistributed": {"modelparallel": {"enabled": True, "parameters": {...}}}`.'
            ),
        )


def _wrap(smdistributed: Located) -> Optional[ConfigFix]:
    """Wrap the value as written in the ``smdistributed`` entry (a dict display or a name) in a
    ``modelparallel`` level."""
    entry = smdistributed.entry
    written = entry.value if isinstance(entry, (cst.DictElement, cst.Arg)) else None
    if written is None:
        return None
    code = cst.Module([]).code_for_node(written)
    return ConfigFix(
        Applicability.SAFE,
        "Wrap the options in a `modelparallel` level",
        replace=((Located(smdistributed.value, written), f'{{"modelparallel": {code}}}'),),
    )
