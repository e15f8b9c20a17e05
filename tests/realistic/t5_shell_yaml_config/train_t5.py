"""T5 pre-training with SMP v1 pipeline parallelism; settings come from a YAML file."""

import argparse

import smdistributed.modelparallel.torch as smp
import torch
import yaml
from torch.utils.data import DataLoader, DistributedSampler
from transformers import T5Config, T5ForConditionalGeneration

from corpus import SpanCorruptionCorpus


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="configs/pipeline_4x2.yaml")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--data", default="/data/c4")
    return parser.parse_args()


@smp.step
def train_step(model, batch):
    output = model(input_ids=batch["input_ids"], labels=batch["labels"])
    model.backward(output.loss)
    return output.loss


def main():
    args = parse_args()
    with open(args.config) as handle:
        config = yaml.safe_load(handle)
    smp.init(config["smp"])
    torch.cuda.set_device(smp.local_rank())

    corpus = SpanCorruptionCorpus(args.data)
    sampler = DistributedSampler(  # expect: SMP202 error
        corpus, num_replicas=smp.size(), rank=smp.rank()
    )
    loader = DataLoader(corpus, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    model = smp.DistributedModel(T5ForConditionalGeneration(T5Config.from_pretrained("t5-large")))
    optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=config["optimizer"]["lr"]))

    step = 0
    while step < args.steps:
        for batch in loader:
            batch = {key: value.cuda() for key, value in batch.items()}
            optimizer.zero_grad()
            train_step(model, batch)
            optimizer.step()
            step += 1
            if step >= args.steps:
                break


if __name__ == "__main__":
    main()
