"""Small helpers shared by the pretraining scripts: ranks that also work without a process
group (for single-GPU debugging), logging on the main process only, and file helpers."""

import logging
import os
import time

import smdistributed.modelparallel.torch as smp
import torch.distributed as dist

logger = logging.getLogger("bert")


def get_rank():
    """The rank of this process, 0 when not distributed."""
    if not dist.is_available():
        return 0
    if not dist.is_initialized():
        return 0
    if smp.is_initialized():
        return smp.rank()
    return dist.get_rank()


def get_world_size():
    """How many processes run, 1 when not distributed."""
    if not dist.is_available():
        return 1
    if not dist.is_initialized():
        return 1
    if smp.is_initialized():
        return smp.size()
    return dist.get_world_size()


def is_main_process():
    return get_rank() == 0


def barrier():
    if dist.is_available() and dist.is_initialized():
        smp.barrier()


def setup_logging(level=logging.INFO):
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s] %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level if is_main_process() else logging.WARNING)


def log_main(message, *args):
    if is_main_process():
        logger.info(message, *args)


def format_step(step):
    if isinstance(step, str):
        return step
    parts = []
    if len(step) > 0:
        parts.append(f"epoch {step[0]}")
    if len(step) > 1:
        parts.append(f"iteration {step[1]}")
    if len(step) > 2:
        parts.append(f"validation {step[2]}")
    return " ".join(parts)


def mkdir(path):
    os.makedirs(path, exist_ok=True)


class Throughput:
    """Samples per second over a window of steps."""

    def __init__(self, window=50):
        self.window = window
        self.samples = 0
        self.steps = 0
        self.start = time.time()

    def update(self, batch_size):
        self.samples += batch_size
        self.steps += 1
        if self.steps < self.window:
            return None
        elapsed = time.time() - self.start
        rate = self.samples / max(elapsed, 1e-6)
        self.samples, self.steps, self.start = 0, 0, time.time()
        return rate
