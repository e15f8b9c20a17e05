"""SMP812: a configuration key that the library, or the SageMaker SDK, does not know.

Library parameters (the launcher's ``parameters``, an ``smp.init({...})`` dict) are checked
against the schema of their flavour: the PyTorch library's 1.12 schema, or for a TensorFlow
launcher or script the keys of the TensorFlow flavour (SMP 1.0-1.4.0, with ``xla``, and without
everything PyTorch gained later). The library refuses an unknown key at start-up. A job known to
run a release older than the oldest published schema (1.12) gets a warning instead of an error,
since that release may have known the key. The ``mpi``,
``smdistributed`` and ``modelparallel`` dicts of a launcher are checked against the keys the
SDK reads: there a misspelled key is dropped without a word. Keys of ``[tool.smpfix.job]``
never get here: config.py rejects an unknown job setting (exit 2) with the same advice
(``smpfix.job.config_keys``), because smpfix cannot know the job it declares.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Optional

from smpfix.base.findings import Applicability, Severity
from smpfix.job.config_entries import renamed_key
from smpfix.job.config_keys import (
    DOCUMENTED_BEFORE_1_12,
    MODELPARALLEL_KEYS,
    MPI_KEYS,
    SMDISTRIBUTED_KEYS,
    TF_IGNORED,
    KeyAdvice,
    advise,
)
from smpfix.job.launcher import Located
from smpfix.rules.config_rule import ConfigFix, ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism

# ``"smdistributed": {"enabled": True, "parameters": {...}}`` lacks the ``modelparallel`` level
# (catalog C30, a rule of its own), which is a different mistake from a misspelled strategy.
_MISSING_LEVEL_KEYS = frozenset({"enabled", "parameters"})


class UnknownConfigKey(ConfigRule):
    summary = (
        "A `parameters`/`smp.init` key outside the library's schema, or an `mpi`/`modelparallel`"
        " key the SDK ignores."
    )
    fix_availability = FixAvailability.UNSAFE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        parameters = view.parameters
        if parameters is not None and parameters.is_dict:
            for key, located in parameters.value.items():
                if view.tensorflow and key in TF_IGNORED:
                    yield _ignored_in_tensorflow(key, located)
                elif key not in view.known_keys:
                    yield _unknown_parameter(view, parameters, key, located)
        launcher = view.launcher
        distribution = launcher.distribution if launcher is not None else None
        if launcher is None or distribution is None or not distribution.is_dict:
            return
        yield from _unknown_sdk_keys(
            distribution.get("mpi"),
            MPI_KEYS,
            "an `mpi` option",
            "the SageMaker SDK reads only `enabled`, `processes_per_host` and `custom_mpi_options`"
            " from the `mpi` dict and silently drops anything else",
        )
        yield from _unknown_sdk_keys(
            distribution.get("smdistributed"),
            SMDISTRIBUTED_KEYS,
            "an `smdistributed` strategy",
            "the SageMaker SDK knows only `modelparallel` and `dataparallel` (a framework estimator"
            ' raises "Invalid smdistributed strategy provided"; a generic `Estimator` runs the job'
            " without model parallelism)",
            skip=_MISSING_LEVEL_KEYS,
        )
        yield from _unknown_sdk_keys(
            launcher.modelparallel,
            MODELPARALLEL_KEYS,
            "a `modelparallel` option",
            "the SageMaker SDK reads only `enabled` and `parameters` from the `modelparallel` dict"
            " and silently drops anything else",
        )


def _unknown_parameter(
    view: ConfigView, parameters: Located, key: str, located: Located
) -> ConfigProblem:
    advice = advise(key, view.known_keys)
    where = (
        f" (read from {os.path.basename(located.source_file)})"
        if located.source_file and view.kind != "job table"
        else ""
    )
    how = (
        "The launcher's parameters are merged into this dict, and the library checks every key"
        if view.kind == "smp.init"
        else "The library checks every key"
    )
    # An older release may have known a key smpfix knows nothing about (or a documented one the
    # 1.12 schema refuses); a key explained as no key of the flavour is refused in every release.
    maybe_known = advice.explanation is None or key in DOCUMENTED_BEFORE_1_12
    old = view.smp_version if view.schema_unpublished and maybe_known else None
    if view.tensorflow:
        # No schema of the TensorFlow releases (1.0-1.4.0) is published: say what is known.
        message = (
            f"`{key}` is not a configuration parameter of the TensorFlow flavour of the model"
            f" parallelism library (SMP v1){where}. {how} against its schema and refuses unknown"
            " keys at start-up, after the instances are up."
            f" {_advice_text(key, advice, parameters)}"
        )
        if old is not None:
            message = (
                f"{message.rstrip()} (This job runs {old.describe()}, whose schema is not"
                " published.)"
            )
    elif old is not None:
        # The job's release predates the oldest published schema: the key may have existed there.
        message = (
            f"`{key}` is not a configuration parameter of the model parallelism library (SMP v1) in"
            " its 1.12 schema, "
            f"the oldest published one{where}, and this job runs {old.describe()}, whose schema is"
            " not "
            "published. If that release does not know the key either, it stops at start-up with"
            ' "Unrecognized '
            f'config parameter {key}", after the instances are up.'
            f" {_advice_text(key, advice, parameters)}"
        )
    else:
        message = (
            f"`{key}` is not a configuration parameter of the model parallelism library (SMP"
            f" v1){where}. {how} against "
            f'its schema and stops at start-up with "Unrecognized config parameter {key}", after'
            " the instances are up. "
            f"{_advice_text(key, advice, parameters)}"
        )
    severity = Severity.WARNING if old is not None else Severity.ERROR
    return ConfigProblem(
        located, message.rstrip(), severity, _rename_fix(located, key, advice, parameters)
    )


def _ignored_in_tensorflow(key: str, located: Located) -> ConfigProblem:
    """A PyTorch-only setting in a TensorFlow configuration: the library may accept it, and ignores
    it.

    ``"ddp": True`` is worse than noise: it was meant to average gradients across model
    replicas, and in TensorFlow only Horovod does that."""
    if key == "ddp" and located.plain() is True:
        message = (
            f'`ddp` {TF_IGNORED[key]}: `"ddp": True` does nothing here, so nothing averages the'
            " gradients of the model replicas and each trains on its own data alone. Set"
            ' `"horovod": True` instead, and all-reduce the accumulated gradients with'
            " `hvd.allreduce` after the step."
        )
        return ConfigProblem(located, message, Severity.ERROR)
    message = (
        f"`{key}` {TF_IGNORED[key]}: in this TensorFlow configuration it changes nothing, so"
        " whatever it was meant to set is not set. Remove it."
    )
    return ConfigProblem(located, message, Severity.WARNING)


def _unknown_sdk_keys(
    container: Optional[Located],
    known: frozenset[str],
    what: str,
    why: str,
    skip: frozenset[str] = frozenset(),
) -> Iterator[ConfigProblem]:
    if container is None or not container.is_dict:
        return
    for key, located in container.value.items():
        if key in known or key in skip:
            continue
        advice = advise(key, known)
        # A misspelling means the setting meant is missing from the job; an unrelated key is noise.
        severity = Severity.ERROR if advice.suggestion is not None else Severity.WARNING
        message = f"`{key}` is not {what}: {why}. {_advice_text(key, advice, container)}"
        yield ConfigProblem(
            located, message.rstrip(), severity, _rename_fix(located, key, advice, container)
        )


def _advice_text(key: str, advice: KeyAdvice, container: Located) -> str:
    if advice.suggestion is not None and container.get(advice.suggestion) is not None:
        if advice.explanation is not None:
            return (
                f"{advice.sentence(key)} `{advice.suggestion}` is set as well, so remove this one."
            )
        return f"Did you mean `{advice.suggestion}`? It is set as well, so remove one of the two."
    return advice.sentence(key)


def _rename_fix(
    located: Located, key: str, advice: KeyAdvice, container: Located
) -> Optional[ConfigFix]:
    suggestion = advice.suggestion
    if suggestion is None or container.get(suggestion) is not None:
        return None
    replacement = renamed_key(located, key, suggestion)
    if replacement is None:
        return None
    return ConfigFix(
        Applicability.UNSAFE, f"Rename `{key}` to `{suggestion}`", replace=(replacement,)
    )
