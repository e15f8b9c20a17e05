"""MNIST over two pipeline stages; the integration test configures the job."""

import argparse

import smdistributed.modelparallel.torch as smp
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 32, 3, 1)
        self.fc = nn.Linear(5408, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        return F.log_softmax(self.fc(torch.flatten(x, 1)), 1)


@smp.step
def train_step(model, data, target):
    output = model(data)
    loss = F.nll_loss(output, target)
    model.backward(loss)
    return loss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--data-dir", default="data")
    parser.add_argument("--assert-losses", type=int, default=0)
    args = parser.parse_args()

    smp.init()
    torch.cuda.set_device(smp.local_rank())
    dataset = datasets.MNIST(args.data_dir, train=True, download=False, transform=transforms.ToTensor())
    loader = DataLoader(dataset, batch_size=args.batch_size, drop_last=True)
    model = smp.DistributedModel(Net())
    optimizer = smp.DistributedOptimizer(torch.optim.Adadelta(model.parameters(), lr=1.0))
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    for _ in range(args.epochs):
        for data, target in loader:
            train_step(model, data, target).reduce_mean()
            optimizer.step()
        scheduler.step()
    if smp.dp_rank() == 0:
        model_dict = model.local_state_dict()
        opt_dict = optimizer.local_state_dict()
        smp.save({"model": model_dict, "optimizer": opt_dict}, "/opt/ml/model/partial.pt", partial=True)


if __name__ == "__main__":
    main()
