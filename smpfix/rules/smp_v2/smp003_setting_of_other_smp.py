"""SMP003: an SMP v1 setting in an SMP v2 configuration, or an SMP v2 setting in an SMP v1 one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

from smpfix.base.findings import Severity
from smpfix.job.config_keys import V2_KEYS
from smpfix.job.launcher import Located
from smpfix.rules.config_rule import ConfigProblem, ConfigView
from smpfix.rules.launched_code import LaunchedCode, launched_code
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.scope import Library
from smpfix.rules.smp_v2._config import V2ConfigRule, v2_views
from smpfix.rules.smp_v2._mixups import image, mpirun
from smpfix.rules.smp_v2._v1_keys import V1_ONLY_KEYS, V1Setting


class SettingOfOtherSmp(V2ConfigRule):
    summary = (
        "An SMP v1 key (`pipeline_parallel_degree`, `microbatches`, `ddp`, ...) in an SMP v2"
        " configuration, or an SMP v2 key (`hybrid_shard_degree`, ...) in a launcher that starts"
        " SMP v1: SMP v1 refuses it, SMP v2 ignores it."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.CONFIGURED
    library = Library.EITHER
    since = None

    def views(self) -> list[ConfigView]:
        return v2_views(self.program)

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        return iter(())

    def check_with_code(self, view: ConfigView) -> Iterator[ConfigProblem]:
        parameters = view.parameters
        if parameters is None or not parameters.is_dict:
            return
        launcher = view.launcher
        if launcher is not None and (mpirun(launcher) is not None or not image(launcher).smp_v2):
            # Not an SMP v2 launch: a v1 launch where v1 exists (its v2 keys are wrong here),
            # else SMP001 (v1 where v1 does not exist) or SMP002 (a v2 script) speaks.
            container = image(launcher)
            if mpirun(launcher) is None or container.has_v1 is False:
                return
            for key, located in parameters.value.items():
                if key in V2_KEYS:
                    yield ConfigProblem(
                        located,
                        f"SMP v2 setting `{key}` in a launcher that starts SMP v1, which refuses"
                        " it",
                        Severity.ERROR,
                        explanation=(
                            f"`{key}` is a setting of SMP v2 (`torch.sagemaker`), and SMP v1"
                            " refuses keys outside its schema when it starts. Remove it to stay"
                            " on SMP v1; to move to SMP v2, launch with"
                            ' `"torch_distributed": {"enabled": True}` instead of `mpi` and port'
                            " the script to `torch.sagemaker`."
                        ),
                        evidence=(
                            "this launcher starts SMP v1 (`mpi` with `smdistributed.modelparallel`,"
                            f" no `torch_distributed`) in {container.written}",
                        ),
                    )
            return
        code = launched_code(self.program, view)
        for key, located in parameters.value.items():
            setting = V1_ONLY_KEYS.get(key)
            if setting is not None and not setting.asks_nothing(located.value):
                yield _ignored_by_v2(view, key, located, setting, code)


def _ignored_by_v2(
    view: ConfigView,
    key: str,
    located: Located,
    setting: V1Setting,
    code: Optional[LaunchedCode],
) -> ConfigProblem:
    """SMP v2 ignores v1's keys (``_v1_keys``): a warning when the job then lacks what the key
    asked for, a hint when SMP v2, a v2 key beside it, or the script provides it."""
    evidence = [f"{view.where} configures SMP v2 (`torch.sagemaker`)"]
    provided = None
    if setting.v2_key is not None and view.located(setting.v2_key) is not None:
        provided = f"`{setting.v2_key}` is set beside it"
    elif code is not None and setting.done_by:
        called = _first_call(code, setting.done_by)
        if called is not None:
            provided = f"{code.script} calls `{called.rsplit('.', 1)[-1]}` (`{called}`)"
        else:
            names = dict.fromkeys(name.rsplit(".", 1)[-1] for name in setting.done_by)
            evidence.append(
                f"{code.script} (and the project modules it imports) calls no"
                f" {' or '.join(f'`{name}`' for name in names)}"
            )
    if provided is not None:
        evidence.append(provided)
    about = (
        f"`{key}` is a setting of SMP v1 (`smdistributed.modelparallel`); SMP v2 reads only its"
        " own keys and ignores the others, and the SageMaker SDK passes them through unchecked:"
        f" {setting.instead}."
    )
    if setting.lost is None or provided is not None:
        return ConfigProblem(
            located,
            f"SMP v2 ignores v1's `{key}`, which does nothing here",
            Severity.HINT,
            explanation=f"{about} Remove it: it does nothing here.",
            evidence=tuple(evidence),
        )
    return ConfigProblem(
        located,
        f"SMP v2 ignores v1's `{key}`: this job {setting.lost}",
        Severity.WARNING,
        explanation=(
            f"{about} A job sized for what `{key}` asked for can run out of memory without it."
        ),
        evidence=tuple(evidence),
    )


def _first_call(code: LaunchedCode, qualified_names: tuple[str, ...]) -> Optional[str]:
    """The first of ``qualified_names`` that the launched code calls."""
    for name in qualified_names:
        if any(facts.calls_of(name) for facts in code.files):
            return name
    return None
