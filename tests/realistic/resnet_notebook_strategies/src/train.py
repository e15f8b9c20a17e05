"""Fine-tunes a ResNet-50 on an image folder, split into pipeline stages by the library."""

import argparse
import os

import parallel_utils as pu
import smdistributed.modelparallel.torch as smp
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, models, transforms


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--model_parallel", type=bool, default=False)
    parser.add_argument("--data_parallel", type=bool, default=False)
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    parser.add_argument("--data-dir", default=os.environ.get("SM_CHANNEL_TRAINING", "/opt/ml/input"))
    return parser.parse_args()


@smp.step
def train_step(model, images, labels):
    logits = model(images)
    loss = F.cross_entropy(logits, labels)
    model.backward(loss)
    return loss


@smp.step
def eval_step(model, images, labels):
    logits = model(images)
    return (logits.argmax(dim=1) == labels).float().mean()


def evaluate(model, loader, device):
    model.eval()
    scores = []
    with torch.no_grad():
        for images, labels in loader:
            accuracy = eval_step(model, images.to(device), labels.to(device))
            scores.append(accuracy.reduce_mean().item())
    model.train()
    return sum(scores) / max(len(scores), 1)


def loaders(args):
    normalize = transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    train_set = datasets.ImageFolder(
        os.path.join(args.data_dir, "train"),
        transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor(), normalize]),
    )
    val_set = datasets.ImageFolder(
        os.path.join(args.data_dir, "val"),
        transforms.Compose([transforms.CenterCrop(224), transforms.ToTensor(), normalize]),
    )
    sampler = DistributedSampler(train_set, num_replicas=smp.dp_size(), rank=smp.dp_rank())
    train_loader = DataLoader(train_set, args.batch_size, sampler=sampler, drop_last=True)
    val_loader = DataLoader(val_set, args.batch_size, drop_last=True)
    return sampler, train_loader, val_loader


def main():
    args = pu.setup(parse_args())
    device = torch.device("cuda")
    sampler, train_loader, val_loader = loaders(args)

    model = models.resnet50(pretrained=True)
    model.fc = nn.Linear(model.fc.in_features, 37)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    model = smp.DistributedModel(model.to(device))
    optimizer = smp.DistributedOptimizer(optimizer)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for images, labels in train_loader:
            optimizer.zero_grad()
            loss = train_step(model, images.to(device), labels.to(device))
            optimizer.step()
        if args.rank == 0:
            print(f"epoch {epoch}: loss {loss.reduce_mean().item():.4f}")
            print(f"validation accuracy {evaluate(model, val_loader, device):.3f}")  # expect: SMP302 hint
        pu.save_checkpoint(model, optimizer, epoch, args)


if __name__ == "__main__":
    main()
