"""What fits for this model on this cluster? Every configuration, estimated and ranked.

The ranking follows the order in which the SMP best-practices page ("SageMaker Distributed
Model Parallelism Best Practices", https://docs.aws.amazon.com/sagemaker/latest/dg/
model-parallel-best-practices.html, "Setting Up the Right Configuration for a Given Model")
tells you to go down its list, adding a technique only when the ones before it are not enough:
large GPU instances, sharding the optimizer state, activation checkpointing, tensor parallelism
within a node, pipeline parallelism across nodes, activation offloading. A configuration that
needs a technique further down that list ranks below every one that does without it:

    (offloading, pipeline degree, tensor degree, checkpointing, sharding)

compared in that order, smaller first. Sharding is none, then optimizer state sharding, then
sharded data parallelism (which shards the parameters and gradients as well, SMP v1's
"Sharded Data Parallelism" page); of the sharded-data-parallel degrees that fit the smallest
is kept ("start with the lowest degree to fit your model in the GPU memory", SMP v2's
best-practices page), and for a pipeline the fewest microbatches that fit. "Large GPU instances
first" is the instance type: a launcher's suggestions start with the same job on a type with
more GPU memory (``suggestions``).

SMP v1 and SMP v2 are searched separately, each with its own memory model (``memory`` and
``fsdp``): v1 varies tensor, pipeline and sharded-data-parallel degrees, optimizer state
sharding, checkpointing, offloading and microbatches; v2 varies ``hybrid_shard_degree``,
``tensor_parallel_degree`` and, for a mixture-of-experts model, ``expert_parallel_degree``
with checkpointing and offloading, and never uses v1's model.

Expert parallelism (SMP 2.3.0 and later; the v2 expert parallelism page) is a model-parallel
degree like tensor parallelism, so it ranks with it, after checkpointing: an expert-parallel
configuration comes after every one without it that fits with the same tensor degree. The
degrees tried are those SMP012 and the plan accept: above 1, dividing the GPUs and the model's
experts per layer, never with tensor parallelism, with ``hybrid_shard_degree`` at most the GPUs
over the degree (``fsdp.problems``); and only where the job's release has it
(``expert_parallelism``).

Tensor parallelism is offered only for the model families each library can split: SMP v1's
distributed transformer covers BERT, GPT-2, GPT-J, GPT-Neo, GPT-NeoX, RoBERTa and T5 (the
library's ``torch/nn/huggingface`` modules); SMP v2's ``torch.sagemaker.transform`` covers
GPT-NeoX, Llama and Mistral (v2 tensor parallelism page). The batch is the global batch, the
samples of one optimizer step over the cluster: a configuration whose model replicas cannot
share it evenly is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Optional, Union

from smpfix.job.instances import InstanceType
from smpfix.plan import fsdp, memory
from smpfix.plan.layers import LayerKind
from smpfix.plan.memory import Estimate
from smpfix.plan.models import ModelShape, ParameterCount
from smpfix.plan.setup import Setup, problems
from smpfix.plan.verdict import Verdict, verdict_of

V1_TENSOR_PARALLEL = frozenset({"bert", "gpt2", "gptj", "gpt_neo", "gpt_neox", "roberta", "t5"})
V2_TENSOR_PARALLEL = frozenset({"gpt_neox", "llama"})
_MAX_PIPELINE = 32
FITTING = (Verdict.FITS, Verdict.TIGHT)


@dataclass(frozen=True)
class Workload:
    """The model and what one step trains on. ``batch`` is the global batch (None: unknown,
    only the model states are weighed); ``precision`` the 16-bit type, "fp32" without one."""

    count: ParameterCount
    shape: Optional[ModelShape]
    seq: Optional[int]
    batch: Optional[int]
    precision: str = "bf16"
    flash_attention: bool = False
    optimizer: str = "adam"


@dataclass(frozen=True)
class Cluster:
    instance: InstanceType
    nodes: int

    @property
    def gpus(self) -> int:
        return self.instance.gpus * self.nodes


@dataclass(frozen=True)
class Candidate:
    """One configuration with its estimate. ``setup`` is a v1 ``Setup`` or a v2 ``FsdpSetup``."""

    library: str  # "v1" or "v2"
    setup: Union[Setup, fsdp.FsdpSetup]
    estimate: Estimate
    verdict: Verdict
    processes_per_host: int

    @property
    def rank(self) -> tuple[int, ...]:
        """The best-practices order (module docstring): smaller ranks first."""
        s = self.setup
        if isinstance(s, Setup):
            sharding = 2 if s.sdp > 1 else (1 if s.oss else 0)
            return (
                int(s.offload_activations),
                s.pp,
                s.tp,
                1,
                int(s.activation_checkpointing),
                sharding,
                s.sdp,
                s.microbatches,
            )
        return (
            int(s.offload_activations),
            1,
            s.tp,
            s.ep,
            int(s.activation_checkpointing),
            0 if s.shard == 1 else 2,
            s.shard,
            1,
        )

    def techniques(self) -> str:
        """The configuration in a few words: ``tp 8, OSS, checkpointing``."""
        s = self.setup
        parts = []
        if isinstance(s, Setup):
            if s.tp > 1:
                parts.append(f"tp {s.tp}")
            if s.pp > 1:
                parts.append(f"pp {s.pp} ({s.microbatches} microbatches)")
            if s.sdp > 1:
                parts.append(f"sdp {s.sdp}")
            if s.oss:
                parts.append("OSS")
        else:
            if s.tp > 1:
                parts.append(f"tp {s.tp}")
            if s.ep > 1:
                parts.append(f"ep {s.ep}")
            parts.append(f"shard {s.shard}")
        if s.activation_checkpointing:
            parts.append("checkpointing")
        if s.offload_activations:
            parts.append("offloading")
        return ", ".join(parts) or "data parallelism only"

    def distribution(self) -> dict[str, Any]:
        """The estimator's ``distribution`` argument for this configuration, as the SageMaker
        Python SDK takes it (``modelparallel`` parameters and the MPI or torchrun launcher)."""
        s = self.setup
        if isinstance(s, fsdp.FsdpSetup):
            return {
                "torch_distributed": {"enabled": True},
                "smdistributed": {
                    "modelparallel": {
                        "enabled": True,
                        "parameters": {
                            "hybrid_shard_degree": s.shard,
                            "tensor_parallel_degree": s.tp,
                            **({"expert_parallel_degree": s.ep} if s.ep > 1 else {}),
                            **({"sm_activation_offloading": True} if s.offload_activations else {}),
                        },
                    }
                },
            }
        parameters: dict[str, Any] = {
            "tensor_parallel_degree": s.tp,
            "pipeline_parallel_degree": s.pp,
            "microbatches": s.microbatches,
            "ddp": True,
        }
        if s.sdp > 1:
            parameters["sharded_data_parallel_degree"] = s.sdp
        if s.oss:
            parameters["shard_optimizer_state"] = True
        if s.tp > 1:
            parameters["prescaled_batch"] = True
        if s.offload_activations:
            parameters["offload_activations"] = True
        if s.precision in ("fp16", "bf16"):
            parameters[s.precision] = True
        return {
            "smdistributed": {"modelparallel": {"enabled": True, "parameters": parameters}},
            "mpi": {"enabled": True, "processes_per_host": self.processes_per_host},
        }


def search(
    workload: Workload,
    cluster: Cluster,
    library: str = "v1",
    base: Union[Setup, fsdp.FsdpSetup, None] = None,
    expert_parallelism: bool = True,
) -> tuple[Candidate, ...]:
    """The configurations that fit (``fits`` or ``fits, tight``), best first. ``base`` is a
    job whose other settings (precision, checkpointing strategy, buffers) the configurations
    keep; it must be of the library searched. ``expert_parallelism``: the SMP v2 release the
    configurations are for has it (a job on an older one is offered none)."""
    if library == "v2":
        assert base is None or isinstance(base, fsdp.FsdpSetup)
        found = _v2(workload, cluster, base, expert_parallelism)
    else:
        assert base is None or isinstance(base, Setup)
        found = _v1(workload, cluster, base)
    return tuple(sorted(found, key=lambda candidate: candidate.rank))


def _powers_of_two(limit: int) -> list[int]:
    found, degree = [], 1
    while degree <= limit:
        found.append(degree)
        degree *= 2
    return found


def _replica_batch(workload: Workload, replicas: int) -> Optional[int]:
    """The samples one model replica takes of the global batch; 0 when they do not divide."""
    if workload.batch is None:
        return None
    if workload.batch % replicas:
        return 0
    return workload.batch // replicas


def _v1_layers(shape: Optional[ModelShape], tp: int, flash: bool) -> LayerKind:
    if shape is None or shape.family == "custom" or tp > 1:
        return LayerKind.LIBRARY
    if flash and shape.family in V1_TENSOR_PARALLEL:
        return LayerKind.LIBRARY
    return LayerKind.HUGGING_FACE


def _v1_layouts(
    workload: Workload, cluster: Cluster, base: Optional[Setup]
) -> Iterator[tuple[int, int]]:
    """(tensor degree, pipeline degree) pairs the library accepts for the model: tensor
    parallelism for the families the library splits, or for a job that already uses it (its
    model is evidently built for it)."""
    shape = workload.shape
    family = shape.family if shape is not None else ""
    depth = workload.count.layers or (shape.depth if shape is not None else 0)
    world = cluster.gpus
    splits = family in V1_TENSOR_PARALLEL or (base is not None and base.tp > 1)
    tensor = _powers_of_two(cluster.instance.gpus) if splits else [1]
    for tp in tensor:
        if world % tp:
            continue
        for pp in _powers_of_two(min(_MAX_PIPELINE, world // tp)):
            if pp > 1 and (world // tp) % pp == 0 and (depth == 0 or pp <= depth):
                yield tp, pp
            elif pp == 1:
                yield tp, pp


def _v1(workload: Workload, cluster: Cluster, base: Optional[Setup]) -> list[Candidate]:
    """One configuration per layout (tensor and pipeline degrees, checkpointing): the first
    that fits of no sharding, optimizer state sharding and the smallest sharded-data-parallel
    degree, without offloading, then with it. A configuration that adds a technique to one
    that already fits is left out: "if a model can fit well using a subset of the library's
    features, adding more [...] does not usually improve performance" (best-practices page)."""
    world = cluster.gpus
    flash = workload.flash_attention and cluster.instance.bf16
    template = base or Setup(
        world=world,
        seq_len=workload.seq,
        precision=workload.precision,
        optimizer=workload.optimizer,
        flash_attention=flash,
    )
    template = replace(template, world=world)
    found: list[Candidate] = []
    for tp, pp in _v1_layouts(workload, cluster, base):
        rdp = world // (tp * pp)
        group_batch = _replica_batch(workload, rdp)
        if group_batch == 0:
            continue
        for checkpointing in (False, True):
            layout = replace(
                template,
                tp=tp,
                pp=pp,
                batch=group_batch,
                prescaled_batch=tp > 1,
                activation_checkpointing=checkpointing,
                offload_activations=False,
                layers=_v1_layers(workload.shape, tp, template.flash_attention),
                sdp=1,
                oss=False,
                microbatches=_kept_microbatches(template, pp, group_batch),
                active_microbatches=None,
            )
            offloads = (False, True) if checkpointing else (False,)
            for offload in offloads:
                chosen = _v1_sharding(
                    workload, cluster, replace(layout, offload_activations=offload), rdp
                )
                if chosen is not None:
                    found.append(chosen)
                    break
    return found


