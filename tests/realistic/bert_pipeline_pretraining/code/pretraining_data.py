"""The pretraining data: HDF5 shards of masked-LM examples, as produced by the BERT data
preparation scripts (input ids, segment ids, input mask, masked positions and ids, and the
next-sentence label)."""

import os

import h5py
import numpy as np
import torch
from torch.utils.data import Dataset

KEYS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels")


def list_shards(input_dir, marker="training"):
    """The shard files of a directory, in a stable order on every rank."""
    names = [
        os.path.join(input_dir, name)
        for name in os.listdir(input_dir)
        if os.path.isfile(os.path.join(input_dir, name)) and marker in name
    ]
    names.sort()
    return names


class PretrainingShard(Dataset):
    """One HDF5 shard, fully loaded in memory (a shard is a few hundred MB)."""

    def __init__(self, input_file, max_pred_length):
        self.input_file = input_file
        self.max_pred_length = max_pred_length
        with h5py.File(input_file, "r") as handle:
            self.inputs = [np.asarray(handle[key][:]) for key in KEYS]

    def __len__(self):
        return len(self.inputs[0])

    def __getitem__(self, index):
        input_ids, input_mask, segment_ids, masked_lm_positions, masked_lm_ids, next_sentence_labels = [
            torch.from_numpy(array[index].astype(np.int64))
            if indice < 5
            else torch.from_numpy(np.asarray(array[index].astype(np.int64)))
            for indice, array in enumerate(self.inputs)
        ]
        masked_lm_labels = torch.ones(input_ids.shape, dtype=torch.long) * -1
        index = self.max_pred_length
        padded = (masked_lm_positions == 0).nonzero()
        if len(padded) != 0:
            index = padded[0].item()
        masked_lm_labels[masked_lm_positions[:index]] = masked_lm_ids[:index]
        return input_ids, segment_ids, input_mask, masked_lm_labels, next_sentence_labels


class WorkerInit:
    """Seeds each loader worker; a class because lambdas do not pickle into worker processes."""

    def __init__(self, seed):
        self.seed = seed

    def __call__(self, worker_id):
        np.random.seed(self.seed + worker_id)


def pad_to_multiple(batch, multiple):
    """Trims a batch to a multiple of ``multiple`` examples (for ad-hoc evaluation only)."""
    keep = (batch[0].shape[0] // multiple) * multiple
    return [tensor[:keep] for tensor in batch]
