"""Fine-tunes BERT-large for sequence classification with two pipeline stages per replica."""

import argparse
import os

import torch
from datasets import load_from_disk
from torch.utils.data import DataLoader, DistributedSampler
from transformers import BertForSequenceClassification

from common.parallel import (
    data_parallel_rank,
    data_parallel_size,
    distribute,
    distribute_optimizer,
    init_model_parallel,
    is_first_rank,
    is_replica_leader,
    seed_everything,
)
from common.steps import eval_step, train_step


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--data-dir", type=str, default=os.environ.get("SM_CHANNEL_DATA"))
    parser.add_argument("--model-dir", type=str, default=os.environ.get("SM_MODEL_DIR"))
    return parser.parse_args()


def loader_for(dataset, batch_size, shuffle):
    sampler = DistributedSampler(
        dataset,
        num_replicas=data_parallel_size(),
        rank=data_parallel_rank(),
        shuffle=shuffle,
    )
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True), sampler


def main():
    args = parse_args()
    device = init_model_parallel()
    seed_everything(args.seed)

    data = load_from_disk(args.data_dir).with_format("torch")
    train_loader, train_sampler = loader_for(data["train"], args.batch_size, shuffle=True)
    eval_loader, _ = loader_for(data["validation"], args.batch_size, shuffle=False)

    model = BertForSequenceClassification.from_pretrained("bert-large-uncased", num_labels=2)
    model = distribute(model)
    optimizer = distribute_optimizer(torch.optim.AdamW(model.parameters(), lr=args.lr))

    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        model.train()
        for batch in train_loader:
            optimizer.zero_grad()
            loss = train_step(
                model,
                batch["input_ids"].to(device),
                batch["attention_mask"].to(device),
                batch["label"].to(device),
            )
            optimizer.step()

        model.eval()
        losses = []
        with torch.no_grad():
            for batch in eval_loader:
                loss = eval_step(
                    model,
                    batch["input_ids"].to(device),
                    batch["attention_mask"].to(device),
                    batch["label"].to(device),
                )
                losses.append(loss.reduce_mean())
        if is_first_rank():
            print(f"epoch {epoch}: eval loss {torch.stack(losses).mean().item():.4f}")

    if is_replica_leader():
        state = model.state_dict()
        if is_first_rank():
            torch.save(state, os.path.join(args.model_dir, "model.pt"))


if __name__ == "__main__":
    main()
