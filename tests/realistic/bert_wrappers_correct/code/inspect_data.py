"""Prints statistics of the tokenized dataset on a notebook instance; no training, no library.

It borrows the project's seeding helper from the model-parallel module and shards the data
the plain PyTorch way to preview what one worker of a torchrun launch would see.
"""

import argparse

from datasets import load_from_disk
from torch.utils.data import DataLoader, DistributedSampler

from common.parallel import count_parameters, seed_everything


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", type=str, required=True)
    args = parser.parse_args()
    seed_everything(0)
    data = load_from_disk(args.data_dir).with_format("torch")
    sampler = DistributedSampler(data["train"])
    loader = DataLoader(data["train"], batch_size=32, sampler=sampler)
    lengths = [int(batch["attention_mask"].sum()) for batch in loader]
    print(f"{len(lengths)} batches, {sum(lengths) / max(len(lengths), 1):.1f} tokens each")
    print(count_parameters)


if __name__ == "__main__":
    main()
