"""When each SMP v1 (PyTorch) configuration key arrived, for a job that runs an older release.

Only the 1.12 schema is published (the 1.12.1 wheel's ``config.yaml``, ``KNOWN_KEYS``). The
releases before it are known from the SageMaker SDK's parameter page
(``doc/api/training/smd_model_parallel_general.rst``), which marks every key added after the
first release with the release it arrived in ("``fp16`` (**smdistributed-modelparallel**>=v1.10)"),
and from the library's release notes in the same repository
(``doc/api/training/smd_model_parallel_release_notes/smd_model_parallel_change_log.rst``). The
library checks every key against its own release's schema at start-up, so a key newer than every
release a job may run stops that job with "Unrecognized config parameter".

Each arrival is the earliest release the documents allow, never later: a key without a
documented arrival is taken to be as old as the library, so an older job is never told that a
key it has is missing. The keys the 1.12 schema holds but the SDK never documented
(``ddp_port``, ``fast_mode``...) have no entry. A documented key that the 1.12 schema lacks
(``deterministic_server``) is known to the releases the page documents it for.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Optional

from smpfix.job.versions import SmpVersion, Version, range_applies, text

PARAMETERS_PAGE = (
    "the SageMaker SDK's parameter page (doc/api/training/smd_model_parallel_general.rst)"
)
RELEASE_NOTES = (
    "the library's release notes in the SageMaker SDK (smd_model_parallel_change_log.rst)"
)


@dataclass(frozen=True)
class KeyHistory:
    """The releases that know ``key``: ``since`` to before ``until`` (None: open)."""

    key: str
    since: Optional[Version]
    until: Optional[Version]
    source: str

    def known_by(self, version: SmpVersion) -> Optional[bool]:
        """True when every release the job may run knows the key, False when none does, None
        when the container shipped releases on both sides."""
        last = None if self.until is None else _before(self.until)
        return range_applies(version.version, version.latest, self.since, last)

    @property
    def releases(self) -> str:
        """``1.6 or later``, ``1.3 to 1.11``: the releases that know the key, for a message."""
        if self.until is None:
            return f"{text(self.since)} or later" if self.since else "every release"
        first = text(self.since) if self.since else "1.0"
        return f"{first} to {text(_before(self.until))}"


def _before(version: Version) -> Version:
    """The last minor release before ``version`` (1.12 -> 1.11), as the range's inclusive end."""
    return (version[0], version[1] - 1)


def _keys(since: Version, source: str, *keys: str) -> Iterator[tuple[str, KeyHistory]]:
    for key in keys:
        yield key, KeyHistory(key, since, None, source)


PYTORCH_KEY_HISTORY: Mapping[str, KeyHistory] = {
    **dict(_keys((1, 3), PARAMETERS_PAGE, "active_microbatches")),
    # Documented for 1.3 and later, accepted by the SDK's validator, refused by the 1.12 wheel.
    "deterministic_server": KeyHistory("deterministic_server", (1, 3), (1, 12), PARAMETERS_PAGE),
    # The page: "``partitions`` for TensorFlow and PyTorch with smdistributed-modelparallel<v1.6,
    # ``pipeline_parallel_degree`` for PyTorch v1.8.1 with smdistributed-modelparallel>=v1.6".
    **dict(
        _keys(
            (1, 6),
            PARAMETERS_PAGE,
            "pipeline_parallel_degree",
            "offload_activations",
            "activation_loading_horizon",
            "tensor_parallel_degree",
            "fp16_params",
            "shard_optimizer_state",
            "prescaled_batch",
            "skip_tracing",
        )
    ),
    **dict(_keys((1, 10), PARAMETERS_PAGE, "fp16")),
    **dict(
        _keys(
            (1, 11),
            PARAMETERS_PAGE,
            "sharded_data_parallel_degree",
            "sdp_reduce_bucket_size",
            "sdp_param_persistence_threshold",
            "sdp_max_live_parameters",
            "sdp_hierarchical_allgather",
            "sdp_gradient_clipping",
        )
    ),
    # Undated on the page; the developer guide says BF16 training "works only when sharded
    # data parallelism is activated", which the release notes date to 1.11: no earlier.
    **dict(_keys((1, 11), RELEASE_NOTES, "bf16")),
}


def key_history(key: str) -> Optional[KeyHistory]:
    return PYTORCH_KEY_HISTORY.get(key)


def absent_from(key: str, version: Optional[SmpVersion]) -> Optional[KeyHistory]:
    """The key's history when some release the job may run does not know it yet (or any more)."""
    history = key_history(key)
    if history is None or version is None:
        return None
    return history if history.known_by(version) is not True else None
