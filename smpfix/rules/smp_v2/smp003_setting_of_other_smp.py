"""SMP003: an SMP v1 setting in an SMP v2 configuration, or an SMP v2 setting in an SMP v1 one."""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.job.config_keys import V2_KEYS
from smpfix.rules.config_rule import ConfigProblem, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.scope import Library
from smpfix.rules.smp_v2._config import V1_ONLY_KEYS, V2ConfigRule, v2_views
from smpfix.rules.smp_v2._mixups import image, mpirun


class SettingOfOtherSmp(V2ConfigRule):
    summary = (
        "An SMP v1 key (`pipeline_parallel_degree`, `microbatches`, `ddp`, ...) in an SMP v2"
        " configuration, or an SMP v2 key (`hybrid_shard_degree`, ...) in a launcher that starts"
        " SMP v1: the library refuses or ignores it."
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
        for key, located in parameters.value.items():
            if key in V1_ONLY_KEYS:
                yield ConfigProblem(
                    located,
                    f"SMP v1 setting `{key}` in an SMP v2 configuration, which SMP v2 refuses",
                    Severity.ERROR,
                    explanation=(
                        f"`{key}` is a setting of SMP v1 (`smdistributed.modelparallel`):"
                        f" {V1_ONLY_KEYS[key]}. SMP v2 accepts only its own keys"
                        " (`hybrid_shard_degree`, `tensor_parallel_degree`, ...; the SMP v2"
                        " reference lists nine)."
                    ),
                    evidence=(f"{view.where} configures SMP v2 (`torch.sagemaker`)",),
                )
