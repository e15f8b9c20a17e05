"""GPT-2 pretraining as the launcher notebook ../launch_gpt2.ipynb configures it (tensor parallel)."""

import argparse
import os

import smdistributed.modelparallel.torch as smp
import torch
from torch.utils.data import DataLoader, TensorDataset
from transformers import GPT2Config, GPT2LMHeadModel


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--train-dir", default=os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    return parser.parse_args()


@smp.step
def forward_backward(model, input_ids):
    loss = model(input_ids=input_ids, labels=input_ids)["loss"]
    model.backward(loss)
    return loss


def train(args):
    torch.manual_seed(args.seed)
    model = smp.DistributedModel(GPT2LMHeadModel(GPT2Config()))
    optimizer = smp.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=3e-4))
    tokens = torch.load(os.path.join(args.train_dir, "tokens.pt"))
    sampler = torch.utils.data.DistributedSampler(tokens, num_replicas=smp.dp_size(), rank=smp.dp_rank())
    loader = DataLoader(TensorDataset(tokens), batch_size=args.batch_size, sampler=sampler)
    for _ in range(args.epochs):
        for (input_ids,) in loader:
            forward_backward(model, input_ids).reduce_mean()
            optimizer.step()
            optimizer.zero_grad()
    if smp.dp_rank() == 0:
        smp.save({"model": model.local_state_dict()}, "/opt/ml/model/gpt2.pt", partial=True)


if __name__ == "__main__":
    smp.init()
    torch.cuda.set_device(smp.local_rank())
    train(parse_args())
