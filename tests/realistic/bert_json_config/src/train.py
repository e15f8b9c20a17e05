"""Fine-tunes BERT on MNLI with the encoder split into two pipeline stages."""

import argparse

import smdistributed.modelparallel.torch as smp
import torch
from torch.utils.data import DataLoader, DistributedSampler
from transformers import AutoModelForSequenceClassification


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-5)
    return parser.parse_args()


@smp.step
def train_step(model, batch):
    loss = model(**batch).loss
    model.backward(loss)
    return loss


def main():
    args = parse_args()
    smp.init()
    torch.cuda.set_device(smp.local_rank())
    dataset = torch.load("/opt/ml/input/data/train/mnli.pt")
    sampler = DistributedSampler(dataset)  # expect: SMP202 error
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=3)
    model = smp.DistributedModel(model)
    optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=args.lr))
    for _ in range(args.epochs):
        for batch in loader:
            batch = {key: value.cuda() for key, value in batch.items()}
            optimizer.zero_grad()
            train_step(model, batch)
            optimizer.step()


if __name__ == "__main__":
    main()
