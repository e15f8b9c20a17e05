"""Process-group set-up and checkpoints for both strategies the notebook can launch.

The training script calls ``setup(args)`` once; it fills ``args.rank``, ``args.world_size`` and
the data-parallel coordinates from whichever library the job started.
"""

import os

import torch

try:
    import smdistributed.modelparallel.torch as smp
except ImportError:
    smp = None


def setup(args):
    smp.init()
    args.rank = smp.rank()
    args.world_size = smp.size()
    args.dp_rank = smp.dp_rank()
    args.dp_size = smp.dp_size()
    args.local_rank = smp.local_rank()
    torch.cuda.set_device(args.local_rank)
    return args


def save_checkpoint(model, optimizer, epoch, args):
    """A full checkpoint of the model and the optimizer, written by the first replica.

    Every pipeline stage of replica 0 takes part in the gather; the library writes the file on
    rank 0 only. The container this notebook uses predates optimizer-state sharding, so the
    optimizer's full state is whole on every replica.
    """
    path = os.path.join(args.model_dir, f"checkpoint-{epoch}.pt")
    if args.dp_rank == 0:
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "epoch": epoch,
        }
        smp.save(state, path, partial=False)
    smp.barrier()
