"""Token shards on local disk, read by every data-parallel replica in its own order."""

import glob
import os

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class TokenShard(Dataset):
    """Fixed-length windows of a memory-mapped token file."""

    def __init__(self, path, seq_length):
        self.tokens = np.load(path, mmap_mode="r")
        self.seq_length = seq_length

    def __len__(self):
        return (len(self.tokens) - 1) // self.seq_length

    def __getitem__(self, index):
        start = index * self.seq_length
        window = np.asarray(self.tokens[start : start + self.seq_length + 1], dtype=np.int64)
        return torch.from_numpy(window[:-1]), torch.from_numpy(window[1:])


def shard_paths(folder):
    return sorted(glob.glob(os.path.join(folder, "*.npy")))


def make_loader(path, seq_length, batch_size, rank, replicas, seed):
    """The training loader of one data-parallel replica: no worker processes on p4d."""
    dataset = TokenShard(path, seq_length)
    sampler = DistributedSampler(dataset, num_replicas=replicas, rank=rank, shuffle=True, seed=seed, drop_last=True)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=0, pin_memory=True, drop_last=True)
