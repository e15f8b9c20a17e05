"""SMP012: SMP v2 degrees that the job's GPUs cannot hold."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

from smpfix.base.findings import Severity
from smpfix.rules.config_rule import ConfigProblem, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.smp_v2._config import V2ConfigRule


class V2DegreesDoNotFitCluster(V2ConfigRule):
    summary = (
        "An SMP v2 degree larger than the job's GPUs allow: a tensor, context or expert parallel"
        " degree above the world size, a `hybrid_shard_degree` above the GPUs left per tensor or"
        " expert parallel rank, a tensor, context or expert parallel degree that does not divide"
        " the GPUs, a `context_parallel_degree` above `hybrid_shard_degree`, expert and tensor"
        " parallelism together; a tensor parallel group wider than a node is a hint."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        world = _world(view)
        tp = view.int_value("tensor_parallel_degree")
        if world is not None:
            for key in (
                "tensor_parallel_degree",
                "context_parallel_degree",
                "expert_parallel_degree",
            ):
                degree = view.int_value(key)
                if degree is not None and degree > world:
                    yield ConfigProblem(
                        view.located(key),
                        f"`{key}` is {degree}, above the job's {world} GPUs: SMP cannot build its"
                        " groups",
                        Severity.ERROR,
                        explanation=(
                            "SMP v2 takes a degree between 1 and the world size, so the job fails"
                            f" when SMP builds its process groups. Lower `{key}` to {world} or"
                            " less, or raise `instance_count`."
                        ),
                        evidence=(f"the job has {_gpus(view, world)}",),
                    )
        context = view.int_value("context_parallel_degree")
        for key, page in _DIVIDE_THE_CLUSTER.items():
            degree = view.int_value(key)
            if world is not None and degree is not None and 1 < degree <= world and world % degree:
                yield ConfigProblem(
                    view.located(key),
                    f"`{key}` {degree} does not divide the job's {world} GPUs",
                    Severity.ERROR,
                    explanation=(
                        "SMP v2 asks for a degree that evenly divides the number of GPUs in the"
                        f" cluster ({page}), or it cannot split the GPUs into equal groups. Use"
                        f" a divisor of {world}."
                    ),
                    evidence=(f"the job has {_gpus(view, world)}",),
                )
        instance = view.instance
        if (
            world is not None
            and instance is not None
            and tp is not None
            and instance.gpus < tp <= world
            and world % tp == 0
        ):
            yield ConfigProblem(
                view.located("tensor_parallel_degree"),
                f"`tensor_parallel_degree` {tp} spans nodes of {instance.gpus} GPUs: every layer"
                " communicates over the network",
                Severity.HINT,
                explanation=(
                    "Tensor parallelism exchanges activations inside every layer, forward and"
                    " backward; a group wider than one instance runs those collectives over EFA"
                    " instead of NVLink, which slows every step. The tensor parallelism page"
                    f" picks degrees within an instance; use {instance.gpus} or less and shard"
                    " across nodes with `hybrid_shard_degree`."
                ),
                evidence=(f"the job has {_gpus(view, world)}",),
            )
        ep = view.int_value("expert_parallel_degree")
        if tp is not None and ep is not None and tp > 1 and ep > 1:
            yield ConfigProblem(
                view.located("expert_parallel_degree"),
                f"`expert_parallel_degree` {ep} with `tensor_parallel_degree` {tp}: SMP v2"
                " cannot combine them",
                Severity.ERROR,
                explanation=(
                    'The expert parallelism page says expert parallelism "is currently not'
                    ' compatible with tensor parallelism"; it combines with hybrid sharded data'
                    " parallelism. Set `tensor_parallel_degree` to 1 and shard the rest with"
                    " `hybrid_shard_degree`, or drop expert parallelism."
                ),
            )
        shard = view.int_value("hybrid_shard_degree")
        split = _split(tp, ep)
        if world is not None and shard is not None and split is not None and split[1] <= world:
            name, degree = split
            most = world // degree
            if shard > most:
                per = f" / {name} parallel degree {degree} = {most}" if degree > 1 else ""
                yield ConfigProblem(
                    view.located("hybrid_shard_degree"),
                    f"`hybrid_shard_degree` is {shard}, but FSDP can shard over {most} GPUs at"
                    " most",
                    Severity.ERROR,
                    explanation=(
                        f"SMP v2 takes 0 to the world size, and {_SHARDS_OVER[name]}"
                        f" Use {most} or less, or 0 to let SMP choose the largest."
                    ),
                    evidence=(f"the job has {_gpus(view, world)}{per}",),
                )
        if shard is not None and shard >= 1 and context is not None and context > shard:
            yield ConfigProblem(
                view.located("context_parallel_degree"),
                f"`context_parallel_degree` {context} is above `hybrid_shard_degree` {shard}",
                Severity.ERROR,
                explanation=(
                    "SMP v2 requires `context_parallel_degree` <= `hybrid_shard_degree` (the SMP"
                    " v2 reference). Raise `hybrid_shard_degree` or lower the context parallel"
                    " degree."
                ),
            )


# Degrees whose pages ask for a divisor of the cluster's GPUs.
_DIVIDE_THE_CLUSTER = {
    "tensor_parallel_degree": "the tensor parallelism page",
    "context_parallel_degree": "the context parallelism page",
    "expert_parallel_degree": "the expert parallelism page",
}


# Why the GPUs FSDP shards over are the world size divided by a degree.
_SHARDS_OVER = {
    "tensor": "with tensor parallelism each tensor parallel rank shards over the world size"
    " divided by the degree.",
    "expert": "with expert parallelism only the ranks that hold the same experts, the world"
    " size divided by the degree, can shard them (the official Mixtral example's range"
    " [0, world_size // expert_parallel_degree]).",
}


def _split(tp: Optional[int], ep: Optional[int]) -> Optional[tuple[str, int]]:
    """The degree that divides the GPUs FSDP shards over, named: the tensor parallel degree
    (the v2 reference), or the expert parallel one (the official Mixtral example's
    "[0, world_size // expert_parallel_degree]"); None when one is unknown or below 1, or
    when both are above 1 (a combination SMP v2 refuses, reported on its own)."""
    if tp is None or ep is None or tp < 1 or ep < 1 or (tp > 1 and ep > 1):
        return None
    return ("expert", ep) if ep > 1 else ("tensor", tp)


def _world(view: ConfigView) -> Optional[int]:
    """The GPUs of the job: torchrun starts one process per GPU of each instance."""
    instance, count = view.instance, view.launch("instance_count")
    if instance is None or not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return None
    return instance.gpus * count


def _gpus(view: ConfigView, world: int) -> str:
    instance = view.instance
    assert instance is not None
    count = world // instance.gpus
    return (
        f"{world} GPUs ({count} {instance.name} instance{'s' if count != 1 else ''}"
        f" with {instance.gpus} each)"
    )
