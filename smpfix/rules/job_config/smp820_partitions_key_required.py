"""SMP820: the pipeline degree under the wrong one of its two names.

``partitions`` is the library's alias of ``pipeline_parallel_degree``; both with different
values stop the library. Two other readers know only ``partitions``: the SageMaker SDK's
validator (2.199.0 and older require the key outright, a ``ValueError``; later ones compare
``default_partition`` with ``config["partitions"]``, a ``KeyError`` when the degree is written
as ``pipeline_parallel_degree``), and Hugging Face's
``is_sagemaker_mp_enabled()`` looks for the key ``partitions``, so a ``Trainer`` (and a
``HuggingFace`` estimator's script) silently trains without the library otherwise.

A TensorFlow launcher knows the degree only as ``partitions``, which its documentation marks
required: one without it is refused by the SDK.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

from smpfix.base.findings import Applicability, Severity
from smpfix.base.literals import UNKNOWN
from smpfix.job.config_entries import renamed_key
from smpfix.job.launcher import Located
from smpfix.rules.config_rule import ConfigFix, ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.launched_code import launched_code
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.titles import snippet


class PartitionsKeyRequired(ConfigRule):
    summary = (
        "Write the pipeline degree as `partitions` where the SDK, Hugging Face or TensorFlow need"
        " it, and never both names."
    )
    fix_availability = FixAvailability.UNSAFE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        parameters = view.parameters
        if parameters is None or not parameters.is_dict or view.tensorflow:
            # TensorFlow knows only `partitions`; the other name there is SMP812's finding.
            return
        alias, degree = parameters.get("partitions"), parameters.get("pipeline_parallel_degree")
        if alias is None or degree is None:
            return
        a, d = alias.plain(), degree.plain()
        if a is UNKNOWN or d is UNKNOWN or a == d:
            return
        yield ConfigProblem(
            alias,
            f"`partitions` {snippet(repr(a), 12)} and `pipeline_parallel_degree`"
            f" {snippet(repr(d), 12)} disagree: start-up fails",
            Severity.ERROR,
            explanation=(
                "`partitions` is the older name of the same setting, and the library stops at"
                f' start-up when the two disagree ("Conflicting values {d!r} and {a!r} are'
                " provided for config parameter pipeline_parallel_degree and its alias"
                ' partitions"), after the instances are up. Keep one of them with the degree you'
                " mean."
            ),
        )

    def check_with_code(self, view: ConfigView) -> Iterator[ConfigProblem]:
        # Launchers only: the SDK and Hugging Face read the launcher's parameters, never an
        # ``smp.init`` dict. Both findings point at one key, so they are reported as one.
        launcher = view.launcher
        if launcher is None:
            return
        mp = launcher.modelparallel
        enabled = mp.get("enabled") if mp is not None else None
        parameters = view.parameters
        if (
            enabled is None
            or enabled.plain() is not True
            or parameters is None
            or not parameters.is_dict
        ):
            return
        if view.tensorflow:
            yield from _tensorflow_partitions(parameters)
            return
        degree = parameters.get("pipeline_parallel_degree")
        if degree is None or parameters.get("partitions") is not None:
            return
        reasons, evidence = [], []
        if parameters.get("default_partition") is not None:
            evidence.append("`default_partition` is set, so the SDK's validator reads `partitions`")
            reasons.append(
                "the SageMaker SDK's validator needs `partitions` there, so submitting the job"
                " fails: SDK 2.199.0 and older require it in every configuration (\"'partitions' is"
                ' a required parameter."), later ones compare `default_partition` with'
                " `config[\"partitions\"]` (`KeyError: 'partitions'`)"
            )
        hugging_face = _hugging_face_reader(self, view)
        if hugging_face is not None:
            reasons.append(
                f"{hugging_face} turns model parallelism on only when the key `partitions` is in"
                " the parameters (`is_sagemaker_mp_enabled()`), so it silently trains without the"
                " library: no pipeline or tensor parallelism, and the model may not fit"
            )
        if not reasons:
            return
        value = degree.plain()
        if value is not UNKNOWN:
            evidence.append(f"pipeline_parallel_degree: {value!r}")
        replacement = renamed_key(degree, "pipeline_parallel_degree", "partitions")
        fix = (
            ConfigFix(
                Applicability.UNSAFE,
                "Rename `pipeline_parallel_degree` to `partitions`",
                replace=(replacement,),
            )
            if replacement is not None
            else None
        )
        yield ConfigProblem(
            degree,
            "`pipeline_parallel_degree` without `partitions`: "
            + (
                "the SDK refuses the job"
                if parameters.get("default_partition") is not None
                else "the Trainer runs without the library"
            ),
            Severity.ERROR,
            fix,
            explanation=(
                "The pipeline degree is written as `pipeline_parallel_degree` without"
                " `partitions`: "
                + "; and ".join(reasons)
                + '. Write it as `"partitions"` (the library accepts both names).'
            ),
            evidence=tuple(evidence),
        )


def _tensorflow_partitions(parameters: Located) -> Iterator[ConfigProblem]:
    """A TensorFlow launcher without ``partitions``: the one key its documentation marks required.

    A ``pipeline_parallel_degree`` in its place is SMP812's finding (with the rename as a fix).
    """
    if (
        parameters.get("partitions") is not None
        or parameters.get("pipeline_parallel_degree") is not None
    ):
        return
    yield ConfigProblem(
        parameters.display,
        "TensorFlow model parallelism without `partitions`: the SDK refuses the job",
        Severity.ERROR,
        explanation=(
            "This TensorFlow launcher enables model parallelism without `partitions`: the"
            " TensorFlow documentation marks `partitions` required, and the SageMaker SDK"
            " (2.199.0 and earlier) refuses to build the job (\"'partitions' is a required"
            ' parameter."). Add `"partitions": <pipeline stages>`.'
        ),
    )


def _hugging_face_reader(rule: ConfigRule, view: ConfigView) -> Optional[str]:
    """What reads the parameters the Hugging Face way: the estimator, or the launched Trainer
    script."""
    launcher = view.launcher
    if launcher is not None and "huggingface" in launcher.estimator.lower():
        return "with the HuggingFace estimator, the transformers `Trainer`"
    code = launched_code(rule.program, view)
    if code is not None and code.uses_hf_trainer:
        return f"the launched script {code.script} uses the transformers `Trainer`, which"
    return None
