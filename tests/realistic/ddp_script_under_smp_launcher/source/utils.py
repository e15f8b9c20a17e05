"""Helpers shared by the training script: process-group set-up, metrics, checkpoints."""

import os
import time

import torch
import torch.distributed as dist


def setup_process_group():
    """torchrun exports the ranks; the process group reads MASTER_ADDR and MASTER_PORT."""
    local_rank = int(os.environ["LOCAL_RANK"])
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    dist.init_process_group(backend="nccl", rank=rank, world_size=world_size)
    return local_rank, rank, world_size


def cleanup():
    if dist.is_initialized():
        dist.destroy_process_group()


def is_main_process():
    return not dist.is_initialized() or dist.get_rank() == 0


class AverageMeter:
    """Running average of a scalar, reduced across processes on request."""

    def __init__(self, name):
        self.name = name
        self.total = 0.0
        self.count = 0

    def update(self, value, n=1):
        self.total += float(value) * n
        self.count += n

    @property
    def average(self):
        return self.total / max(self.count, 1)

    def all_reduce(self, device):
        packed = torch.tensor([self.total, self.count], dtype=torch.float64, device=device)
        dist.all_reduce(packed)
        self.total, self.count = packed[0].item(), int(packed[1].item())
        return self.average


class Timer:
    def __init__(self):
        self.start = time.time()

    def lap(self):
        now = time.time()
        elapsed, self.start = now - self.start, now
        return elapsed


def save_checkpoint(model, optimizer, scheduler, epoch, directory):
    if not is_main_process():
        return
    os.makedirs(directory, exist_ok=True)
    state = {
        "epoch": epoch,
        "model": model.module.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
    }
    torch.save(state, os.path.join(directory, f"checkpoint_{epoch:03d}.pt"))


def latest_checkpoint(directory):
    if not os.path.isdir(directory):
        return None
    names = sorted(name for name in os.listdir(directory) if name.startswith("checkpoint_"))
    return os.path.join(directory, names[-1]) if names else None


def load_checkpoint(path, model, optimizer, scheduler, device):
    state = torch.load(path, map_location=device)
    model.module.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return state["epoch"] + 1
