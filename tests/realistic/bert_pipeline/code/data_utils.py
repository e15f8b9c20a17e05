"""HDF5 pre-training shards, sharded over the data-parallel replicas by hand.

Every rank of one model replica (its pipeline stages) must read the same samples, so the
shards are split by ``smp.dp_rank()`` over ``smp.dp_size()`` replicas, never by the global
rank.
"""

import os
import random

import h5py
import numpy as np
import smdistributed.modelparallel.torch as smp
import torch
from torch.utils.data import DataLoader, Dataset, SequentialSampler


class PretrainingShard(Dataset):
    KEYS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels")

    def __init__(self, path, max_predictions_per_seq):
        self.max_predictions_per_seq = max_predictions_per_seq
        with h5py.File(path, "r") as handle:
            self.inputs = [np.asarray(handle[key][:]) for key in self.KEYS]

    def __len__(self):
        return len(self.inputs[0])

    def __getitem__(self, index):
        input_ids, input_mask, segment_ids, positions, ids, nsp = [
            torch.from_numpy(item[index].astype(np.int64)) if item.ndim > 0 else torch.tensor(item[index])
            for item in self.inputs
        ]
        masked_lm_labels = torch.full_like(input_ids, -1)
        count = int((positions != 0).sum())
        masked_lm_labels[positions[:count]] = ids[:count]
        return input_ids, segment_ids, input_mask, masked_lm_labels, nsp


def shard_files(input_dir, seed, epoch):
    """This replica's shard files: all ranks shuffle the full list with the same seed, then
    each data-parallel replica takes every dp_size-th file."""
    files = sorted(
        os.path.join(input_dir, name)
        for name in os.listdir(input_dir)
        if os.path.isfile(os.path.join(input_dir, name)) and "training" in name
    )
    random.Random(seed + epoch).shuffle(files)
    mine = files[smp.dp_rank()::smp.dp_size()]
    if not mine:
        raise RuntimeError(f"{len(files)} files cannot feed {smp.dp_size()} data-parallel replicas")
    return mine


def make_loader(path, args, worker_init):
    dataset = PretrainingShard(path, args.max_predictions_per_seq)
    return DataLoader(
        dataset,
        sampler=SequentialSampler(dataset),
        batch_size=args.train_batch_size,
        num_workers=0,
        worker_init_fn=worker_init,
        pin_memory=True,
        drop_last=True,
    )


class WorkerInit:
    def __init__(self, seed):
        self.seed = seed

    def __call__(self, worker_id):
        np.random.seed(self.seed + worker_id)
        random.seed(self.seed + worker_id)
