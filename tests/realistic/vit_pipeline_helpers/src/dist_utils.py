"""Distributed set-up shared by the training and evaluation entry points."""

import logging

import smdistributed.modelparallel.torch as smp
import torch

logger = logging.getLogger(__name__)


def init_distributed(args):
    """Initialise the model parallelism library and record this process's place in the job."""
    smp.init()
    args.rank = smp.rank()
    args.world_size = smp.size()
    args.local_rank = smp.local_rank()
    torch.cuda.set_device(args.local_rank)
    logger.info("rank %d of %d", args.rank, args.world_size)


def is_main_process(rank):
    return rank == 0
