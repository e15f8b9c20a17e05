"""CIFAR-100 image classification with one of three back ends.

``--backend ddp`` and ``--backend apex`` run plain data parallelism (torchrun); ``--backend
smp`` runs the model parallelism library under SageMaker's MPI launcher (see ../launch.py).
"""

import argparse
import os
import time

import smdistributed.modelparallel.torch as smp
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torchvision import datasets, transforms

import backends

IS_CHIEF = smp.rank() == 0  # expect: SMP108 warning


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["ddp", "apex", "smp"], default="ddp")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--amp", type=int, default=0)
    parser.add_argument("--opt_level", default="O1")
    parser.add_argument("--data_dir", default=os.environ.get("SM_CHANNEL_TRAINING", "/opt/ml/input/data/training"))
    parser.add_argument("--model_dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    return parser.parse_args()


def transforms_for(train):
    normalize = transforms.Normalize((0.507, 0.487, 0.441), (0.267, 0.256, 0.276))
    if train:
        return transforms.Compose(
            [transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip(), transforms.ToTensor(), normalize]
        )
    return transforms.Compose([transforms.ToTensor(), normalize])


def build_model():
    model = torchvision.models.resnet152(num_classes=100)
    model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def make_scaler(args):
    return torch.cuda.amp.GradScaler(enabled=args.amp > 0)  # expect: SMP112 error


# -- the model parallelism library ------------------------------------------------------------
@smp.step
def smp_train_step(model, images, labels, scaler):
    with torch.cuda.amp.autocast(enabled=scaler.is_enabled()):
        logits = model(images)
        loss = F.cross_entropy(logits, labels)
    model.backward(scaler.scale(loss))
    return loss


@smp.step
def smp_eval_step(model, images, labels):
    logits = model(images)
    return (logits.argmax(dim=1) == labels).sum()


def smp_loaders(args):
    if smp.local_rank() == 0:
        datasets.CIFAR100(args.data_dir, train=True, download=True)
        datasets.CIFAR100(args.data_dir, train=False, download=True)
    smp.barrier()
    train_set = datasets.CIFAR100(args.data_dir, train=True, transform=transforms_for(True))
    test_set = datasets.CIFAR100(args.data_dir, train=False, transform=transforms_for(False))
    sampler = torch.utils.data.DistributedSampler(
        train_set, num_replicas=smp.dp_size(), rank=smp.dp_rank(), shuffle=True, drop_last=True
    )
    train_loader = torch.utils.data.DataLoader(
        train_set, batch_size=args.batch_size, sampler=sampler, num_workers=4, pin_memory=True, drop_last=True
    )
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=args.batch_size, num_workers=4, drop_last=True)
    return train_loader, test_loader


def run_smp(args):
    smp.init()
    torch.cuda.set_device(smp.local_rank())
    device = torch.device("cuda")
    torch.manual_seed(42)

    train_loader, test_loader = smp_loaders(args)
    model = build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * smp.dp_size(), momentum=args.momentum)
    optimizer = smp.DistributedOptimizer(optimizer)  # expect: SMP110 error
    model = smp.DistributedModel(model)
    scaler = make_scaler(args)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)

    for epoch in range(args.epochs):
        model.train()
        train_loader.sampler.set_epoch(epoch)
        started = time.time()
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            losses = smp_train_step(model, images, labels, scaler)
            scaler.step(optimizer)
            scaler.update()
        scheduler.step()
        correct = smp_evaluate(model, test_loader, device)
        if IS_CHIEF:
            print(f"epoch {epoch}: loss {losses.reduce_mean().item():.3f} accuracy {correct:.3f} ({time.time() - started:.0f}s)")

    if smp.dp_rank() == 0:
        model_dict = model.local_state_dict()
        smp.save({"model": model_dict, "epoch": args.epochs}, os.path.join(args.model_dir, "model.pt"), partial=True)
    smp.barrier()


def smp_evaluate(model, loader, device):
    model.eval()
    correct, seen = 0, 0
    with torch.no_grad():
        for images, labels in loader:
            counts = smp_eval_step(model, images.to(device), labels.to(device))
            correct += sum(count.item() for count in counts.outputs)
            seen += labels.size(0)
    return correct / max(seen, 1)


# -- plain data parallelism --------------------------------------------------------------------
def run_data_parallel(args):
    local_rank = backends.local_rank_from_env()
    model = build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    if args.backend == "apex":
        model, optimizer = backends.apex_setup(model, optimizer, args.opt_level)
        scaler = None
    else:
        model, optimizer = backends.ddp_setup(model, optimizer, local_rank)
        scaler = make_scaler(args)
    train_set = datasets.CIFAR100(args.data_dir, train=True, download=False, transform=transforms_for(True))
    loader = backends.data_parallel_loader(train_set, args.batch_size)
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for images, labels in loader:
            images, labels = images.cuda(local_rank), labels.cuda(local_rank)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            if scaler is None:
                backends.apex_backward(loss, optimizer)
                optimizer.step()
            else:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()


def main():
    args = parse_args()
    if args.backend == "smp":
        run_smp(args)
    else:
        run_data_parallel(args)


if __name__ == "__main__":
    main()
