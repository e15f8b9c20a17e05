"""Train a small GPT; the job (tensor parallelism, microbatches) is set by jobs/launch_gpt.py."""

import argparse

import smdistributed.modelparallel.torch as smp
import torch
from torch.utils.data import DataLoader

from model import GPT, TokenDataset


@smp.step
def train_step(model, input_ids, labels):
    loss = model(input_ids, labels)
    model.backward(loss)
    return loss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--data", default="/opt/ml/input/data/train")
    args = parser.parse_args()

    smp.init()
    torch.cuda.set_device(smp.local_rank())
    model = smp.DistributedModel(GPT())
    optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-4))
    loader = DataLoader(TokenDataset(args.data), batch_size=args.batch_size, shuffle=True)
    for input_ids, labels in loader:
        train_step(model, input_ids, labels).reduce_mean()
        optimizer.step()
        optimizer.zero_grad()
    if smp.dp_rank() == 0:
        smp.save(model.local_state_dict(), "/opt/ml/model/model.pt", partial=True)


if __name__ == "__main__":
    main()
