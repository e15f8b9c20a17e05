"""One place that knows which distributed backend the job runs on.

The scripts never import the backends themselves: they call ``setup`` once, then wrap their
model and optimizer here and ask who they are through ``is_main_process``.
"""

import os

import smdistributed.modelparallel.torch as smp
import torch
import torch.distributed as dist


def setup(args):
    if args.backend == "smp":
        smp.init()
        torch.cuda.set_device(smp.local_rank())
        args.rank = smp.rank()
        args.world_size = smp.size()
    elif args.backend == "horovod":
        import horovod.torch as hvd

        hvd.init()
        torch.cuda.set_device(hvd.local_rank())
        args.rank = hvd.rank()
        args.world_size = hvd.size()
    else:
        args.rank = 0
        args.world_size = 1
    return torch.device("cuda")


def wrap_model(model):
    model = smp.DistributedModel(model)
    return model


def wrap_optimizer(optimizer):
    return smp.DistributedOptimizer(optimizer)


def is_main_process():
    return smp.rank() == 0


def seed_everything(seed):
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)


def synchronize():
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
