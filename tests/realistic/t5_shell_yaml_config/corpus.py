"""Span-corruption examples from pre-tokenised C4 shards."""

import glob
import os

import torch


class SpanCorruptionCorpus(torch.utils.data.Dataset):
    def __init__(self, folder):
        self.shards = sorted(glob.glob(os.path.join(folder, "*.pt")))
        self.examples = [example for shard in self.shards for example in torch.load(shard)]

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, index):
        return self.examples[index]
