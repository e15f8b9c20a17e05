"""Token shards on disk: each data-parallel replica reads its own slice of every shard."""

import glob
import os

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class TokenDataset(Dataset):
    def __init__(self, path, sequence_length):
        self.tokens = np.load(path, mmap_mode="r")
        self.sequence_length = sequence_length

    def __len__(self):
        return (len(self.tokens) - 1) // self.sequence_length

    def __getitem__(self, index):
        start = index * self.sequence_length
        chunk = torch.from_numpy(np.asarray(self.tokens[start : start + self.sequence_length + 1], dtype=np.int64))
        return chunk[:-1], chunk[1:]


def shard_paths(folder):
    return sorted(glob.glob(os.path.join(folder, "*.npy")))


def make_loader(path, sequence_length, batch_size, rank, replicas, seed):
    dataset = TokenDataset(path, sequence_length)
    sampler = DistributedSampler(dataset, num_replicas=replicas, rank=rank, shuffle=True, seed=seed, drop_last=True)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True, pin_memory=True)
