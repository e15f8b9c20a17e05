"""Tokenized OpenWebText shards, split across the data-parallel ranks by a DistributedSampler."""

import glob
import os

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Blocks(Dataset):
    def __init__(self, path, width):
        tokens = np.load(path, mmap_mode="r")
        self.width = width
        self.count = (len(tokens) - 1) // width
        self.tokens = tokens

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        start = index * self.width
        chunk = torch.from_numpy(np.asarray(self.tokens[start : start + self.width + 1], dtype=np.int64))
        return chunk[:-1], chunk[1:]


def training_files(directory):
    files = sorted(glob.glob(os.path.join(directory, "*.npy")))
    if not files:
        raise RuntimeError(f"no token shards in {directory}")
    return files


def loader_for(path, width, batch_size, seed, dp_rank, dp_size):
    dataset = Blocks(path, width)
    sampler = DistributedSampler(dataset, num_replicas=dp_size, rank=dp_rank, shuffle=True, seed=seed, drop_last=True)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True, num_workers=0)
