"""Warm-up then decay of the learning rate, with state that checkpoints can carry."""

import math


class WarmupDecay:
    """Linear warm-up over ``warmup_iters`` steps, then linear or cosine decay to ``min_lr``."""

    def __init__(self, optimizer, start_lr, warmup_iters, total_iters, decay_style="cosine", min_lr=0.0):
        self.optimizer = optimizer
        self.start_lr = start_lr
        self.warmup_iters = warmup_iters
        self.total_iters = total_iters
        self.decay_style = decay_style
        self.min_lr = min_lr
        self.num_iters = 0
        self.step(0)

    def get_lr(self):
        if self.warmup_iters > 0 and self.num_iters <= self.warmup_iters:
            return self.start_lr * self.num_iters / self.warmup_iters
        if self.num_iters > self.total_iters:
            return self.min_lr
        progress = (self.num_iters - self.warmup_iters) / max(1, self.total_iters - self.warmup_iters)
        if self.decay_style == "linear":
            lr = self.start_lr * (1.0 - progress)
        elif self.decay_style == "cosine":
            lr = self.start_lr / 2.0 * (math.cos(math.pi * progress) + 1)
        else:
            lr = self.start_lr
        return max(lr, self.min_lr)

    def step(self, step_num=None):
        self.num_iters = self.num_iters + 1 if step_num is None else step_num
        new_lr = self.get_lr()
        for group in self.optimizer.param_groups:
            group["lr"] = new_lr

    def state_dict(self):
        return {
            "start_lr": self.start_lr,
            "warmup_iters": self.warmup_iters,
            "total_iters": self.total_iters,
            "decay_style": self.decay_style,
            "num_iters": self.num_iters,
            "min_lr": self.min_lr,
        }

    def load_state_dict(self, state):
        self.start_lr = state["start_lr"]
        self.warmup_iters = state["warmup_iters"]
        self.total_iters = state["total_iters"]
        self.decay_style = state["decay_style"]
        self.min_lr = state["min_lr"]
        self.step(state["num_iters"])
