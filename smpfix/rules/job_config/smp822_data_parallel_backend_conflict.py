"""SMP822: model replicas without a data-parallel backend, or with both backends.

When the processes outnumber pipeline × tensor degree, the job runs several model replicas,
and the library needs a backend that averages their gradients: ``"ddp": True`` (PyTorch) or
``"horovod": True`` (TensorFlow). Without one it stops at ``smp.init`` (``WorkerSizeError`` in
``_validate_worker_size`` of the 1.12 source). Both at once are refused by the SageMaker SDK
("'ddp' and 'horovod' cannot be simultaneously enabled") and by the library's schema. The SDK
also refuses ``ddp_port``/``ddp_dist_backend`` in a launcher without a ``ddp`` key.

With tensor parallelism a missing ``ddp`` is SMP814's finding (the same mistake, the same fix),
so this rule leaves it there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

from smpfix.base.findings import Applicability, Severity
from smpfix.base.literals import UNKNOWN
from smpfix.rules.config_rule import ConfigFix, ConfigProblem, ConfigRule, ConfigView, Replicas
from smpfix.rules.rule import FixAvailability, TensorParallelism

_NEED_DDP_KEY = ("ddp_port", "ddp_dist_backend")


class DataParallelBackendConflict(ConfigRule):
    summary = (
        'More processes than pipeline × tensor degree need `"ddp": True` (TensorFlow: `"horovod":'
        " True`); never both, and `ddp_port`/`ddp_dist_backend` need a `ddp` key."
    )
    fix_availability = FixAvailability.SAFE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        if view.parameters is None or not view.parameters.is_dict:
            return
        if view.tensorflow:
            yield from _tensorflow(view)
            return
        ddp, horovod = view.value("ddp"), view.value("horovod")
        if ddp is True and horovod is True:
            yield ConfigProblem(
                view.located("horovod"),
                "`ddp` and `horovod` are both True: the SDK refuses the pair",
                Severity.ERROR,
                explanation=(
                    "They are two backends for the same job (averaging the gradients of the model"
                    " replicas), and PyTorch uses DDP; the SageMaker SDK refuses the pair"
                    " (\"'ddp' and 'horovod' cannot be simultaneously enabled\") and so does the"
                    " library's schema. Remove `horovod`."
                ),
            )
            return
        missing = _missing_ddp(view)
        if missing is None:
            return
        tp = view.int_value("tensor_parallel_degree")
        if tp is not None and tp > 1:
            return
        replicas = view.several_replicas
        if replicas is not None:
            yield _replicas_without_ddp(view, replicas, missing)
        elif view.launcher is not None and view.located("ddp") is None:
            yield from _sdk_ddp_key(view)


def _missing_ddp(view: ConfigView) -> Optional[str]:
    """How ``ddp`` is off, when smpfix knows it is: "is not set" or "is False". A
    ``[tool.smpfix.job]`` table rarely lists ``ddp``, so there it must be written."""
    located = view.located("ddp")
    value = view.value("ddp")
    if value is True or value is UNKNOWN:
        return None
    if located is None:
        return "is not set" if view.kind == "launcher" else None
    return f"is {value!r}"


def _replicas_without_ddp(view: ConfigView, replicas: Replicas, missing: str) -> ConfigProblem:
    located = view.located("ddp")
    count = view.replicas
    runs = (
        f"the job runs {count} model replicas"
        if count is not None
        else "each instance holds several model replicas"
    )
    message = (
        f"`ddp` {missing} but {runs}: `smp.init()` fails"
        if replicas.certain
        else f"`ddp` {missing}: `smp.init()` fails if instance_count is above 1"
    )
    explanation = (
        "The library needs a backend to average the replicas' gradients and stops at"
        " `smp.init()` (WorkerSizeError: \"'ddp':True (for PyTorch) must be specified\"), after"
        ' the instances are up. Set `"ddp": True`.'
    )
    evidence = (f"{replicas.words}",)
    if located is not None:
        fix = (
            ConfigFix(Applicability.SAFE, 'Set `"ddp": True`', replace=((located, "True"),))
            if located.node is not None
            else None
        )
        return ConfigProblem(
            located,
            message,
            Severity.ERROR if replicas.certain else Severity.WARNING,
            fix,
            explanation=explanation,
            evidence=evidence,
        )
    assert view.parameters is not None
    at = view.located("pipeline_parallel_degree") or view.parameters.display
    fix = ConfigFix(
        Applicability.SAFE, 'Add `"ddp": True`', add=((view.parameters, '"ddp": True'),)
    )
    return ConfigProblem(
        at,
        message,
        Severity.ERROR if replicas.certain else Severity.WARNING,
        fix,
        explanation=explanation,
        evidence=evidence,
    )


def _sdk_ddp_key(view: ConfigView) -> Iterator[ConfigProblem]:
    """``ddp_port``/``ddp_dist_backend`` in a launcher without a ``ddp`` key: the SDK's validator
    refuses it."""
    assert view.parameters is not None
    for key in _NEED_DDP_KEY:
        located = view.located(key)
        if located is None:
            continue
        yield ConfigProblem(
            located,
            f"`{key}` without a `ddp` key: the SDK refuses the job",
            Severity.ERROR,
            ConfigFix(
                Applicability.SAFE, 'Add `"ddp": True`', add=((view.parameters, '"ddp": True'),)
            ),
            explanation=(
                f"`{key}` configures the library's DDP, and the SageMaker SDK's validator refuses"
                " it unless the parameters also hold `ddp` (ValueError when the job is"
                ' submitted). Add `"ddp": True`, or remove it.'
            ),
        )
        return


def _tensorflow(view: ConfigView) -> Iterator[ConfigProblem]:
    """TensorFlow replicas average gradients only with Horovod. The check that stops the job
    is read in the 1.12 source; the TensorFlow releases are older (1.0-1.4), so this is a warning.
    A ``"ddp": True`` written instead is SMP812's finding, which already says to use Horovod."""
    replicas = view.replicas
    horovod = view.value("horovod")
    if replicas is None or replicas <= 1 or horovod is True or horovod is UNKNOWN:
        return
    if view.located("horovod") is None and view.kind != "launcher":
        return
    written = view.parameters.get("ddp") if view.parameters is not None else None
    if written is not None and written.plain() is True:
        return  # SMP812 reports `"ddp": True` in TensorFlow, with Horovod as the remedy
    pp, world = view.int_value("pipeline_parallel_degree"), view.world
    yield ConfigProblem(
        view.located("horovod") or view.located("pipeline_parallel_degree") or view.parameters,
        f"{replicas} model replicas without `horovod`: the library may refuse to start",
        Severity.WARNING,
        explanation=(
            "Nothing averages the replicas' gradients, and the library (in its 1.12 source)"
            " refuses to start such a job (WorkerSizeError: \"'horovod':True (for TensorFlow)"
            ' must be specified"); the TensorFlow releases are older, so this is a warning. Set'
            ' `"horovod": True` and all-reduce the accumulated gradients with Horovod, or use as'
            " many processes as partitions."
        ),
        evidence=(f"{world} processes ÷ {pp} partitions = {replicas} model replicas",),
    )
