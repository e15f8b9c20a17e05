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

from smpfix.base.findings import TITLE_LIMIT, Applicability, Severity
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
from smpfix.job.key_history import (
    PARAMETERS_PAGE,
    PYTORCH_KEY_HISTORY,
    RELEASE_NOTES,
    KeyHistory,
    key_history,
)
from smpfix.job.launcher import Located
from smpfix.job.versions import compare, first_pytorch_container_with, text
from smpfix.rules.config_rule import (
    ConfigFix,
    ConfigProblem,
    ConfigRule,
    ConfigView,
    rename_fix,
)
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.titles import snippet

# ``"smdistributed": {"enabled": True, "parameters": {...}}`` lacks the ``modelparallel`` level
# (SMP829, a rule of its own), which is a different mistake from a misspelled strategy.
_MISSING_LEVEL_KEYS = frozenset({"enabled", "parameters"})
# The page's table names its sources briefly; the "Source" section cites them in full.
_SOURCE_NAMES = {PARAMETERS_PAGE: "SDK parameter page", RELEASE_NOTES: "release notes"}


class UnknownConfigKey(ConfigRule):
    summary = (
        "A `parameters`/`smp.init` key outside the library's schema, or an `mpi`/`modelparallel`"
        " key the SDK ignores."
    )
    fix_availability = FixAvailability.UNSAFE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def versions_table(cls) -> str:
        rows = [
            f"| `{history.key}` | {history.releases} | {_SOURCE_NAMES[history.source]} |"
            for history in sorted(PYTORCH_KEY_HISTORY.values(), key=_arrival)
        ]
        return "\n".join(["| Key | Releases that know it | Source |", "| --- | --- | --- |", *rows])

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        parameters = view.parameters
        if parameters is not None and parameters.is_dict:
            for key, located in parameters.value.items():
                history = None if view.tensorflow or view.v2 else key_history(key)
                known = (
                    history.known_by(view.smp_version)
                    if history is not None and view.smp_version is not None
                    else None
                )
                if view.tensorflow and key in TF_IGNORED:
                    yield _ignored_in_tensorflow(key, located)
                elif history is not None and _arrived_later(history, view):
                    yield _not_yet(view, parameters, key, located, history, known)
                elif key not in view.known_keys and known is not True:
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
        os.path.basename(located.source_file)
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
    advice_text = _advice_text(key, advice, parameters)
    evidence: tuple[str, ...] = ()
    if view.tensorflow:
        # No schema of the TensorFlow releases (1.0-1.4.0) is published: say what is known.
        title = f"{snippet(key)} is not a parameter of SMP v1's TensorFlow flavour"
        explanation = (
            f"{how} against its schema and refuses unknown keys at start-up, after the instances"
            f" are up. {advice_text}"
        )
        if old is not None:
            evidence = (f"this job runs {old.describe()}, whose schema is not published",)
    elif old is not None:
        # The job's release predates the oldest published schema: the key may have existed there.
        title = f"{snippet(key)} is not in SMP v1's oldest published schema (1.12)"
        explanation = (
            "If the release this job runs does not know the key either, it stops at start-up with"
            f' "Unrecognized config parameter {key}", after the instances are up. {advice_text}'
        )
        evidence = (f"this job runs {old.describe()}, whose schema is not published",)
    else:
        title = f"{snippet(key)} is not an SMP v1 configuration parameter"
        explanation = (
            f'{how} against its schema and stops at start-up with "Unrecognized config parameter'
            f' {key}", after the instances are up. {advice_text}'
        )
    title = _with_suggestion(title, advice, parameters)
    if title.endswith("?") and advice.explanation is None:
        explanation = explanation.replace(f" Did you mean `{advice.suggestion}`?", "")
    if where:
        evidence = (f"read from {where}", *evidence)
    severity = Severity.WARNING if old is not None else Severity.ERROR
    return ConfigProblem(
        located,
        title,
        severity,
        rename_fix(located, key, advice.suggestion, parameters),
        explanation=explanation.rstrip(),
        evidence=evidence,
    )


def _arrival(history: KeyHistory) -> tuple[tuple[int, ...], str]:
    return (history.since or (), history.key)


def _arrived_later(history: KeyHistory, view: ConfigView) -> bool:
    """The oldest release the job may run predates the key."""
    version = view.smp_version
    return (
        version is not None
        and history.since is not None
        and compare(version.version, history.since) < 0
    )


