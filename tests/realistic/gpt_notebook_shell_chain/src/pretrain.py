"""GPT-2 pre-training with pipeline parallelism (SMP v1), started by scripts/pretrain.sh."""

import argparse
import os

import smdistributed.modelparallel.torch as smp
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from data import build_loader

def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--checkpoint-dir", default="checkpoints")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-4)
    return parser.parse_args()


@smp.step
def train_step(model, inputs, labels):
    output = model(input_ids=inputs, labels=labels)
    model.backward(output.loss)
    return output.loss


def main():
    args = parse_args()
    smp.init({"pipeline_parallel_degree": 2, "microbatches": 4, "ddp": True})
    torch.cuda.set_device(smp.local_rank())
    torch.manual_seed(1234)

    sampler, loader = build_loader(os.path.join(args.data_dir, "blocks.npy"), args.batch_size)
    model = smp.DistributedModel(GPT2LMHeadModel(GPT2Config(n_layer=24, n_embd=1024, n_head=16)))
    optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=args.lr))

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for step, (inputs, labels) in enumerate(loader):
            inputs, labels = inputs.cuda(), labels.cuda()
            optimizer.zero_grad(set_to_none=True)
            losses = train_step(model, inputs, labels)
            optimizer.step()
            if smp.rank() == 0 and step % 50 == 0:
                print(f"epoch {epoch} step {step}: loss {losses.reduce_mean().item():.4f}")
        if smp.rank() == 0:
            smp.save_checkpoint(  # expect: SMP302 error
                args.checkpoint_dir, tag=f"epoch_{epoch}", partial=True, model=model, optimizer=optimizer
            )


if __name__ == "__main__":
    main()
