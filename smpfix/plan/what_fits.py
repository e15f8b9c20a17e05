"""``smpfix plan --model``: what fits for a model on a cluster, with no launcher to read.

The question's defaults, each said in the answer's assumptions: the sequence is the model's
maximum positions (2048 when it has none), the global batch one sample per GPU, the
precision bf16 on GPUs that have it and fp16 otherwise, Adam. Flash attention is on where the
library runs its own attention kernels on an Ampere or newer GPU (SMP v1's distributed
transformer for the families it supports, SMP v2) unless ``--no-flash-attention``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from smpfix.job.instances import InstanceType
from smpfix.plan.memory import GIB
from smpfix.plan.models import ModelShape, ParameterCount
from smpfix.plan.results import MemorySplit, PlannedOption, WhatFits
from smpfix.plan.search import V1_TENSOR_PARALLEL, Cluster, Workload, search

DEFAULT_SEQ = 2048


@dataclass(frozen=True)
class ChosenModel:
    """The model asked about (``model_lookup`` finds it): its count, shape and where the shape
    came from, in words."""

    count: ParameterCount
    shape: ModelShape
    source: str


@dataclass(frozen=True)
class Question:
    model: ChosenModel
    instance: InstanceType
    nodes: int
    seq: Optional[int] = None
    batch: Optional[int] = None
    library: str = "v1"
    flash_attention: Optional[bool] = None  # None: the default above


def answer(question: Question) -> WhatFits:
    model, instance = question.model, question.instance
    notes = [f"model: {model.source}"]
    seq = question.seq or model.shape.max_positions or DEFAULT_SEQ
    if question.seq is None:
        notes.append(f"sequence length {seq}: the model's maximum (set --seq)")
    gpus = instance.gpus * question.nodes
    batch = question.batch if question.batch is not None else gpus
    if question.batch is None:
        notes.append(f"global batch {batch}: one sample per GPU (set --batch)")
    precision = "bf16" if instance.bf16 else "fp16"
    if question.library == "v2":
        notes.append(
            f"{precision} FSDP mixed precision with AdamW (16 bytes per parameter: fp32"
            " parameter, gradient and optimizer state, divided by the sharding degree)"
        )
    else:
        notes.append(f"{precision} mixed precision with Adam (20 bytes per parameter unsharded)")
    flash = question.flash_attention
    if flash is None:
        flash = instance.bf16 and (
            question.library == "v2" or model.shape.family in V1_TENSOR_PARALLEL
        )
    notes.append(
        "flash attention "
        + ("on" if flash and instance.bf16 else "off")
        + ("" if instance.bf16 else f" ({instance.gpu_model} has no flash attention kernels)")
    )
    if question.library == "v2":
        notes.append(
            "SMP v2 (PyTorch FSDP) with its own memory model; tensor parallelism only for the"
            " models torch.sagemaker.transform supports"
        )
        if model.shape.experts > 1:
            notes.append(
                f"expert parallelism (SMP 2.3.0 and later) for the model's {model.shape.experts}"
                " experts per layer: degrees dividing the GPUs and the experts, without tensor"
                " parallelism, hybrid_shard_degree at most the GPUs over the degree"
            )
    else:
        notes.append(
            "SMP v1; tensor parallelism only for the families its distributed transformer"
            " supports, with prescaled_batch and the model built inside"
            " `smp.model_creation(tensor_parallelism=True)`"
        )
    workload = Workload(model.count, model.shape, seq, batch, precision, flash)
    found = search(workload, Cluster(instance, question.nodes), question.library)
    options = tuple(
        PlannedOption(
            candidate.techniques(),
            MemorySplit.of(candidate.estimate),
            candidate.estimate.low / GIB,
            candidate.estimate.high / GIB,
            candidate.estimate.share,
            candidate.verdict,
            candidate.distribution(),
        )
        for candidate in found
    )
    return WhatFits(
        model=model.source,
        parameters=model.count.total,
        library=question.library,
        instance_type=instance.name,
        gpu=instance.gpu_model,
        gpu_memory_gib=instance.gpu_memory_mib / 1024,
        nodes=question.nodes,
        seq=seq,
        batch=batch,
        assumptions=(
            *notes,
            "ranked in the order of the SMP best-practices page; every approximation and"
            " error band is listed in docs/plan.md",
        ),
        options=options,
    )
