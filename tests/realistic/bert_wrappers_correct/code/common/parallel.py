"""The model-parallel plumbing of the BERT fine-tuning scripts, kept out of the scripts.

Everything that touches the library lives here, so that the scripts read like plain PyTorch.
"""

import random

import numpy as np
import smdistributed.modelparallel.torch as smp
import torch


def init_model_parallel():
    smp.init()
    torch.cuda.set_device(smp.local_rank())
    return torch.device("cuda", smp.local_rank())


def distribute(model):
    return smp.DistributedModel(model, trace_device="gpu")


def distribute_optimizer(optimizer):
    return smp.DistributedOptimizer(optimizer)


def data_parallel_rank():
    return smp.dp_rank()


def data_parallel_size():
    return smp.dp_size()


def is_replica_leader():
    """The ranks of the first model replica: together they hold every partition."""
    return smp.rdp_rank() == 0


def is_first_rank():
    return smp.rank() == 0


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
