"""Pretraining data for GPT: JSON-lines files of pre-tokenized sequences.

Only the first pipeline stage reads data; later stages receive activations, and a dummy
dataset of the same length keeps their loops in step.
"""

import gzip
import json
import random
from typing import List

import numpy as np
import smdistributed.modelparallel.torch as smp
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class TokenizedDataset(Dataset):
    """Sequences of token ids with their attention masks, cut to ``max_sequence_length``."""

    def __init__(self, input_paths: List[str], max_sequence_length: int, zipped: bool = True):
        self.max_sequence_length = max_sequence_length
        self.input_ids, self.attention_masks = [], []
        for path in input_paths:
            opener = gzip.open if zipped else open
            with opener(path, "rt") as handle:
                for line in handle:
                    record = json.loads(line)
                    self.input_ids.append(record["input_ids"])
                    self.attention_masks.append(record["attention_mask"])

    def __len__(self):
        return len(self.input_ids)

    def __getitem__(self, index):
        input_ids = self.input_ids[index]
        mask = self.attention_masks[index]
        if len(input_ids) > self.max_sequence_length:
            start = np.random.randint(0, len(input_ids) - self.max_sequence_length)
            input_ids = input_ids[start : start + self.max_sequence_length]
            mask = mask[start : start + self.max_sequence_length]
        return torch.tensor(input_ids, dtype=torch.long), torch.tensor(mask, dtype=torch.long)


class PlaceholderDataset(Dataset):
    """What the later pipeline stages iterate: the right number of empty batches."""

    def __init__(self, length):
        self.batch = (torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long))
        self.length = length

    def __getitem__(self, index):
        return self.batch

    def __len__(self):
        return self.length


def create_pretraining_dataloader(
    input_paths: List[str],
    batch_size: int,
    max_sequence_length: int,
    seed: int,
    dp_rank: int,
    dp_size: int,
    shuffle: bool = False,
    zipped: bool = True,
):
    """The loader of one data-parallel replica over ``input_paths``."""
    if smp.pp_rank() == 0:
        data = TokenizedDataset(input_paths, max_sequence_length, zipped=zipped)
        sampler = DistributedSampler(
            data,
            shuffle=shuffle,
            seed=seed,
            rank=dp_rank,
            num_replicas=dp_size,
            drop_last=True,
        )
        dataloader = DataLoader(
            data,
            sampler=sampler,
            batch_size=batch_size,
            num_workers=0,
            pin_memory=True,
            drop_last=True,
        )
        smp.broadcast(len(dataloader), smp.PP_GROUP)
    else:
        data_len = smp.recv_from(0, smp.RankType.PP_RANK)
        dataset = PlaceholderDataset(data_len * batch_size)
        dataloader = DataLoader(dataset, batch_size=batch_size, drop_last=True)
    return dataloader


def shuffled_paths(paths, seed, epoch):
    """The same order on every rank: the seed and the epoch decide it."""
    ordered = sorted(paths)
    random.Random(seed + epoch).shuffle(ordered)
    return ordered
