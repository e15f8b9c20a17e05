"""When each SMP v2 configuration key arrived, for a job that runs an older SMP v2 release.

SMP v2's reference lists nine configuration keys without saying when each came. Two came with
a feature of a later release, and the documents date them:

- ``expert_parallel_degree``: the expert parallelism page says the feature needs "SMP v2.3.0
  and later", "SageMaker Python SDK v2.214.4 and later" and "PyTorch v2.2.0 and later". The
  SDK's ``pytorch-smp.json`` agrees: the change that resolves ``framework_version`` 2.2.0 to
  SMP 2.3.0 ("Upgrade smp to version 2.3.0", aws/sagemaker-python-sdk#4560) carries the
  version 2.214.4.dev0, and the official Mixtral example asks for ``sagemaker>=2.215``.
- ``context_parallel_degree``: SMP 2.5.0. The official v2 examples add context parallelism
  (the Llama context parallel notebook, ``tsm.state.context_parallel_degree`` in
  ``shared-scripts/train_lib.py``) with their "TSM 2.5.0 release" update (August 2024); their
  "TSM 2.4.0 release" update of June 2024 has none, and the SDK picks SMP 2.5.0 for
  ``framework_version`` 2.3.1 from v2.231.0 on ("SMP v2.5", aws/sagemaker-python-sdk#4852).

The SMP release notes (the developer guide's ``model-parallel-release-notes``) date both the
same way: v2.3.0 "Added a new core feature, expert parallelism", v2.5.0 "Added support for
Context parallelism".

The other seven keys are in the first release's examples (``hybrid_shard_degree``,
``tensor_parallel_degree``, ``sm_activation_offloading``, ``activation_loading_horizon`` in
``shared-scripts`` of December 2023) or undated (``fsdp_cache_flush_warnings``,
``allow_empty_shards``, ``random_seed``): a key without a documented arrival is taken to be as
old as SMP v2, so that no job is told that a key it has is missing (the rule of
``smpfix.job.key_history`` for SMP v1).

Unlike SMP v1, whose releases replaced each other inside one training image, an SMP v2 image
is picked by the SageMaker Python SDK: a ``framework_version`` names a PyTorch version, and the
SDK resolves it to the newest SMP v2 release it knows for it (``pytorch-smp.json``'s
``version_aliases``). A container that shipped releases on both sides of a key's arrival
therefore runs the newer one with an SDK at least as new as ``sdk``, the one the feature's
documents ask for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

from smpfix.job.versions import Version, text

EXPERT_PARALLELISM_PAGE = (
    'the SMP v2 expert parallelism page ("SMP v2.3.0 and later", "SageMaker Python SDK'
    ' v2.214.4 and later")'
)
CONTEXT_PARALLELISM_EXAMPLES = (
    "the SMP release notes (v2.5.0 adds context parallelism), the official SMP v2 examples"
    " (context parallelism arrives with their SMP 2.5.0 update) and the SageMaker Python SDK's"
    " pytorch-smp.json (SMP 2.5.0 from v2.231.0)"
)


@dataclass(frozen=True)
class V2KeyHistory:
    """``key`` arrived in SMP ``since`` with ``feature``; the SageMaker Python SDK picks a
    release that has it for every ``framework_version`` whose container has one from ``sdk``
    on."""

    key: str
    short: str  # the feature's key in the job facts (``jobfacts.FEATURES``): "EP"
    feature: str
    since: Version
    sdk: Version
    source: str

    @property
    def releases(self) -> str:
        return f"{text(self.since)} or later"

    @property
    def last_without(self) -> Version:
        """The last minor release without the key (2.3.0 -> 2.2)."""
        return (self.since[0], self.since[1] - 1)


V2_KEY_HISTORY: Mapping[str, V2KeyHistory] = {
    history.key: history
    for history in (
        V2KeyHistory(
            "expert_parallel_degree",
            "EP",
            "expert parallelism",
            (2, 3, 0),
            (2, 214, 4),
            EXPERT_PARALLELISM_PAGE,
        ),
        V2KeyHistory(
            "context_parallel_degree",
            "CP",
            "context parallelism",
            (2, 5, 0),
            (2, 231, 0),
            CONTEXT_PARALLELISM_EXAMPLES,
        ),
    )
}


def v2_key_history(key: str) -> Optional[V2KeyHistory]:
    """When ``key`` arrived, or None for a key as old as SMP v2 (or none of its keys)."""
    return V2_KEY_HISTORY.get(key)
