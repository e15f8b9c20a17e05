"""Token blocks read from pre-tokenized ``.npy`` shards, sharded over the data-parallel ranks."""

import glob
import os

import numpy as np
import smdistributed.modelparallel.torch as smp
import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class TokenBlocks(Dataset):
    """Every shard cut into ``context + 1`` tokens: inputs and the next-token targets."""

    def __init__(self, folder: str, context: int) -> None:
        self.context = context
        files = sorted(glob.glob(os.path.join(folder, "*.npy")))
        if not files:
            raise FileNotFoundError(f"no .npy shards in {folder}")
        self.tokens = np.concatenate([np.load(path, mmap_mode="r") for path in files])
        self.blocks = (len(self.tokens) - 1) // context

    def __len__(self) -> int:
        return self.blocks

    def __getitem__(self, index: int):
        start = index * self.context
        block = torch.from_numpy(np.asarray(self.tokens[start:start + self.context + 1], dtype=np.int64))
        return block[:-1], block[1:]


def make_loader(folder: str, context: int, batch_size: int, seed: int, shuffle: bool) -> DataLoader:
    """Every data-parallel replica reads its own part; the ranks of one pipeline read the same batches."""
    dataset = TokenBlocks(folder, context)
    sampler = DistributedSampler(
        dataset,
        num_replicas=smp.dp_size(),
        rank=smp.dp_rank(),
        shuffle=shuffle,
        seed=seed,
        drop_last=True,
    )
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True, num_workers=2, pin_memory=True)
