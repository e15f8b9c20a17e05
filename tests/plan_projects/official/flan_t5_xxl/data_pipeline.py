"""Reading the tokenized JSON lines the notebook wrote, in samples of at most max_context_width."""

import json

import torch
import torch.utils.data


class TokenizedJsonDataset(torch.utils.data.Dataset):
    def __init__(self, paths, max_context_width):
        self.max_context_width = max_context_width
        self.samples = []
        for path in paths:
            with open(path, encoding="utf-8") as handle:
                self.samples.extend(json.loads(line)["input_ids"] for line in handle)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        ids = torch.tensor(self.samples[index][: self.max_context_width], dtype=torch.long)
        return ids, torch.ones_like(ids)


def create_pretraining_dataloader(paths, batch_size, max_context_width, dp_rank, dp_size, seed):
    dataset = TokenizedJsonDataset(paths, max_context_width)
    sampler = torch.utils.data.DistributedSampler(
        dataset, num_replicas=dp_size, rank=dp_rank, shuffle=True, seed=seed, drop_last=True
    )
    return torch.utils.data.DataLoader(
        dataset, sampler=sampler, batch_size=batch_size, drop_last=True, pin_memory=True
    )