def _kept_microbatches(template: Setup, pp: int, group_batch: Optional[int]) -> int:
    """Without a pipeline, the job's own microbatches when they still divide its batch."""
    kept = template.microbatches
    if pp == 1 and kept > 1 and (group_batch is None or group_batch % kept == 0):
        return kept
    return 1


def _v1_sharding(
    workload: Workload, cluster: Cluster, layout: Setup, rdp: int
) -> Optional[Candidate]:
    """The first that fits of no sharding, optimizer state sharding and the smallest
    sharded-data-parallel degree."""
    options = [layout]
    if layout.dp > 1:
        options.append(replace(layout, oss=True))
    if layout.pp == 1:
        smddp = _smddp(layout, cluster)
        options += [
            replace(layout, sdp=degree, smddp_collectives=smddp)
            for degree in _divisors(rdp)
            if degree > 1
        ]
    for setup in options:
        found = _v1_microbatches(workload, cluster, setup)
        if found is not None:
            return found
    return None


def _smddp(layout: Setup, cluster: Cluster) -> bool:
    return layout.tp == 1 and cluster.instance.efa and cluster.nodes > 1


def _v1_microbatches(workload: Workload, cluster: Cluster, setup: Setup) -> Optional[Candidate]:
    """The setup with the fewest microbatches that fits (pipelines only), or None."""
    counts = [setup.microbatches]
    if setup.pp > 1:
        counts = [setup.pp * k for k in (1, 2, 4, 8)]
    for microbatches in counts:
        candidate = replace(setup, microbatches=microbatches)
        if problems(candidate):
            continue
        found = memory.estimate(
            workload.count, workload.shape, candidate, cluster.instance.gpu_memory_mib
        )
        verdict = verdict_of(found)
        if verdict in FITTING or (verdict is Verdict.UNKNOWN and workload.batch is None):
            return Candidate("v1", candidate, found, verdict, cluster.instance.gpus)
    return None


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0] if n <= 1 << 16 else []


