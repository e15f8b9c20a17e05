"""CIFAR-10 with DistributedDataParallel, each process driving two GPUs (a model split in two).

Started by torchrun: one process per pair of GPUs, ranks from the environment.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.cuda.amp import GradScaler, autocast
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, transforms

from utils import AverageMeter, Timer, cleanup, latest_checkpoint, load_checkpoint, save_checkpoint, setup_process_group


def parse_args():
    parser = argparse.ArgumentParser(description="CIFAR-10 DDP with a two-GPU model split")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=5e-4)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--amp", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=50)
    parser.add_argument("--checkpoint-dir", type=str, default="/opt/ml/checkpoints")
    parser.add_argument("--data-dir", type=str, default=os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    parser.add_argument("--model-dir", type=str, default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    args, _ = parser.parse_known_args()
    return args


def conv_block(in_channels, out_channels, pool=False):
    layers = [
        nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    ]
    if pool:
        layers.append(nn.MaxPool2d(2))
    return nn.Sequential(*layers)


class Residual(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.first = conv_block(channels, channels)
        self.second = conv_block(channels, channels)

    def forward(self, x):
        return x + self.second(self.first(x))


class SplitResNet(nn.Module):
    """A ResNet-9 whose stem runs on one GPU and whose head runs on another."""

    def __init__(self, first_device, second_device, classes=10):
        super().__init__()
        self.first_device = first_device
        self.second_device = second_device
        self.stem = nn.Sequential(
            conv_block(3, 64),
            conv_block(64, 128, pool=True),
            Residual(128),
        ).to(first_device)
        self.head = nn.Sequential(
            conv_block(128, 256, pool=True),
            conv_block(256, 512, pool=True),
            Residual(512),
            nn.AdaptiveMaxPool2d(1),
            nn.Flatten(),
            nn.Dropout(0.2),
            nn.Linear(512, classes),
        ).to(second_device)

    def forward(self, x):
        x = self.stem(x.to(self.first_device))
        return self.head(x.to(self.second_device))


def build_loaders(args, rank, world_size):
    mean, std = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
    train_transform = transforms.Compose([
        transforms.RandomCrop(32, padding=4, padding_mode="reflect"),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean, std),
    ])
    test_transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize(mean, std)])
    train_set = datasets.CIFAR10(args.data_dir, train=True, download=False, transform=train_transform)
    test_set = datasets.CIFAR10(args.data_dir, train=False, download=False, transform=test_transform)
    train_sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, shuffle=True)
    test_sampler = DistributedSampler(test_set, num_replicas=world_size, rank=rank, shuffle=False)
    train_loader = DataLoader(
        train_set,
        batch_size=args.batch_size,
        sampler=train_sampler,
        num_workers=args.workers,
        pin_memory=True,
        drop_last=True,
    )
    test_loader = DataLoader(test_set, batch_size=args.batch_size, sampler=test_sampler, num_workers=args.workers)
    return train_loader, test_loader, train_sampler


def train_one_epoch(model, loader, optimizer, scheduler, scaler, epoch, args, output_device):
    model.train()
    losses = AverageMeter("loss")
    timer = Timer()
    for step, (images, labels) in enumerate(loader):
        labels = labels.to(output_device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with autocast(enabled=bool(args.amp)):
            outputs = model(images)
            loss = F.cross_entropy(outputs, labels)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        losses.update(loss.item(), images.size(0))
        if step % args.log_interval == 0 and dist.get_rank() == 0:
            print(f"epoch {epoch} step {step}/{len(loader)} loss {losses.average:.4f} ({timer.lap():.1f}s)")
    return losses.all_reduce(output_device)


@torch.no_grad()
def evaluate(model, loader, output_device):
    model.eval()
    correct = AverageMeter("accuracy")
    for images, labels in loader:
        labels = labels.to(output_device, non_blocking=True)
        predictions = model(images).argmax(dim=1)
        correct.update((predictions == labels).float().mean().item(), labels.size(0))
    return correct.all_reduce(output_device)


def main():
    args = parse_args()
    local_rank, rank, world_size = setup_process_group()
    # Each process owns two GPUs: its stem on the first, its head on the second.
    first_device, second_device = 2 * local_rank, 2 * local_rank + 1
    torch.cuda.set_device(first_device)

    train_loader, test_loader, train_sampler = build_loaders(args, rank, world_size)
    model = DDP(SplitResNet(first_device, second_device))
    optimizer = torch.optim.SGD(
        model.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay, nesterov=True
    )
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.lr, epochs=args.epochs, steps_per_epoch=len(train_loader)
    )
    scaler = GradScaler(enabled=bool(args.amp))

    start_epoch = 0
    resume = latest_checkpoint(args.checkpoint_dir)
    if resume is not None:
        start_epoch = load_checkpoint(resume, model, optimizer, scheduler, f"cuda:{first_device}")

    for epoch in range(start_epoch, args.epochs):
        train_sampler.set_epoch(epoch)
        loss = train_one_epoch(model, train_loader, optimizer, scheduler, scaler, epoch, args, second_device)
        accuracy = evaluate(model, test_loader, second_device)
        if rank == 0:
            print(f"epoch {epoch}: train loss {loss:.4f}, test accuracy {accuracy:.4f}")
        save_checkpoint(model, optimizer, scheduler, epoch, args.checkpoint_dir)

    if rank == 0:
        os.makedirs(args.model_dir, exist_ok=True)
        torch.save(model.module.state_dict(), os.path.join(args.model_dir, "model.pt"))
    cleanup()


if __name__ == "__main__":
    main()
