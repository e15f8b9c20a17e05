"""SST-2 as tokenised tensors."""

import os

import torch


class TokenisedSST2(torch.utils.data.Dataset):
    def __init__(self, path):
        self.items = torch.load(path)

    def __len__(self):
        return len(self.items["labels"])

    def __getitem__(self, index):
        return {key: values[index] for key, values in self.items.items()}


def load_sst2(data_dir):
    return TokenisedSST2(os.path.join(data_dir, "sst2_train.pt"))
