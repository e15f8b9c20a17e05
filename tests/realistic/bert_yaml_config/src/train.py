"""BERT-large fine-tuning on SST-2 with tensor parallelism (SMP v1)."""

import argparse
import os

import smdistributed.modelparallel.torch as smp
import torch
from torch.utils.data import DataLoader, DistributedSampler
from transformers import BertConfig, BertForSequenceClassification

from dataset import load_sst2


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--data-dir", default=os.environ.get("SM_CHANNEL_TRAIN", "data"))
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "model"))
    return parser.parse_args()


@smp.step
def train_step(model, input_ids, attention_mask, labels):
    output = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    model.backward(output.loss)
    return output.loss


def main():
    args = parse_args()
    smp.init()
    torch.cuda.set_device(smp.local_rank())

    dataset = load_sst2(args.data_dir)
    sampler = DistributedSampler(dataset, num_replicas=smp.dp_size(), rank=smp.dp_rank(), shuffle=True)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    model = BertForSequenceClassification(BertConfig.from_pretrained("bert-large-uncased", num_labels=2))
    model = smp.DistributedModel(model)
    optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=args.lr))

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            optimizer.zero_grad()
            losses = train_step(model, batch["input_ids"].cuda(), batch["attention_mask"].cuda(), batch["labels"].cuda())
            optimizer.step()
        if smp.dp_rank() == 0:  # expect: SMP301 error
            smp.save(model.local_state_dict(), os.path.join(args.model_dir, f"model_{epoch}.pt"), partial=True)


if __name__ == "__main__":
    main()
