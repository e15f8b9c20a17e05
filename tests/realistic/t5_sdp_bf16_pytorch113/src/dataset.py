"""Dialogue summarisation pairs, tokenised ahead of time into tensors."""

import os

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Pairs(Dataset):
    def __init__(self, directory, split):
        data = torch.load(os.path.join(directory, f"{split}.pt"))
        self.input_ids = data["input_ids"]
        self.attention_mask = data["attention_mask"]
        self.labels = data["labels"]

    def __len__(self):
        return self.input_ids.size(0)

    def __getitem__(self, index):
        return self.input_ids[index], self.attention_mask[index], self.labels[index]


def make_loader(directory, split, batch_size, rank, replicas, seed, shuffle):
    dataset = Pairs(directory, split)
    sampler = DistributedSampler(dataset, num_replicas=replicas, rank=rank, shuffle=shuffle, seed=seed, drop_last=True)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True, pin_memory=True, num_workers=2)  # expect: SMP205 warning
