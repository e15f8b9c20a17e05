"""Polynomial warm-up schedule, stepped once per optimizer update."""

from torch.optim.lr_scheduler import _LRScheduler


class PolyWarmUpScheduler(_LRScheduler):
    def __init__(self, optimizer, warmup, total_steps, degree=0.5, last_epoch=-1):
        self.warmup = warmup
        self.total_steps = total_steps
        self.degree = degree
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        progress = self.last_epoch / self.total_steps
        if progress < self.warmup:
            return [base_lr * progress / self.warmup for base_lr in self.base_lrs]
        return [base_lr * ((1.0 - progress) ** self.degree) for base_lr in self.base_lrs]
