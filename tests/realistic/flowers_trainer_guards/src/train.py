"""Flowers classification with SageMaker model parallelism: a small trainer class around the
library's step function, checkpoints written by every rank of the first replica."""

import argparse
import logging
import os
import sys
import time

import smdistributed.modelparallel.torch as smp
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, transforms

from models import build_efficientnet, build_resnet

LOGGER = logging.getLogger(__name__)
logging.basicConfig(level=logging.INFO, stream=sys.stdout)


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--arch", default="resnet50", choices=["resnet50", "efficientnet"])
    parser.add_argument("--num-classes", type=int, default=5)
    parser.add_argument("--shard_optimizer_state", type=int, default=0)
    parser.add_argument("--skip_full_optimizer", type=int, default=0)
    parser.add_argument("--train-dir", default=os.environ.get("SM_CHANNEL_TRAIN", "data/train"))
    parser.add_argument("--val-dir", default=os.environ.get("SM_CHANNEL_VAL", "data/val"))
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "model"))
    parser.add_argument("--checkpoint-dir", default="/opt/ml/checkpoints")
    return parser.parse_args()


def build_model(args):
    if args.arch == "resnet50":
        return build_resnet(args.num_classes)
    return build_efficientnet(args.num_classes)


def make_loaders(args, input_size):
    normalize = transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    train_tf = transforms.Compose(
        [transforms.RandomResizedCrop(input_size), transforms.RandomHorizontalFlip(),
         transforms.ToTensor(), normalize]
    )  # fmt: skip
    val_tf = transforms.Compose(
        [transforms.Resize(input_size + 32), transforms.CenterCrop(input_size),
         transforms.ToTensor(), normalize]
    )  # fmt: skip
    train_set = datasets.ImageFolder(args.train_dir, train_tf)
    val_set = datasets.ImageFolder(args.val_dir, val_tf)
    # Shard by data-parallel replica: the pipeline stages of one replica read the same batch.
    train_sampler = DistributedSampler(
        train_set, num_replicas=smp.dp_size(), rank=smp.dp_rank(), shuffle=True, drop_last=True
    )
    val_sampler = DistributedSampler(
        val_set, num_replicas=smp.dp_size(), rank=smp.dp_rank(), shuffle=False, drop_last=True
    )
    train_loader = DataLoader(
        train_set, batch_size=args.batch_size, sampler=train_sampler, num_workers=4, drop_last=True
    )
    val_loader = DataLoader(
        val_set, batch_size=args.batch_size, sampler=val_sampler, num_workers=4, drop_last=True
    )
    return train_loader, val_loader


@smp.step
def train_step(model, images, labels):
    logits = model(images)
    loss = F.cross_entropy(logits, labels)
    model.backward(loss)
    return loss


@smp.step
def eval_step(model, images, labels):
    logits = model(images)
    return F.cross_entropy(logits, labels, reduction="sum"), (logits.argmax(1) == labels).sum()


class Trainer:
    """Owns the wrapped model and optimizer; one epoch at a time."""

    def __init__(self, model, optimizer, scheduler, args):
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.args = args
        self.device = torch.device("cuda", smp.local_rank())

    def train_epoch(self, loader, epoch):
        self.model.train()
        started = time.time()
        for step, (images, labels) in enumerate(loader):
            images, labels = images.to(self.device), labels.to(self.device)
            self.optimizer.zero_grad()
            loss = train_step(self.model, images, labels).reduce_mean()
            self.optimizer.step()
            if step % 50 == 0 and smp.rank() == 0:
                LOGGER.info("epoch %d step %d loss %.4f", epoch, step, loss.item())
        self.scheduler.step()
        return time.time() - started

    def evaluate(self, loader):
        self.model.eval()
        totals = torch.zeros(3, device=self.device)
        with torch.no_grad():
            for images, labels in loader:
                images, labels = images.to(self.device), labels.to(self.device)
                loss_mb, correct_mb = eval_step(self.model, images, labels)
                totals[0] += loss_mb.concat().sum()
                totals[1] += correct_mb.concat().sum()
                totals[2] += labels.numel()
        dist.all_reduce(totals, group=smp.get_dp_process_group())
        return (totals[0] / totals[2]).item(), (totals[1] / totals[2]).item()


def save_checkpoint(trainer, args, epoch):
    """Every rank of the first replica writes its partition."""
    if smp.dp_rank() == 0:  # expect: SMP301 error
        state = {
            "model": trainer.model.local_state_dict(),
            "optimizer": trainer.optimizer.local_state_dict(),
            "epoch": epoch,
        }
        smp.save(state, os.path.join(args.checkpoint_dir, f"epoch_{epoch}.pt"), partial=True)


def save_final(model, optimizer, args):
    """The full model for serving, and the full optimizer state unless told to skip it."""
    model_state = model.state_dict()
    if not args.skip_full_optimizer:
        optimizer_state = optimizer.state_dict()
    else:
        optimizer_state = None
    if smp.rank() == 0:
        torch.save({"model": model_state, "optimizer": optimizer_state},
                   os.path.join(args.model_dir, "model.pt"))  # fmt: skip


def main():
    args = parse_args()
    if args.shard_optimizer_state > 0 and not args.skip_full_optimizer:
        raise ValueError(
            "--shard_optimizer_state needs --skip_full_optimizer 1: the full optimizer state of a"
            " sharded optimizer cannot be gathered"
        )
    if not torch.cuda.is_available():
        raise RuntimeError("this script needs GPUs")

    smp.init()
    torch.cuda.set_device(smp.local_rank())
    torch.manual_seed(1234 + smp.dp_rank())

    model, input_size = build_model(args)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    model = smp.DistributedModel(model)
    optimizer = smp.DistributedOptimizer(optimizer)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)

    train_loader, val_loader = make_loaders(args, input_size)
    trainer = Trainer(model, optimizer, scheduler, args)
    for epoch in range(args.epochs):
        train_loader.sampler.set_epoch(epoch)
        seconds = trainer.train_epoch(train_loader, epoch)
        val_loss, val_acc = trainer.evaluate(val_loader)
        if smp.rank() == 0:
            LOGGER.info("epoch %d: %.0fs, val loss %.4f, acc %.3f", epoch, seconds, val_loss, val_acc)
        save_checkpoint(trainer, args, epoch)
    save_final(trainer.model, trainer.optimizer, args)
    smp.barrier()


if __name__ == "__main__":
    main()
