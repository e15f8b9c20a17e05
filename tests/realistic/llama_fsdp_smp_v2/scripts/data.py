"""Token-block datasets for pre-training, read from JSON-lines shards."""

import glob
import json
import os
import random

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class TokenBlocks(Dataset):
    """Fixed-length blocks of token ids, concatenated across documents."""

    def __init__(self, files, context_width, max_blocks=None):
        self.context_width = context_width
        self.blocks = []
        buffer = []
        for path in files:
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    buffer.extend(json.loads(line)["input_ids"])
                    while len(buffer) >= context_width + 1:
                        self.blocks.append(np.asarray(buffer[: context_width + 1], dtype=np.int64))
                        buffer = buffer[context_width:]
                    if max_blocks is not None and len(self.blocks) >= max_blocks:
                        return

    def __len__(self):
        return len(self.blocks)

    def __getitem__(self, index):
        block = torch.from_numpy(self.blocks[index])
        return {"input_ids": block[:-1], "labels": block[1:]}


def shard_files(directory, pattern="*.jsonl"):
    """Every process reads the files of its own data-parallel replica group."""
    files = sorted(glob.glob(os.path.join(directory, pattern)))
    if not files:
        raise FileNotFoundError(f"no {pattern} files in {directory}")
    return files


def seed_workers(worker_id):
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


def create_loader(directory, context_width, batch_size, dp_rank, dp_size, seed, shuffle=True, max_blocks=None):
    dataset = TokenBlocks(shard_files(directory), context_width, max_blocks=max_blocks)
    sampler = DistributedSampler(dataset, num_replicas=dp_size, rank=dp_rank, shuffle=shuffle, seed=seed, drop_last=True)
    generator = torch.Generator()
    generator.manual_seed(seed + dp_rank)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=2,
        pin_memory=True,
        drop_last=True,
        worker_init_fn=seed_workers,
        generator=generator,
    )


def global_rank():
    return dist.get_rank() if dist.is_initialized() else 0