def _v2(
    workload: Workload,
    cluster: Cluster,
    base: Optional[fsdp.FsdpSetup],
    expert_parallelism: bool,
) -> list[Candidate]:
    found: list[Candidate] = []
    world = cluster.gpus
    for tp, ep in _v2_layouts(workload, cluster, expert_parallelism):
        ranks = world // tp
        # Expert parallelism splits the experts, not the data: each tensor-parallel group
        # still takes one share of the batch (the example's ``dp_rank``).
        samples = _replica_batch(workload, ranks)
        if samples == 0:
            continue
        for checkpointing in (False, True):
            for offload in (False, True) if checkpointing else (False,):
                chosen = _v2_sharding(
                    workload, cluster, base, (tp, ep), ranks, samples, checkpointing, offload
                )
                if chosen is not None:
                    found.append(chosen)
                    break
    return found


def _v2_layouts(
    workload: Workload, cluster: Cluster, expert_parallelism: bool
) -> Iterator[tuple[int, int]]:
    """(tensor degree, expert degree) pairs: tensor parallelism for the models
    ``torch.sagemaker.transform`` splits, expert parallelism (never with it) for a model with
    experts whose count the degree divides."""
    shape = workload.shape
    family = shape.family if shape is not None else ""
    world = cluster.gpus
    tensor = _powers_of_two(cluster.instance.gpus) if family in V2_TENSOR_PARALLEL else [1]
    for tp in tensor:
        if world % tp == 0:
            yield tp, 1
    experts = shape.experts if shape is not None else 0
    if expert_parallelism and experts > 1:
        for ep in _divisors(world):
            if ep > 1 and experts % ep == 0:
                yield 1, ep


