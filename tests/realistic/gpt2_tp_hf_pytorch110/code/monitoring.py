"""Memory and throughput reporting for the training loop (rank-local, no collectives)."""

import json
import os
import time

import torch


class Throughput:
    """Tokens per second over a sliding window of steps."""

    def __init__(self, tokens_per_step, window=20):
        self.tokens_per_step = tokens_per_step
        self.window = window
        self.times = []

    def tick(self):
        self.times.append(time.time())
        if len(self.times) > self.window + 1:
            self.times.pop(0)

    def tokens_per_second(self):
        if len(self.times) < 2:
            return 0.0
        elapsed = self.times[-1] - self.times[0]
        return self.tokens_per_step * (len(self.times) - 1) / max(elapsed, 1e-6)


def memory_report(device, tag):
    allocated = torch.cuda.memory_allocated(device) / 2**30
    reserved = torch.cuda.memory_reserved(device) / 2**30
    peak = torch.cuda.max_memory_allocated(device) / 2**30
    return f"[{tag}] allocated {allocated:.2f} GiB, reserved {reserved:.2f} GiB, peak {peak:.2f} GiB"


def write_metrics(directory, step, values):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "metrics.jsonl"), "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"step": step, **values}) + "\n")
