"""Token blocks for pre-training, sharded over the processes of the job."""

import numpy as np
import smdistributed.modelparallel.torch as smp
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class TokenBlocks(Dataset):
    def __init__(self, path):
        self.blocks = np.load(path, mmap_mode="r")

    def __len__(self):
        return len(self.blocks)

    def __getitem__(self, index):
        block = torch.from_numpy(np.array(self.blocks[index]))
        return block[:-1], block[1:]


def build_loader(path, batch_size, seed=0):
    dataset = TokenBlocks(path)
    sampler = DistributedSampler(  # expect: SMP202 error
        dataset, num_replicas=smp.size(), rank=smp.rank(), shuffle=True, seed=seed
    )
    return sampler, DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True)
