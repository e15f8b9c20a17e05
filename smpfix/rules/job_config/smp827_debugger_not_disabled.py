"""SMP827: SageMaker Debugger left on in a model-parallel job.

Debugger does not support the model parallelism library (developer guide, "Debugger
considerations"), and the SageMaker SDK turns it on by default for PyTorch and TensorFlow jobs.
How much that matters depends on checkpointing:

- with ``checkpoint_s3_uri`` the model-parallel troubleshooting guide reports the job can fail
  with ``FileNotFoundError: ... /opt/ml/checkpoints/metadata.json.sagemaker-uploading``, and its
  remedy is ``debugger_hook_config=False``: a warning;
- without S3 checkpoints nothing documented breaks (the official MNIST and BERT notebooks leave
  Debugger on), but Debugger collects nothing useful for the library: a hint, as advice;
- with both ``checkpoint_s3_uri`` and ``checkpoint_local_path`` on a ``PyTorch`` or
  ``TensorFlow`` estimator the SDK turns Debugger off itself (``Framework.
  _validate_and_set_debugger_configs`` in ``sagemaker/estimator.py``, since SDK 2.33.0, for a
  job with a ``distribution``): nothing to say. The Hugging Face estimator is not one of the
  frameworks it does that for.
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

# The estimators whose SDK class turns Debugger off when a distributed job sets both checkpoint
# settings (``_framework_name`` in {"mxnet", "pytorch", "tensorflow"}).
_AUTO_DISABLED = ("pytorch", "tensorflow")


class DebuggerNotDisabled(ConfigRule):
    summary = (
        "A model-parallel job should pass `debugger_hook_config=False`: Debugger does not support"
        " the library, and with S3 checkpoints the job can fail."
    )
    fix_availability = FixAvailability.SOMETIMES_SAFE
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        launcher = view.launcher
        if launcher is None or not view.modelparallel_enabled:
            return
        hook = launcher.keyword("debugger_hook_config")
        if hook is not None and not _configured(hook):
            return
        if hook is None and has_star_kwargs(launcher.call):
            return  # the `**` arguments may set it where smpfix cannot read them
        debugger = "a `DebuggerHookConfig`" if hook is not None else "the default hook"
        checkpoint = launcher.keyword("checkpoint_s3_uri")
        if checkpoint is None or checkpoint.plain() is None:
            yield ConfigProblem(
                hook if hook is not None else Located(None, launcher.call),
                "SageMaker Debugger is on in this model-parallel job: it does not support the"
                " library",
                Severity.HINT,
                _fix(view, hook),
                explanation=(
                    "The developer guide says Debugger does not support the model parallelism"
                    " library, and the SageMaker SDK turns it on by default for PyTorch and"
                    " TensorFlow jobs. Without S3 checkpoints nothing documented breaks (the"
                    " official MNIST and BERT notebooks leave it on), so this is advice: pass"
                    " `debugger_hook_config=False`, and the job no longer starts a hook that"
                    " collects nothing useful. If you add `checkpoint_s3_uri` later, it matters"
                    " more: with S3 checkpoints the job can fail with FileNotFoundError"
                    ' (".../metadata.json.sagemaker-uploading").'
                ),
                evidence=(
                    f"Debugger: on, {debugger}",
                    "checkpoint_s3_uri: not set, so no checkpoint upload can collide with it",
                ),
            )
            return
        if _sdk_turns_it_off(view):
            return
        yield ConfigProblem(
            hook if hook is not None else checkpoint,
            "SageMaker Debugger is on while checkpoints sync to S3: the job can fail uploading",
            Severity.WARNING,
            _fix(view, hook),
            explanation=(
                "Debugger does not support the model parallelism library, and the SageMaker SDK"
                " turns it on by default for PyTorch and TensorFlow jobs. With checkpoints"
                " syncing to S3 (`checkpoint_s3_uri`) the model-parallel troubleshooting guide"
                " reports the job can fail with FileNotFoundError"
                ' (".../metadata.json.sagemaker-uploading") while checkpoints upload. Pass'
                " `debugger_hook_config=False`. (A PyTorch or TensorFlow estimator that also sets"
                " `checkpoint_local_path` has the SDK, from 2.33.0, turn Debugger off itself;"
                " the Hugging Face estimator does not.)"
            ),
            evidence=(f"Debugger: on, {debugger}", "checkpoint_s3_uri: set"),
        )


def _sdk_turns_it_off(view: ConfigView) -> bool:
    """The SDK disables Debugger itself: a PyTorch or TensorFlow estimator of a distributed job
    with both ``checkpoint_s3_uri`` and ``checkpoint_local_path``
    (``Framework._validate_and_set_debugger_configs``; the URI is set when this is asked)."""
    launcher = view.launcher
    assert launcher is not None
    local = launcher.keyword("checkpoint_local_path")
    return (
        local is not None
        and local.plain() not in (None, "")
        and any(name in launcher.estimator.lower() for name in _AUTO_DISABLED)
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
