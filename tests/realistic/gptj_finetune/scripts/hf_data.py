"""Tokenized causal-LM datasets from the Hugging Face hub or a local copy, in fixed blocks."""

from itertools import chain

import smdistributed.modelparallel.torch as smp
import torch
from datasets import load_dataset, load_from_disk
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from transformers import default_data_collator


def load_texts(args):
    if args.dataset_path:
        return load_from_disk(args.dataset_path)
    return load_dataset(args.dataset_name, args.dataset_config_name, cache_dir=args.cache_dir)


def tokenize_and_group(raw, tokenizer, block_size, workers=8):
    """Tokenize every split, then cut the concatenated ids into blocks of ``block_size``."""
    column = "text" if "text" in raw["train"].column_names else raw["train"].column_names[0]

    def tokenize(batch):
        return tokenizer(batch[column])

    def group(batch):
        joined = {key: list(chain(*batch[key])) for key in batch}
        total = (len(joined["input_ids"]) // block_size) * block_size
        blocks = {key: [ids[i : i + block_size] for i in range(0, total, block_size)] for key, ids in joined.items()}
        blocks["labels"] = [ids[:] for ids in blocks["input_ids"]]
        return blocks

    # Only the first process of each host tokenizes; the others read its cache.
    if smp.local_rank() == 0:
        tokenized = raw.map(tokenize, batched=True, num_proc=workers, remove_columns=raw["train"].column_names)
        grouped = tokenized.map(group, batched=True, num_proc=workers)
    smp.barrier()
    if smp.local_rank() != 0:
        tokenized = raw.map(tokenize, batched=True, num_proc=workers, remove_columns=raw["train"].column_names)
        grouped = tokenized.map(group, batched=True, num_proc=workers)
    return grouped


def loader(dataset, batch_size, seed, shuffle, drop_last=True):
    """Each data-parallel replica reads its own part; tensor-parallel peers of one replica
    read the same part only with prescaled batches, which this job does not use."""
    sampler = DistributedSampler(dataset, num_replicas=smp.dp_size(), rank=smp.dp_rank(), shuffle=shuffle, seed=seed, drop_last=drop_last)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, collate_fn=default_data_collator, drop_last=drop_last, pin_memory=True)


def to_device(batch, device):
    return {key: value.to(device) if isinstance(value, torch.Tensor) else value for key, value in batch.items()}
