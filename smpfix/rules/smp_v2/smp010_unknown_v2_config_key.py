"""SMP010: a key SMP v2's configuration does not have, or the job's SMP v2 release does not.

As SMP812 does for SMP v1, the rule knows the keys of each release: a key that arrived after
the release the job runs (``expert_parallel_degree`` in 2.3.0, ``context_parallel_degree`` in
2.5.0; ``smpfix.job.v2_key_history``) is this rule's finding too, since to that release it is
as unknown as a typo (``_releases`` says how sure the finding is).
"""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.job.config_keys import advise
from smpfix.job.jobfacts import V2_KNOWN_KEYS
from smpfix.job.v2_key_history import V2_KEY_HISTORY
from smpfix.job.versions import FIRST_V2
from smpfix.rules.config_rule import ConfigProblem, ConfigView, rename_fix
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.smp_v2._config import V2ConfigRule
from smpfix.rules.smp_v2._releases import release_problem, versions_table
from smpfix.rules.smp_v2._v1_keys import V1_ONLY_KEYS

# Features SMP v1 configured by key that SMP v2 leaves to PyTorch in the script: no key is close,
# whatever the spelling says (the SMP v2 reference's "Upgrade from SMP v1 to SMP v2").
_SCRIPT_SETTINGS = {
    "activation_checkpointing": "SMP v2 has no such key: apply PyTorch's"
    " `apply_activation_checkpointing` to the transformer layers in the script (the SMP v2"
    " activation checkpointing page).",
    "mixed_precision": "SMP v2 has no such key: pass FSDP a `MixedPrecision` policy in the script"
    " (the SMP v2 mixed precision page).",
    "sharding_strategy": "SMP v2 has no such key: pass `sharding_strategy` to the FSDP wrap in"
    " the script, and `hybrid_shard_degree` here for hybrid sharding.",
    "cpu_offload": "SMP v2 has no such key: pass FSDP's `cpu_offload=CPUOffload(...)` to the wrap"
    " in the script.",
}


class UnknownV2ConfigKey(V2ConfigRule):
    summary = (
        "A key that is none of SMP v2's nine configuration parameters (a typo, or a setting of"
        " something else), or one newer than the job's SMP v2 release; the SageMaker SDK passes"
        " v2 parameters through unchecked."
    )
    fix_availability = FixAvailability.UNSAFE
    tensor_parallelism = TensorParallelism.CONFIGURED
    finding_ranges = {
        f"{history.short} key": (FIRST_V2, history.last_without)
        for history in V2_KEY_HISTORY.values()
    }

    @classmethod
    def versions_table(cls) -> str:
        return versions_table()

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        parameters = view.parameters
        if parameters is None or not parameters.is_dict:
            return
        for key, located in parameters.value.items():
            problem = release_problem(view, key, located)
            if problem is not None:
                yield problem
        unknown = {
            key: None if key in _SCRIPT_SETTINGS else advise(key, V2_KNOWN_KEYS).suggestion
            for key in parameters.value
            if key not in V2_KNOWN_KEYS and key not in V1_ONLY_KEYS  # SMP003 explains v1's
        }
        guesses = list(unknown.values())
        for key, suggestion in unknown.items():
            located = parameters.value[key]
            guess = f"; did you mean `{suggestion}`?" if suggestion is not None else ""
            keys = (
                ""
                if suggestion is not None
                else f" {_SCRIPT_SETTINGS[key]}"
                if key in _SCRIPT_SETTINGS
                else " Its keys are `hybrid_shard_degree`, `sm_activation_offloading`,"
                " `activation_loading_horizon`, `fsdp_cache_flush_warnings`,"
                " `allow_empty_shards`, `tensor_parallel_degree`, `context_parallel_degree`,"
                " `expert_parallel_degree` and `random_seed`."
            )
            unchecked = (
                " The SageMaker SDK passes SMP v2 parameters through unchecked."
                if view.launcher is not None
                else ""
            )
            yield ConfigProblem(
                located,
                f"unknown SMP v2 key `{key}`{guess}",
                Severity.ERROR,
                explanation=(
                    "The setting meant never reaches the library, or the library refuses it when"
                    f" the job starts.{unchecked}{keys}"
                ),
                evidence=(f"`{key}` in {view.where}",),
                fix=rename_fix(located, key, suggestion, parameters)
                if guesses.count(suggestion) == 1
                else None,
            )
