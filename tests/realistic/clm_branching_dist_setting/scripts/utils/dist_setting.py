"""Process-group set-up for every way the causal-LM scripts are run.

``--dist-backend smp`` on SageMaker model parallelism, ``ddp`` under torchrun, anything else
on one GPU. The scripts read ``args.rank`` and ``args.world_size`` afterwards.
"""

import os

import smdistributed.modelparallel.torch as smp
import torch
import torch.distributed as dist


def init_backend(args):
    if args.dist_backend == "smp":
        smp.init()
        torch.cuda.set_device(smp.local_rank())
    elif args.dist_backend == "ddp":
        dist.init_process_group("nccl")
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))


def dist_setting(args):
    if args.dist_backend == "smp":
        args.rank = smp.rank()
        args.world_size = smp.size()
        args.local_rank = smp.local_rank()
    elif args.dist_backend == "ddp":
        args.rank = int(os.environ["RANK"])
        args.world_size = int(os.environ["WORLD_SIZE"])
        args.local_rank = int(os.environ["LOCAL_RANK"])
    else:
        args.rank = 0
        args.world_size = 1
        args.local_rank = 0
    return args


def parallelize(model, args):
    if args.dist_backend == "ddp":
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.local_rank])
    return model


def smp_model(model):
    return smp.DistributedModel(model, trace_device="gpu")


def smp_optimizer(optimizer):
    return smp.DistributedOptimizer(optimizer)


def log_rank_zero(message):
    if smp.rank() == 0:
        print(message, flush=True)
