"""The verdict: fits, fits tightly, may not fit, does not fit, depends, or unknown.

An estimate has a band (``memory.Estimate.low``/``high``) and the verdict weighs the GPU's
memory against all of it: "fits" when even the high end is under the GPU and the estimate
under ``TIGHT_SHARE`` of it; "fits, tight" when the estimate is under the GPU but the high end
or the estimate's share is not; "may not fit" when the estimate is over the GPU but the low end
is not; "does not fit" only when even the low end is over the GPU. A documented working
configuration that the estimate puts a few percent over the GPU is therefore "may not fit",
never "does not fit", and SMP831 reports only "does not fit".

A switch smpfix cannot resolve (``flash_attention=args.flash`` with no readable default) is
never guessed: the setup is estimated with it on and with it off, and the verdict is "fits"
only if the job fits either way, "does not fit" only if it fits neither way, and "depends"
otherwise. The GPT-NeoX-20B reference rows show why: they fit with flash attention and not
without it, and the seed table does not say which was used.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Optional

from smpfix.plan.memory import Estimate, estimate
from smpfix.plan.models import ModelShape, ParameterCount
from smpfix.plan.setup import Setup

# Above this share of the GPU a fitting job is "tight": expect to tune the batch or buffers.
TIGHT_SHARE = 0.90
# The switches a plan may leave unresolved, as ``Setup`` fields, with their two values.
SWITCHES: Mapping[str, tuple[Any, Any]] = {
    "activation_checkpointing": (False, True),
    "offload_activations": (False, True),
    "flash_attention": (False, True),
    "oss": (False, True),
    "prescaled_batch": (False, True),
    "precision": ("fp16", "fp32"),
}


class Verdict(str, enum.Enum):
    FITS = "fits"
    TIGHT = "fits, tight"
    MAY_NOT_FIT = "may not fit"
    DOES_NOT_FIT = "does not fit"
    DEPENDS = "depends"
    UNKNOWN = "unknown"

    @property
    def fits(self) -> Optional[bool]:
        """The JSON ``fits``: true, false, or null when the estimate cannot say."""
        return {Verdict.FITS: True, Verdict.TIGHT: True, Verdict.DOES_NOT_FIT: False}.get(self)


def verdict_of(found: Estimate) -> Verdict:
    """The verdict of one estimate by its band (see the module docstring). Without activations
    the estimate is a lower bound: "does not fit" when its low end is over the GPU, else
    unknown."""
    gpu = found.gpu_bytes
    if found.low > gpu:
        return Verdict.DOES_NOT_FIT
    if not found.complete:
        return Verdict.UNKNOWN
    if found.total > gpu:
        return Verdict.MAY_NOT_FIT
    if found.high > gpu or found.share > TIGHT_SHARE:
        return Verdict.TIGHT
    return Verdict.FITS


@dataclass(frozen=True)
class Bracket:
    """The lightest and heaviest estimates over the unresolved switches."""

    best: Estimate
    worst: Estimate
    worst_setup: Setup
    unresolved: tuple[str, ...]

    @property
    def verdict(self) -> Verdict:
        return combined(self.best, self.worst)


def combined(best: Estimate, worst: Estimate) -> Verdict:
    """The verdict over the lightest and heaviest estimates of a job (see the module docstring)."""
    heaviest = verdict_of(worst)
    if heaviest in (Verdict.FITS, Verdict.TIGHT):
        return heaviest
    lightest = verdict_of(best)
    if lightest in (Verdict.DOES_NOT_FIT, Verdict.MAY_NOT_FIT):
        return lightest
    if heaviest is not Verdict.UNKNOWN and lightest is not Verdict.UNKNOWN:
        return Verdict.DEPENDS
    return Verdict.UNKNOWN


def bracket(
    count: ParameterCount,
    shape: Optional[ModelShape],
    setup: Setup,
    gpu_memory_mib: int,
    unresolved: Sequence[str] = (),
) -> Bracket:
    """Estimates over every combination of the ``unresolved`` switches (at most 2**6)."""
    for name in unresolved:
        if name not in SWITCHES:
            raise ValueError(f"{name!r} is not a switch")
    results: list[tuple[Estimate, Setup]] = []
    for mask in range(1 << len(unresolved)):
        values = {name: SWITCHES[name][mask >> i & 1] for i, name in enumerate(unresolved)}
        candidate = replace(setup, **values)
        results.append((estimate(count, shape, candidate, gpu_memory_mib), candidate))
    best = min(results, key=lambda pair: pair[0].total)
    worst = max(results, key=lambda pair: pair[0].total)
    return Bracket(best[0], worst[0], worst[1], tuple(unresolved))
