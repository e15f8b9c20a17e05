"""Prints GPU and host memory at chosen points of start-up and training.

Only the first process of each host reports host memory; every rank reports its own GPU,
since the partitions differ in size.
"""

import os

import psutil
import smdistributed.modelparallel.torch as smp
import torch

_GIB = 1024 ** 3


def gpu_memory(tag=""):
    """One line per rank: allocated and reserved GPU memory, and the peak so far."""
    allocated = torch.cuda.memory_allocated() / _GIB
    reserved = torch.cuda.memory_reserved() / _GIB
    peak = torch.cuda.max_memory_allocated() / _GIB
    print(
        f"[rank {smp.rank()} pp {smp.pp_rank()} tp {smp.tp_rank()}] {tag}: "
        f"allocated {allocated:.2f} GiB, reserved {reserved:.2f} GiB, peak {peak:.2f} GiB",
        flush=True,
    )


def host_memory(tag=""):
    """Host memory once per host: the first local rank speaks for the node."""
    if smp.local_rank() != 0:
        return
    vm = psutil.virtual_memory()
    process = psutil.Process(os.getpid())
    print(
        f"[host {os.environ.get('SM_CURRENT_HOST', 'local')}] {tag}: "
        f"used {vm.used / _GIB:.1f} of {vm.total / _GIB:.1f} GiB, this process {process.memory_info().rss / _GIB:.1f} GiB",
        flush=True,
    )


def reset_peak():
    torch.cuda.reset_peak_memory_stats()


def report(tag, enabled):
    if not enabled:
        return
    gpu_memory(tag)
    host_memory(tag)
