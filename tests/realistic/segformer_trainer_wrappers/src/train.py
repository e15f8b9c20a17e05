"""Fine-tunes a SegFormer-style model on ADE20K under whatever backend ``--backend`` names."""

import argparse
import os

import torch
from torch.utils.data import DataLoader, DistributedSampler
from transformers import SegformerForSemanticSegmentation

from trainer.distributed import is_main_process, seed_everything, setup, wrap_model, wrap_optimizer
from trainer.metrics import mean_iou
from trainer.steps import train_step
from data import ADE20KDataset


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", type=str, default="smp", choices=["smp", "horovod", "none"])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=6e-5)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--checkpoint-dir", type=str, default="/opt/ml/checkpoints")
    parser.add_argument("--train-dir", type=str, default=os.environ.get("SM_CHANNEL_TRAIN"))
    return parser.parse_args()


def main():
    args = parse_args()
    device = setup(args)
    seed_everything(args.seed)

    dataset = ADE20KDataset(args.train_dir, split="training")
    sampler = DistributedSampler(dataset, num_replicas=args.world_size, rank=args.rank)  # expect: SMP202 error
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    model = SegformerForSemanticSegmentation.from_pretrained(
        "nvidia/mit-b2", num_labels=150, ignore_mismatched_sizes=True
    )
    model = wrap_model(model)
    optimizer = wrap_optimizer(torch.optim.AdamW(model.parameters(), lr=args.lr))

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            logits, loss = train_step(model, images, labels)
            optimizer.step()
        if is_main_process():
            iou = mean_iou(logits.concat(), labels, 150).item()
            print(f"epoch {epoch}: loss {loss.reduce_mean().item():.4f} iou {iou:.3f}")
            torch.save(model.state_dict(), os.path.join(args.checkpoint_dir, "model.pt"))  # expect: SMP302 error


if __name__ == "__main__":
    main()
