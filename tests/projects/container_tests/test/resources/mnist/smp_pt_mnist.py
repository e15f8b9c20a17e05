"""MNIST with pipeline parallelism over two partitions (the integration test sets the job)."""

import argparse

import smdistributed.modelparallel.torch as smp
import torch
import torch.nn as nn
import torch.nn.functional as F
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
    parser.add_argument("--data-dir", default="data")
    args = parser.parse_args()

    smp.init()
    torch.cuda.set_device(smp.local_rank())
    dataset = datasets.MNIST(args.data_dir, train=True, download=False, transform=transforms.ToTensor())
    sampler = torch.utils.data.DistributedSampler(dataset, num_replicas=smp.dp_size(), rank=smp.dp_rank())
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    model = smp.DistributedModel(Net())
    optimizer = smp.DistributedOptimizer(torch.optim.Adadelta(model.parameters(), lr=1.0))
    for data, target in loader:
        train_step(model, data, target).reduce_mean()
        optimizer.step()
    if smp.rank() == 0:
        torch.save(model.state_dict(), "/opt/ml/model/mnist.pt")


if __name__ == "__main__":
    main()
