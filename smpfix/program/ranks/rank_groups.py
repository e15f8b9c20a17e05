"""Which ranks a rank guard lets through, and which collectives it therefore cuts short.

A rank lives at coordinates (pipeline stage ``pp``, tensor-parallel slot ``tp``, model
replica ``rdp``); every rank function reads some of them (developer guide, ranking
mechanism: pipeline peers share ``dp_rank`` and ``tp_rank``, tensor-parallel peers share
only ``rdp_rank``). A collective over a communication group is safe under a guard exactly
when the guard reads only coordinates that the members of each group share: then a group is
either wholly inside the guard or wholly outside. ``if smp.pp_rank() == 0: smp.dp_barrier()``
is fine (one DP group per stage); ``if smp.rank() == 0: smp.barrier()`` hangs every other rank.

A coordinate whose parallelism is off has a single value and restricts nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

from smpfix.job.jobfacts import FeatureState, JobFacts, Tri

# What each rank function depends on.
GUARD_COORDINATES: dict[str, frozenset[str]] = {
    "rank": frozenset({"pp", "tp", "rdp"}),
    "local_rank": frozenset({"pp", "tp", "rdp"}),
    "mp_rank": frozenset({"pp", "tp"}),
    "pp_rank": frozenset({"pp"}),
    "tp_rank": frozenset({"tp"}),
    "dp_rank": frozenset({"tp", "rdp"}),
    "rdp_rank": frozenset({"rdp"}),
}

# What the members of one group of each kind have in common.
SHARED_COORDINATES: dict[str, frozenset[str]] = {
    "WORLD": frozenset(),
    "MP_GROUP": frozenset({"rdp"}),
    "PP_GROUP": frozenset({"tp", "rdp"}),
    "TP_GROUP": frozenset({"pp", "rdp"}),
    "DP_GROUP": frozenset({"pp"}),
    "RDP_GROUP": frozenset({"pp", "tp"}),
}

GROUP_WORDS = {
    "WORLD": "all ranks",
    "MP_GROUP": "the model-parallel group (the tensor- and pipeline-parallel peers of one replica)",
    "PP_GROUP": "the pipeline-parallel group",
    "TP_GROUP": "the tensor-parallel group",
    "DP_GROUP": "the data-parallel group",
    "RDP_GROUP": "the reduced data-parallel group",
}

_FEATURE_OF = {"pp": "PP", "tp": "TP"}


def group_constant(member: Optional[str]) -> Optional[str]:
    """``"MP_GROUP"`` for ``smp.MP_GROUP`` or ``smp.CommGroup.MP_GROUP`` (library members)."""
    if member is None:
        return None
    name = member.rsplit(".", 1)[-1]
    return name if name in SHARED_COORDINATES else None


@dataclass(frozen=True)
class Cut:
    """What a guard cuts when it restricts coordinates that the group's members do not share.

    ``definite`` when one of those coordinates certainly varies (a replica index, or a
    parallelism that is on); otherwise each depends on a parallelism smpfix cannot see
    (``states``).
    """

    definite: bool
    states: tuple[FeatureState, ...]

    def condition(self) -> str:
        """ "" when definite, else "if pipeline parallelism is enabled" (or several)."""
        if self.definite:
            return ""
        titles = [state.feature.title for state in self.states if state.state is Tri.UNKNOWN]
        return "if " + " or ".join(titles) + " is enabled"


def cut(guard_functions: Iterable[str], group: str, job: JobFacts) -> Optional[Cut]:
    """What guarding a collective over ``group`` by these rank functions cuts; None if nothing."""
    restricted: set[str] = set()
    for function in guard_functions:
        restricted |= GUARD_COORDINATES.get(function, frozenset())
    remaining: set[str] = set()
    states: list[FeatureState] = []
    definite = False
    for coordinate in sorted(restricted - SHARED_COORDINATES[group]):
        feature = _FEATURE_OF.get(coordinate)
        if feature is None:
            remaining.add(coordinate)
            definite = True
            continue
        state = job.feature(feature)
        if state.state is Tri.OFF:
            continue
        remaining.add(coordinate)
        states.append(state)
        definite = definite or state.state is Tri.ON
    if not remaining:
        return None
    return Cut(definite, tuple(states))
