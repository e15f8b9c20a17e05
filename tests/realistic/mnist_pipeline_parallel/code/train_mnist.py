"""MNIST with pipeline parallelism: two partitions, four microbatches per batch."""

import argparse
import os
import time

import smdistributed.modelparallel.torch as smp
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torchvision import datasets, transforms

from net import Net


def parse_args():
    parser = argparse.ArgumentParser(description="MNIST with SMP")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--test-batch-size", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=14)
    parser.add_argument("--lr", type=float, default=4.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--save-model", action="store_true", default=False)
    parser.add_argument("--data-dir", type=str, default=os.environ.get("SM_CHANNEL_TRAINING", "/opt/ml/input/data/training"))
    return parser.parse_args()


@smp.step
def train_step(model, data, target):
    output = model(data)
    loss = F.nll_loss(output, target, reduction="mean")
    model.backward(loss)
    return output, loss


@smp.step
def test_step(model, data, target):
    output = model(data)
    loss = F.nll_loss(output, target, reduction="sum").item()
    pred = output.argmax(dim=1, keepdim=True)
    correct = pred.eq(target.view_as(pred)).sum().item()
    return loss, correct


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        _, loss_mb = train_step(model, data, target)
        loss = loss_mb.reduce_mean()
        optimizer.step()
        if smp.rank() == 0 and batch_idx % args.log_interval == 0:
            print(
                f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)}]"
                f"\tLoss: {loss.item():.6f}"
            )


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            loss_batch, correct_batch = test_step(model, data, target)
            test_loss += sum(loss_batch)
            correct += sum(correct_batch)
    test_loss /= len(test_loader.dataset)
    if smp.mp_rank() == 0:
        print(f"Test set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{len(test_loader.dataset)}")
    return test_loss


def main():
    args = parse_args()
    smp.init()
    torch.manual_seed(args.seed)
    torch.cuda.set_device(smp.local_rank())
    device = torch.device("cuda")

    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    # Only one process per node downloads; the others wait at the barrier.
    if smp.local_rank() == 0:
        dataset1 = datasets.MNIST(args.data_dir, train=True, download=True, transform=transform)
    smp.barrier()
    dataset1 = datasets.MNIST(args.data_dir, train=True, download=False, transform=transform)
    dataset2 = datasets.MNIST(args.data_dir, train=False, transform=transform)

    sampler = torch.utils.data.distributed.DistributedSampler(
        dataset1, shuffle=True, seed=args.seed, rank=smp.dp_rank(), num_replicas=smp.dp_size(), drop_last=True
    )
    train_loader = torch.utils.data.DataLoader(dataset1, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    # 10000 test images in batches of 1000 come out even: no smaller last batch to drop.
    test_loader = torch.utils.data.DataLoader(dataset2, batch_size=args.test_batch_size)

    model = Net()
    model = smp.DistributedModel(model)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    optimizer = smp.DistributedOptimizer(optimizer)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)

    for epoch in range(1, args.epochs + 1):
        start = time.time()
        train(args, model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()
        if smp.rank() == 0:
            print(f"epoch {epoch} took {time.time() - start:.1f}s")

    if args.save_model:
        if smp.dp_rank() == 0:
            model_dict = model.local_state_dict()
            opt_dict = optimizer.local_state_dict()
            smp.save({"model_state_dict": model_dict, "optimizer_state_dict": opt_dict}, "/opt/ml/model/pt_mnist_checkpoint.pt", partial=True)
        smp.barrier()


if __name__ == "__main__":
    main()
