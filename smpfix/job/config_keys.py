"""Which keys a model-parallel configuration may hold, and what to tell someone who wrote another.

The library (SMP v1) rejects any ``parameters`` key outside its schema at start-up; the
SageMaker SDK reads only a few keys of the ``mpi`` and ``modelparallel`` dicts and silently
ignores the rest. Some unknown keys are not typos but settings from somewhere else (a
documented key the library rejects, a ``DistributedModel`` argument, a key of SMP v2): for
those the advice says what they are instead of guessing a neighbour that happens to look
alike; a PyTorch key in a TensorFlow configuration is explained as one. Shared by SMP812
and the validation of ``[tool.smpfix.job]`` and ``--job`` (``smpfix.engine.config``), so a
key is explained the same way wherever it is written. Imports nothing heavy: the CLI
validates its configuration before it loads LibCST.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Optional

from smpfix.job.jobfacts import KNOWN_KEYS, TF_KNOWN_KEYS, normalize_key
from smpfix.job.versions import V2_ONLY_KEYS

# The oldest library release whose configuration schema is published (the 1.12.1 wheel's
# ``config.yaml``, which ``KNOWN_KEYS`` and the value types follow). Older releases' schemas are
# not: a key or type the 1.12 schema refuses may have been accepted there.
OLDEST_PUBLISHED_SCHEMA = (1, 12)
# Explained keys that an older release may still have accepted: documented, but refused by 1.12.
# Every other explained key is known to be no key of that flavour in any release.
DOCUMENTED_BEFORE_1_12 = frozenset({"deterministic_server"})

# The keys the SageMaker SDK reads from ``distribution["mpi"]`` (estimator
# ``_distribution_configuration``); anything else is dropped without a word.
MPI_KEYS = frozenset({"enabled", "processes_per_host", "custom_mpi_options"})
# ``distribution["smdistributed"]["modelparallel"]``: ``get_mp_parameters`` reads these two.
MODELPARALLEL_KEYS = frozenset({"enabled", "parameters"})
# ``distribution["smdistributed"]``: the strategies ``validate_smdistributed`` accepts.
SMDISTRIBUTED_KEYS = frozenset({"modelparallel", "dataparallel"})

_SMP_V2 = (
    "is a setting of SMP v2 (`torch.sagemaker`), a different library with a different API; SMP v1 "
    "(`smdistributed.modelparallel`) has no such setting"
)

# Settings of SMP v2 (``torch.sagemaker``) that SMP v1 does not have (``versions.V2_ONLY_KEYS``).
V2_KEYS = V2_ONLY_KEYS

# Keys people write into SMP v1 parameters that are not typos of a v1 key (SMP812's page).
EXPLAINED: Mapping[str, str] = {
    "deterministic_server": (
        "is documented (SMP v1.3 and later) and the SageMaker SDK's validator accepts it, but"
        " the 1.12 library's schema has no such key and refuses it; remove it"
    ),
    "trace_device": (
        'is an argument of `smp.DistributedModel(model, trace_device="cpu")`, not a'
        " configuration key; pass it there"
    ),
    "model_parameters": (
        "is a setting of smpfix (`--job model_parameters=...` or `[tool.smpfix.job]`), which"
        " gives its memory plan the model's size; the library has no such key: remove it from"
        " the library's parameters"
    ),
    "xla": (
        "is a setting of the TensorFlow flavour (`smdistributed.modelparallel.tensorflow`); the"
        " PyTorch library has no such key. Remove it"
    ),
    "activation_checkpointing": (
        "is not a configuration key: activation checkpointing is turned on in the script with "
        "`smp.set_activation_checkpointing(module)` after `smp.DistributedModel`"
    ),
    **{key: _SMP_V2 for key in V2_KEYS},
}


_NOT_IN_TENSORFLOW = (
    "is not available in the TensorFlow flavour: TensorFlow containers ship SMP 1.0 to 1.4.0,"
    " and the key belongs to the PyTorch library (SMP 1.6 or later)"
)

# Keys of the PyTorch library written into a TensorFlow configuration (``smp.init`` dict or a
# TensorFlow launcher). The TensorFlow library is SMP 1.0-1.4.0; anything newer cannot exist there.
TF_EXPLAINED: Mapping[str, str] = {
    "pipeline_parallel_degree": (
        "is the PyTorch name of the pipeline degree (SMP 1.6 and later); the TensorFlow flavour"
        " (SMP 1.0 to 1.4.0) calls it `partitions`"
    ),
    "tensor_parallel_degree": (
        "is tensor parallelism, which exists only in the PyTorch library (SMP 1.6 and later)"
    ),
    "ddp_dist_backend": (
        "configures PyTorch DistributedDataParallel (SMP 1.13 and later), which the TensorFlow"
        " flavour does not have"
    ),
    **{
        key: _NOT_IN_TENSORFLOW
        for key in (
            "fp16",
            "fp16_params",
            "bf16",
            "prescaled_batch",
            "shard_optimizer_state",
            "skip_tracing",
            "offload_activations",
            "activation_loading_horizon",
            "_shard_offloaded_activations",
            "task_level_activation_loading_horizon",
            "sharded_data_parallel_degree",
            "sdp_reduce_bucket_size",
            "sdp_param_persistence_threshold",
            "sdp_max_live_parameters",
            "sdp_hierarchical_allgather",
            "sdp_gradient_clipping",
            "_sharded_data_parallelism_config",
            "tensor_parallel_seed",
            "delayed_parameter_initialization",
            "fast_mode",
            "static_mode",
            "herring",
            "_match_weights",
            "_fp32_grad_accumulation",
            "checkpoint_attentions",
        )
    },
}

# Keys the TensorFlow flavour's library may accept (the SageMaker SDK validates them, and the
# flavours share one schema file) but that only the PyTorch library acts on (SDK parameters
# page: "PyTorch-specific"): a warning, not a start-up failure.
TF_IGNORED: Mapping[str, str] = {
    "ddp": (
        "is PyTorch DistributedDataParallel; data parallelism in the TensorFlow flavour is"
        ' Horovod (`"horovod": True`)'
    ),
    "ddp_port": (
        "configures PyTorch DistributedDataParallel, which the TensorFlow flavour does not have"
    ),
    "memory_weight": (
        "is a setting of PyTorch's automatic partitioning; the TensorFlow flavour does not use it"
    ),
    "active_microbatches": (
        "is documented for PyTorch only; the TensorFlow flavour does not use it"
    ),
    "deterministic_server": (
        "is documented for PyTorch only; the TensorFlow flavour does not use it"
    ),
}


@dataclass(frozen=True)
class KeyAdvice:
    """What to say about an unknown key: the known key it probably misspells, or what it is."""

    suggestion: Optional[str] = None
    explanation: Optional[str] = None

    def sentence(self, key: str) -> str:
        """One sentence for a message (empty when there is nothing to add)."""
        if self.explanation is not None:
            return f"`{key}` {self.explanation}."
        if self.suggestion is not None:
            return f"Did you mean `{self.suggestion}`?"
        return ""


def advise(key: str, known: frozenset[str] = KNOWN_KEYS) -> KeyAdvice:
    """Advice for ``key``, which is not in ``known``.

    Explanations exist only for library parameters (``known`` is a flavour's schema); a close
    match is suggested only when it is close enough that a rename is a plausible fix (difflib
    ratio 0.6).
    """
    if known == KNOWN_KEYS and key in EXPLAINED:
        return KeyAdvice(explanation=EXPLAINED[key])
    if known == TF_KNOWN_KEYS and key in TF_EXPLAINED:
        # The one PyTorch key with a TensorFlow twin: renaming it is the fix.
        twin = "partitions" if key == "pipeline_parallel_degree" else None
        return KeyAdvice(suggestion=twin, explanation=TF_EXPLAINED[key])
    matches = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return KeyAdvice(suggestion=matches[0] if matches else None)


def misspelled(keys: Iterable[str], known: frozenset[str] = KNOWN_KEYS) -> frozenset[str]:
    """The ``known`` keys that unknown ``keys`` probably misspell (normalized: ``partitons`` ->
    ``pipeline_parallel_degree``). SMP812 reports the misspelling; every other reader treats the
    key meant as unknown rather than as left out (its default), so one mistake is one finding."""
    return frozenset(
        normalize_key(advice.suggestion)
        for key in keys
        if key not in known and key not in EXPLAINED
        for advice in (advise(key, known),)
        if advice.suggestion is not None
    )


def misspelling_of(written: Iterable[object], meant: str, known: frozenset[str]) -> Optional[str]:
    """A key among ``written`` that SMP812 reports as a misspelling of ``meant`` (``enable`` for
    ``enabled`` among the ``known`` keys of an ``mpi`` or ``modelparallel`` dict), or None."""
    for key in written:
        if isinstance(key, str) and key not in known and advise(key, known).suggestion == meant:
            return key
    return None
