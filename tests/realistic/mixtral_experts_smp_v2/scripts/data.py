"""Fixed-length token blocks read from the pre-tokenised shards of the training channel."""

import glob
import os

import numpy as np
import torch
from torch.utils.data import Dataset


class TokenShards(Dataset):
    def __init__(self, root, block):
        self.block = block
        self.shards = [np.load(path, mmap_mode="r") for path in sorted(glob.glob(os.path.join(root, "*.npy")))]
        self.counts = [len(shard) // block for shard in self.shards]

    def __len__(self):
        return sum(self.counts)

    def __getitem__(self, index):
        for shard, count in zip(self.shards, self.counts):
            if index < count:
                start = index * self.block
                return torch.from_numpy(np.asarray(shard[start : start + self.block], dtype=np.int64))
            index -= count
        raise IndexError(index)
