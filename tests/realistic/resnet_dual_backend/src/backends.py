"""Set-up for each back end the training script supports: plain DDP, apex, or the model
parallelism library. Only the functions of the chosen back end run."""

import os

import torch
import torch.distributed as dist
from apex import amp
from apex.parallel import DistributedDataParallel as ApexDDP
from vision_common.loading import sharded_loader


def ddp_setup(model, optimizer, local_rank):
    dist.init_process_group("nccl")
    torch.cuda.set_device(local_rank)
    model = torch.nn.parallel.DistributedDataParallel(model.cuda(local_rank), device_ids=[local_rank])
    return model, optimizer


def apex_setup(model, optimizer, opt_level):
    dist.init_process_group("nccl", init_method="env://")
    model, optimizer = amp.initialize(model.cuda(), optimizer, opt_level=opt_level)
    return ApexDDP(model, delay_allreduce=True), optimizer


def apex_backward(loss, optimizer):
    with amp.scale_loss(loss, optimizer) as scaled:
        scaled.backward()


def local_rank_from_env():
    return int(os.environ.get("LOCAL_RANK", 0))


def data_parallel_loader(dataset, batch_size):
    """Each data-parallel rank reads its own shard (torchrun ranks), with the team's loader."""
    return sharded_loader(dataset, batch_size=batch_size, num_workers=4)
