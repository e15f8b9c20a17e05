"""Pipeline-parallel ViT training on SageMaker with the model parallelism library (v1)."""

import argparse
import os

import smdistributed.modelparallel.torch as smp
import torch
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, transforms
from torchvision.models import vit_b_16

from dist_utils import init_distributed, is_main_process
from engine import evaluate, train_one_epoch


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--data-dir", default=os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    parser.add_argument("--checkpoint-dir", default="/opt/ml/checkpoints")
    return parser.parse_args()


def loaders(args):
    preprocess = transforms.Compose([transforms.Resize(224), transforms.ToTensor()])
    train_set = datasets.ImageFolder(os.path.join(args.data_dir, "train"), preprocess)
    val_set = datasets.ImageFolder(os.path.join(args.data_dir, "val"), preprocess)
    sampler = DistributedSampler(train_set, num_replicas=args.world_size, rank=args.rank, shuffle=True)  # expect: SMP202 error
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=args.batch_size, drop_last=True)
    return sampler, train_loader, val_loader


def main():
    args = parse_args()
    init_distributed(args)
    device = torch.device("cuda", args.local_rank)
    sampler, train_loader, val_loader = loaders(args)

    model = smp.DistributedModel(vit_b_16(num_classes=1000))
    optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=args.lr))

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        loss = train_one_epoch(model, optimizer, train_loader, device)
        if is_main_process(smp.rank()):
            print(f"epoch {epoch}: loss {loss:.4f}")
            accuracy = evaluate(model, val_loader, device)  # expect: SMP302 error
            print(f"epoch {epoch}: accuracy {accuracy:.3f}")
        if is_main_process(smp.rank()):
            smp.save_checkpoint(args.checkpoint_dir, tag=f"epoch_{epoch}", partial=True, model=model, optimizer=optimizer)  # expect: SMP302 error
    final_accuracy = evaluate(model, val_loader, device)
    if is_main_process(smp.rank()):
        print(f"final accuracy {final_accuracy:.3f}")


if __name__ == "__main__":
    main()
