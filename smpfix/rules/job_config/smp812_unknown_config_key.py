"""SMP812: a configuration key that the library, or the SageMaker SDK, does not know.

Library parameters (the launcher's ``parameters``, an ``smp.init({...})`` dict) are checked
against the 1.12 schema: the library refuses an unknown key at start-up. A job known to run an
older release (whose schema is not published) gets a warning instead of an error. The ``mpi``,
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
    MODELPARALLEL_KEYS,
    MPI_KEYS,
    SMDISTRIBUTED_KEYS,
    KeyAdvice,
    advise,
)
from smpfix.job.jobfacts import KNOWN_KEYS
from smpfix.job.launcher import Located
from smpfix.rules.config_rule import ConfigFix, ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability

# ``"smdistributed": {"enabled": True, "parameters": {...}}`` lacks the ``modelparallel`` level
# (catalog C30, a rule of its own), which is a different mistake from a misspelled strategy.
_MISSING_LEVEL_KEYS = frozenset({"enabled", "parameters"})


class UnknownConfigKey(ConfigRule):
    code = "SMP812"
    name = "unknown-config-key"
    summary = "A `parameters`/`smp.init` key outside the library's schema, or an `mpi`/`modelparallel` key the SDK ignores."
    fix_availability = FixAvailability.UNSAFE

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        parameters = view.parameters
        if parameters is not None and parameters.is_dict:
            for key, located in parameters.value.items():
                if key not in KNOWN_KEYS:
                    yield _unknown_parameter(view, parameters, key, located)
        launcher = view.launcher
        distribution = launcher.distribution if launcher is not None else None
        if launcher is None or distribution is None or not distribution.is_dict:
            return
        yield from _unknown_sdk_keys(
            distribution.get("mpi"), MPI_KEYS, "an `mpi` option",
            "the SageMaker SDK reads only `enabled`, `processes_per_host` and `custom_mpi_options` from the `mpi` dict "
            "and silently drops anything else",
        )
        yield from _unknown_sdk_keys(
            distribution.get("smdistributed"), SMDISTRIBUTED_KEYS, "an `smdistributed` strategy",
            "the SageMaker SDK knows only `modelparallel` and `dataparallel` (a framework estimator raises \"Invalid "
            "smdistributed strategy provided\"; a generic `Estimator` runs the job without model parallelism)",
            skip=_MISSING_LEVEL_KEYS,
        )
        yield from _unknown_sdk_keys(
            launcher.modelparallel, MODELPARALLEL_KEYS, "a `modelparallel` option",
            "the SageMaker SDK reads only `enabled` and `parameters` from the `modelparallel` dict and silently drops "
            "anything else",
        )


def _unknown_parameter(view: ConfigView, parameters: Located, key: str, located: Located) -> ConfigProblem:
    advice = advise(key)
    where = f" (read from {os.path.basename(located.source_file)})" if located.source_file and view.kind != "job table" else ""
    how = (
        "The launcher's parameters are merged into this dict, and the library checks every key"
        if view.kind == "smp.init"
        else "The library checks every key"
    )
    if view.schema_unpublished and view.smp_version is not None:
        # The job's release predates the oldest published schema: the key may have existed there.
        message = (
            f"`{key}` is not a configuration parameter of the model parallelism library (SMP v1) in its 1.12 schema, "
            f"the oldest published one{where}, and this job runs {view.smp_version.describe()}, whose schema is not "
            "published. If that release does not know the key either, it stops at start-up with \"Unrecognized "
            f"config parameter {key}\", after the instances are up. {_advice_text(key, advice, parameters)}"
        )
        return ConfigProblem(located, message.rstrip(), Severity.WARNING, _rename_fix(located, key, advice, parameters))
    message = (
        f"`{key}` is not a configuration parameter of the model parallelism library (SMP v1){where}. {how} against "
        f"its schema and stops at start-up with \"Unrecognized config parameter {key}\", after the instances are up. "
        f"{_advice_text(key, advice, parameters)}"
    )
    return ConfigProblem(located, message.rstrip(), Severity.ERROR, _rename_fix(located, key, advice, parameters))


def _unknown_sdk_keys(
    container: Optional[Located], known: frozenset[str], what: str, why: str, skip: frozenset[str] = frozenset()
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
        yield ConfigProblem(located, message.rstrip(), severity, _rename_fix(located, key, advice, container))


def _advice_text(key: str, advice: KeyAdvice, container: Located) -> str:
    if advice.suggestion is not None and container.get(advice.suggestion) is not None:
        return f"Did you mean `{advice.suggestion}`? It is set as well, so remove one of the two."
    return advice.sentence(key)


def _rename_fix(located: Located, key: str, advice: KeyAdvice, container: Located) -> Optional[ConfigFix]:
    suggestion = advice.suggestion
    if suggestion is None or container.get(suggestion) is not None:
        return None
    replacement = renamed_key(located, key, suggestion)
    if replacement is None:
        return None
    return ConfigFix(Applicability.UNSAFE, f"Rename `{key}` to `{suggestion}`", replace=(replacement,))