def _not_yet(
    view: ConfigView,
    parameters: Located,
    key: str,
    located: Located,
    history: KeyHistory,
    known: Optional[bool],
) -> ConfigProblem:
    """A key of a later release than the job runs: refused by the job's release at start-up."""
    version = view.smp_version
    assert version is not None and history.since is not None
    since = text(history.since)
    if known is False:
        title = f"{snippet(key)} is not a parameter of SMP {version.text}: it arrived in {since}"
        severity = Severity.ERROR
        opening = "The library"
    else:
        title = (
            f"{snippet(key)} arrived in SMP {since}; this job may run SMP {text(version.version)}"
        )
        severity = Severity.WARNING
        opening = f"If the job runs a release older than {since}, the library"
    explanation = (
        f"{opening} checks every key against its own release's schema and stops at start-up with"
        f' "Unrecognized config parameter {key}", after the instances are up.'
    )
    fix = None
    if key == "pipeline_parallel_degree":
        explanation += (
            " Before 1.6 the pipeline degree is called `partitions`: rename the key, or run a"
            " newer release."
        )
        if parameters.get("partitions") is None:
            replacement = renamed_key(located, key, "partitions")
            if replacement is not None:
                fix = ConfigFix(
                    Applicability.UNSAFE,
                    f"Rename `{key}` to `partitions`",
                    replace=(replacement,),
                )
    else:
        container = first_pytorch_container_with(history.since)
        newer = f" (`framework_version` {text(container)} or later)" if container else ""
        explanation += (
            f" Run a container with SMP {since} or later{newer}, or remove the key and the"
            " feature it sets up."
        )
    evidence = (
        f"this job runs {version.describe()}",
        f"`{key}` is a parameter of SMP {history.releases}, per {history.source}",
    )
    return ConfigProblem(located, title, severity, fix, explanation=explanation, evidence=evidence)


def _with_suggestion(title: str, advice: KeyAdvice, container: Located) -> str:
    """The title asking "did you mean `x`?" when a known key is a likely rename and that key is
    not set already, if it still fits on the line."""
    if advice.suggestion is None or container.get(advice.suggestion) is not None:
        return title
    longer = f"{title}: did you mean `{advice.suggestion}`?"
    return longer if len(longer) <= TITLE_LIMIT else title


def _ignored_in_tensorflow(key: str, located: Located) -> ConfigProblem:
    """A PyTorch-only setting in a TensorFlow configuration: the library may accept it, and ignores
    it.

    ``"ddp": True`` is worse than noise: it was meant to average gradients across model
    replicas, and in TensorFlow only Horovod does that."""
    if key == "ddp" and located.plain() is True:
        return ConfigProblem(
            located,
            '`"ddp": True` does nothing in TensorFlow: nothing averages the replicas\' gradients',
            Severity.ERROR,
            explanation=(
                f'`ddp` {TF_IGNORED[key]}: `"ddp": True` does nothing here, so nothing averages the'
                " gradients of the model replicas and each trains on its own data alone. Set"
                ' `"horovod": True` instead, and all-reduce the accumulated gradients with'
                " `hvd.allreduce` after the step."
            ),
        )
    return ConfigProblem(
        located,
        f"`{key}` does nothing in a TensorFlow configuration",
        Severity.WARNING,
        explanation=(
            f"`{key}` {TF_IGNORED[key]}: in this TensorFlow configuration it changes nothing, so"
            " whatever it was meant to set is not set. Remove it."
        ),
    )


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
        title = _with_suggestion(f"{snippet(key)} is not {what}", advice, container)
        advice_text = _advice_text(key, advice, container)
        if title.endswith("?") and advice.explanation is None:
            advice_text = ""
        explanation = f"{why[:1].upper()}{why[1:]}. {advice_text}"
        yield ConfigProblem(
            located,
            title,
            severity,
            rename_fix(located, key, advice.suggestion, container),
            explanation=explanation.rstrip(),
        )


def _advice_text(key: str, advice: KeyAdvice, container: Located) -> str:
    if advice.suggestion is not None and container.get(advice.suggestion) is not None:
        if advice.explanation is not None:
            return (
                f"{advice.sentence(key)} `{advice.suggestion}` is set as well, so remove this one."
            )
        return f"Did you mean `{advice.suggestion}`? It is set as well, so remove one of the two."
    return advice.sentence(key)
