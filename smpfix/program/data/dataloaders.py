"""PyTorch data-pipeline calls: "is this a ``DataLoader`` / ``DistributedSampler``?".

Answered through the file's imports (any import form), with the positions of the arguments
the data rules read. Where a loader's batches go is ``step_feeds``' question.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.program.facts import FileFacts

DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
DISTRIBUTED_SAMPLERS = frozenset(
    {"torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler"}
)
# Samplers that walk the whole dataset on every rank: no sharding at all.
WHOLE_DATASET_SAMPLERS = frozenset(
    {
        "torch.utils.data.RandomSampler",
        "torch.utils.data.sampler.RandomSampler",
        "torch.utils.data.SequentialSampler",
        "torch.utils.data.sampler.SequentialSampler",
    }
)
SUBSETS = frozenset({"torch.utils.data.Subset", "torch.utils.data.dataset.Subset"})
BATCH_SAMPLERS = frozenset(
    {"torch.utils.data.BatchSampler", "torch.utils.data.sampler.BatchSampler"}
)
RANDOM_SAMPLERS = frozenset(
    {"torch.utils.data.RandomSampler", "torch.utils.data.sampler.RandomSampler"}
)

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn,
#            pin_memory, drop_last, timeout, worker_init_fn, multiprocessing_context, generator)
DATALOADER_POSITIONS = {
    "dataset": 0,
    "shuffle": 2,
    "sampler": 3,
    "batch_sampler": 4,
    "generator": 12,
}
# DistributedSampler(dataset, num_replicas, rank, shuffle, seed, drop_last)
SAMPLER_POSITIONS = {"dataset": 0, "num_replicas": 1, "rank": 2, "shuffle": 3, "seed": 4}


def is_dataloader(node: cst.CSTNode, facts: FileFacts) -> bool:
    return type(node) is cst.Call and facts.qualified_name(node.func) in DATALOADERS


def is_distributed_sampler(node: cst.CSTNode, facts: FileFacts) -> bool:
    return type(node) is cst.Call and facts.qualified_name(node.func) in DISTRIBUTED_SAMPLERS


def loader_argument(call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    found = argument(call, name, DATALOADER_POSITIONS.get(name))
    return found.value if found is not None else None