def _v2_sharding(
    workload: Workload,
    cluster: Cluster,
    base: Optional[fsdp.FsdpSetup],
    layout: tuple[int, int],
    ranks: int,
    samples: Optional[int],
    checkpointing: bool,
    offload: bool,
) -> Optional[Candidate]:
    """The smallest ``hybrid_shard_degree`` that fits the layout (tensor and expert degrees),
    or None."""
    tp, ep = layout
    family = workload.shape.family if workload.shape is not None else ""
    template = base or fsdp.FsdpSetup(
        world=cluster.gpus,
        shard=1,
        seq_len=workload.seq,
        precision=workload.precision,
        optimizer=workload.optimizer,
        flash_attention=workload.flash_attention and cluster.instance.bf16,
    )
    for shard in _divisors(ranks):
        setup = replace(
            template,
            world=cluster.gpus,
            shard=shard,
            tp=tp,
            ep=ep,
            experts=workload.shape.experts if workload.shape is not None else 0,
            batch=samples,
            zero2=False,
            activation_checkpointing=checkpointing,
            offload_activations=offload,
            layers=LayerKind.LIBRARY
            if tp > 1 or family in ("", "custom")
            else LayerKind.HUGGING_FACE,
        )
        if fsdp.problems(setup):
            continue
        estimated = fsdp.estimate(
            workload.count, workload.shape, setup, cluster.instance.gpu_memory_mib
        )
        verdict = verdict_of(estimated)
        if verdict in FITTING or (verdict is Verdict.UNKNOWN and workload.batch is None):
            return Candidate("v2", setup, estimated, verdict, cluster.instance.gpus)
    return None
