"""A plan as the report renders it: plain numbers and words, nothing of LibCST.

``MemoryPlan`` is what one configuration comes to (the rule's message reads it too);
``PlannedConfiguration`` adds where the configuration is written, for ``smpfix plan``.
Memory is in GiB.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from smpfix.plan.memory import GIB, Estimate
from smpfix.plan.verdict import Verdict


@dataclass(frozen=True)
class MemorySplit:
    model_states: float
    activations: Optional[float]  # None when the sequence length, the batch or the shape is unknown
    other: float  # CUDA context, communication buffers, fragmentation
    total: float

    @classmethod
    def of(cls, found: Estimate) -> MemorySplit:
        activations = found.activations.total / GIB if found.activations is not None else None
        return cls(
            found.model_states.total / GIB, activations, found.buffers / GIB, found.total / GIB
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "model_states": round(self.model_states, 2),
            "activations": round(self.activations, 2) if self.activations is not None else None,
            "other": round(self.other, 2),
            "total": round(self.total, 2),
        }


@dataclass(frozen=True)
class PlannedChange:
    """A change after which the job fits, with its new estimate."""

    change: str
    per_gpu: MemorySplit
    share: float

    def to_json(self) -> dict[str, Any]:
        return {
            "change": self.change,
            "per_gpu_gib": self.per_gpu.to_json(),
            "share_of_gpu": round(self.share, 3),
        }


@dataclass(frozen=True)
class MemoryPlan:
    script: Optional[str]
    instance_type: Optional[str]
    gpu: Optional[str]  # the GPU model, "A100 40GB"
    gpu_memory_gib: Optional[float]
    parameters: Optional[int]
    parameters_source: str
    per_gpu: Optional[MemorySplit]
    verdict: Verdict
    reason: str  # why the verdict is unknown, or on which switches it depends
    assumptions: tuple[str, ...] = ()
    suggestions: tuple[PlannedChange, ...] = ()

    @property
    def fits(self) -> Optional[bool]:
        return self.verdict.fits

    @property
    def share(self) -> Optional[float]:
        if self.per_gpu is None or not self.gpu_memory_gib:
            return None
        return self.per_gpu.total / self.gpu_memory_gib


@dataclass(frozen=True)
class PlannedConfiguration:
    """One configuration of ``smpfix plan``: a launcher's estimator call (``row`` and
    ``column`` of the call; ``cell`` in a notebook), or the declared job for a script."""

    filename: str
    row: Optional[int]
    column: Optional[int]
    plan: MemoryPlan
    cell: Optional[int] = None

    def to_json(self) -> dict[str, Any]:
        plan = self.plan
        location: Optional[dict[str, int]] = None
        if self.row is not None and self.column is not None:
            location = {
                "row": self.row,
                "column": self.column,
                **({"cell": self.cell} if self.cell is not None else {}),
            }
        return {
            "filename": self.filename,
            "location": location,
            "script": plan.script,
            "instance_type": plan.instance_type,
            "gpu": plan.gpu,
            "gpu_memory_gib": round(plan.gpu_memory_gib, 2)
            if plan.gpu_memory_gib is not None
            else None,
            "parameters": {"count": plan.parameters, "source": plan.parameters_source},
            "per_gpu_gib": plan.per_gpu.to_json() if plan.per_gpu is not None else None,
            "share_of_gpu": round(plan.share, 3) if plan.share is not None else None,
            "fits": plan.fits,
            "verdict": plan.verdict.value,
            "reason": plan.reason,
            "assumptions": list(plan.assumptions),
            "suggestions": [change.to_json() for change in plan.suggestions],
        }


@dataclass(frozen=True)
class PlannedOption:
    """One configuration ``smpfix plan --model`` found: in words, its estimate with the band
    (GiB), and the estimator's ``distribution`` argument that sets it."""

    configuration: str
    per_gpu: MemorySplit
    low: float
    high: float
    share: float
    verdict: Verdict
    distribution: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "configuration": self.configuration,
            "per_gpu_gib": self.per_gpu.to_json(),
            "band_gib": [round(self.low, 2), round(self.high, 2)],
            "share_of_gpu": round(self.share, 3),
            "verdict": self.verdict.value,
            "distribution": dict(self.distribution),
        }


@dataclass(frozen=True)
class WhatFits:
    """The answer of ``smpfix plan --model``: the model and cluster asked about, and every
    configuration that fits, best first (``search``)."""

    model: str
    parameters: int
    library: str
    instance_type: str
    gpu: str
    gpu_memory_gib: float
    nodes: int
    seq: Optional[int]
    batch: Optional[int]
    assumptions: tuple[str, ...]
    options: tuple[PlannedOption, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "parameters": self.parameters,
            "library": self.library,
            "instance_type": self.instance_type,
            "gpu": self.gpu,
            "gpu_memory_gib": round(self.gpu_memory_gib, 2),
            "nodes": self.nodes,
            "seq": self.seq,
            "global_batch": self.batch,
            "assumptions": list(self.assumptions),
            "configurations": [option.to_json() for option in self.options],
        }
