"""Instruction-tuning examples, already tokenised, from JSON-lines files."""

import glob
import json
import os

import torch
from torch.utils.data import Dataset


class InstructionDataset(Dataset):
    def __init__(self, directory, context_width):
        self.examples = []
        for path in sorted(glob.glob(os.path.join(directory, "*.jsonl"))):
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    ids = json.loads(line)["input_ids"][:context_width]
                    ids += [0] * (context_width - len(ids))
                    self.examples.append(torch.tensor(ids, dtype=torch.long))

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, index):
        ids = self.examples[index]
        return {"input_ids": ids, "labels": ids.clone()}
