"""Token datasets read from pre-tokenized shards, and the loaders that feed the steps.

Every shard is a JSON-lines file of token id lists. Ranks of one tensor-parallel group must
read the same batches only with ``prescaled_batch``; otherwise each data-parallel rank reads
its own slice, so the sampler is built over the data-parallel group.
"""

import glob
import gzip
import json
import os

import smdistributed.modelparallel.torch as smp
import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class TokenShardDataset(Dataset):
    """Fixed-length windows of token ids from one shard, padded to ``seq_length``."""

    def __init__(self, path, seq_length, pad_id=50256):
        self.seq_length = seq_length
        self.pad_id = pad_id
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as handle:
            self.samples = [json.loads(line)["input_ids"] for line in handle if line.strip()]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        ids = self.samples[index][: self.seq_length]
        mask = [1] * len(ids) + [0] * (self.seq_length - len(ids))
        ids = ids + [self.pad_id] * (self.seq_length - len(ids))
        return torch.tensor(ids, dtype=torch.long), torch.tensor(mask, dtype=torch.long)


def list_shards(folder, pattern="*.jsonl*"):
    """Shard files in a stable order, so that every rank sees the same list."""
    shards = sorted(glob.glob(os.path.join(folder, pattern)))
    if not shards:
        raise FileNotFoundError(f"no shards matching {pattern} in {folder}")
    return shards


def data_parallel_layout(prescaled_batch):
    """(replicas, this replica) for the sampler: tensor-parallel peers share batches only
    when the batch is prescaled."""
    if prescaled_batch:
        return smp.rdp_size(), smp.rdp_rank()
    return smp.dp_size(), smp.dp_rank()


def train_loader(shard, args, epoch=0):
    dataset = TokenShardDataset(shard, args.max_context_width)
    replicas, rank = data_parallel_layout(args.prescaled_batch > 0)
    sampler = DistributedSampler(dataset, num_replicas=replicas, rank=rank, shuffle=True, seed=args.seed, drop_last=True)
    sampler.set_epoch(epoch)
    return DataLoader(
        dataset,
        batch_size=args.train_batch_size,
        sampler=sampler,
        num_workers=0,
        pin_memory=True,
        drop_last=True,
    )


def validation_loader(shard, args):
    dataset = TokenShardDataset(shard, args.max_context_width)
    replicas, rank = data_parallel_layout(args.prescaled_batch > 0)
    sampler = DistributedSampler(dataset, num_replicas=replicas, rank=rank, shuffle=False)
    return DataLoader(dataset, batch_size=args.val_batch_size, sampler=sampler, num_workers=0, drop_last=True)


def shards_for_epoch(folder, epoch, zipped):
    """All shards, rotated by the epoch so that long runs start from a different shard."""
    shards = list_shards(folder, "*.jsonl.gz" if zipped else "*.jsonl")
    offset = epoch % len(shards)
    return shards[offset:] + shards[:offset]
