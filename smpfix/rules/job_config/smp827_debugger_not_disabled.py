"""SMP827: SageMaker Debugger left on in a model-parallel job that checkpoints to S3.

Debugger does not support the model parallelism library, and the SageMaker SDK turns it on by
default for PyTorch and TensorFlow jobs. The model-parallel troubleshooting guide ties the
failure to checkpointing: with ``checkpoint_s3_uri`` the job can fail with
``FileNotFoundError: ... /opt/ml/checkpoints/metadata.json.sagemaker-uploading``; its remedy is
``debugger_hook_config=False``. Recent SDKs turn Debugger off themselves when a distributed
PyTorch, TensorFlow or MXNet job sets both ``checkpoint_s3_uri`` and ``checkpoint_local_path``
(not for the Hugging Face estimator), so that case is only a hint.

Without checkpointing nothing documented breaks (the official MNIST and BERT notebooks leave
Debugger on), and the rule is silent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

import libcst as cst

from smpfix.base.calls import has_star_kwargs
from smpfix.base.findings import Applicability, Severity
from smpfix.base.literals import UNKNOWN
from smpfix.job.launcher import Located
from smpfix.rules.config_rule import ConfigFix, ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism

# The frameworks whose estimators the SDK disables Debugger for when checkpointing is complete.
_AUTO_DISABLED = ("pytorch", "tensorflow")


class DebuggerNotDisabled(ConfigRule):
    summary = (
        "A model-parallel job that checkpoints to S3 should pass `debugger_hook_config=False`;"
        " Debugger does not support the library."
    )
    fix_availability = FixAvailability.SOMETIMES_SAFE
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        launcher = view.launcher
        if launcher is None or not view.modelparallel_enabled:
            return
        checkpoint = launcher.keyword("checkpoint_s3_uri")
        if checkpoint is None or checkpoint.plain() is None:
            return
        hook = launcher.keyword("debugger_hook_config")
        if hook is not None and not _configured(hook):
            return
        if hook is None and has_star_kwargs(launcher.call):
            return  # the `**` arguments may set it where smpfix cannot read them
        local = launcher.keyword("checkpoint_local_path")
        automatic = (
            local is not None
            and local.plain() is not None
            and any(name in launcher.estimator.lower() for name in _AUTO_DISABLED)
        )
        caveat = (
            " Recent SageMaker SDKs turn Debugger off for a distributed job that also sets"
            " `checkpoint_local_path`; older ones do not."
            if automatic
            else ""
        )
        yield ConfigProblem(
            hook if hook is not None else checkpoint,
            "This model-parallel job checkpoints to S3 (`checkpoint_s3_uri`) with SageMaker"
            f" Debugger {'configured' if hook is not None else 'on (the default)'}: Debugger does"
            " not support the model parallelism library, and with checkpointing the job can fail"
            ' with FileNotFoundError (".../metadata.json.sagemaker-uploading") while checkpoints'
            " upload. Pass `debugger_hook_config=False`." + caveat,
            Severity.HINT if automatic else Severity.WARNING,
            _fix(view, hook),
        )


def _configured(hook: Located) -> bool:
    """``debugger_hook_config`` turns Debugger on: a ``DebuggerHookConfig(...)`` call, True or
    None; False, or a value smpfix cannot read, is left alone."""
    value = hook.plain()
    if value is UNKNOWN:
        node = hook.node
        func = node.func if type(node) is cst.Call else None
        name = (
            func.attr.value
            if type(func) is cst.Attribute
            else func.value
            if type(func) is cst.Name
            else None
        )
        return name == "DebuggerHookConfig"
    return value is not False


def _fix(view: ConfigView, hook: Optional[Located]) -> Optional[ConfigFix]:
    assert view.launcher is not None
    if hook is None:
        return ConfigFix(
            Applicability.SAFE,
            "Add `debugger_hook_config=False`",
            add=((Located(None, view.launcher.call), "debugger_hook_config=False"),),
        )
    if hook.node is None or hook.entry is None:
        return None
    return ConfigFix(
        Applicability.UNSAFE, "Set `debugger_hook_config=False`", replace=((hook, "False"),)
    )
