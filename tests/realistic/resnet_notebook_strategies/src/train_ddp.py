"""The same fine-tuning with PyTorch DistributedDataParallel over SageMaker's data parallelism."""

import argparse
import os

import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401  (registers the smddp backend)
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, models, transforms


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--data-dir", default=os.environ.get("SM_CHANNEL_TRAINING", "/opt/ml/input"))
    args, _ = parser.parse_known_args()

    dist.init_process_group(backend="smddp")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    dataset = datasets.ImageFolder(
        os.path.join(args.data_dir, "train"),
        transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()]),
    )
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, args.batch_size, sampler=sampler, drop_last=True)
    model = models.resnet50(pretrained=True)
    model.fc = nn.Linear(model.fc.in_features, 37)
    model = DistributedDataParallel(model.cuda(), device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(images.cuda()), labels.cuda()).backward()
            optimizer.step()


if __name__ == "__main__":
    main()
