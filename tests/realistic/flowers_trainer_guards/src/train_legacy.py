"""The first version of the flowers trainer, kept for comparison runs: plain functions, the
model-parallel settings read from the `--mp_parameters` string SageMaker passes."""

import argparse
import os

import smdistributed.modelparallel.torch as smp
import torch
import torch.nn.functional as F
from torch.optim.lr_scheduler import StepLR
from torchvision import datasets, transforms

from models import build_resnet


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--mp_parameters", default="")
    return parser.parse_known_args()


@smp.step
def train_step(model, images, labels):
    loss = F.cross_entropy(model(images), labels)
    model.backward(loss)
    return loss


def main():
    args, _ = parse_args()
    mp_settings = dict(item.split("=") for item in args.mp_parameters.split(",") if item)
    smp.init()
    if not torch.cuda.is_available():
        raise ValueError("CUDA is required")
    torch.cuda.set_device(smp.local_rank())

    model, input_size = build_resnet(5, pretrained=False)
    model = smp.DistributedModel(model)
    optimizer = smp.DistributedOptimizer(torch.optim.Adadelta(model.parameters(), lr=1.0))
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)

    tf = transforms.Compose([transforms.RandomResizedCrop(input_size), transforms.ToTensor()])
    data = datasets.ImageFolder(os.environ["SM_CHANNEL_TRAIN"], tf)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True)
    for epoch in range(args.epochs):
        for images, labels in loader:
            optimizer.zero_grad()
            train_step(model, images.cuda(), labels.cuda())
            optimizer.step()
        scheduler.step()
        print(f"epoch {epoch} done with {mp_settings}")

    if smp.rank() == 0:
        smp.save(  # expect: SMP303 warning
            {"model": model.local_state_dict(), "optimizer": optimizer.local_state_dict()},  # expect: SMP307 hint
            os.path.join(os.environ["SM_MODEL_DIR"], "checkpoint.pt"),
            partial=True,
        )


if __name__ == "__main__":
    main()
