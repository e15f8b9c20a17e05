"""Pre-trains (``--do_train 1``) or evaluates (the default) a BERT encoder with the library."""

import argparse

import smdistributed.modelparallel.torch as smp
import torch

from modeling import Encoder, EncoderConfig


def parse_arguments():
    parser = argparse.ArgumentParser()
    parser.add_argument("--do_train", type=int, default=0)
    parser.add_argument("--smp", type=int, default=0)
    parser.add_argument("--shard_optimizer_state", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=1)
    return parser.parse_args()


@smp.step
def train_step(model, batch):
    loss = model(batch).sum()
    model.backward(loss)
    return loss


def evaluate(model, batches):
    """Plain forward passes: the evaluation-only mode (``--do_train 0``)."""
    total = 0.0
    for batch in batches:
        total += model(batch).sum().item()  # expect: SMP403 hint
    return total


def plain_step(model, batch):
    """Training without the library (``--smp 0``)."""
    loss = model(batch).sum()
    loss.backward()
    return loss


def save_optimizer(optimizer, args):
    if args.shard_optimizer_state > 0:
        print("The sharded optimizer state is saved with local_state_dict only.")
    elif smp.rdp_rank() == 0:
        torch.save(optimizer.state_dict(), "/opt/ml/checkpoints/optimizer.pt")


def main():
    args = parse_arguments()
    if args.smp > 0:
        smp.init({"shard_optimizer_state": args.shard_optimizer_state > 0})
    model = Encoder(EncoderConfig())
    if args.smp > 0:
        model = smp.DistributedModel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if args.smp > 0:
        optimizer = smp.DistributedOptimizer(optimizer)
    batches = [torch.randn(8, 768) for _ in range(16)]
    if args.do_train:
        for _ in range(args.epochs):
            for batch in batches:
                optimizer.zero_grad()
                if args.smp > 0:
                    train_step(model, batch)
                else:
                    plain_step(model, batch)
                optimizer.step()
        save_optimizer(optimizer, args)
    else:
        print("eval loss", evaluate(model, batches))


if __name__ == "__main__":
    main()
