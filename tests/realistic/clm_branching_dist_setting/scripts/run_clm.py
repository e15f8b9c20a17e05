"""Continues pre-training GPT-Neo on a tokenized corpus.

The same script runs under SageMaker model parallelism and under torchrun; ``--dist-backend``
picks the set-up in ``utils.dist_setting``.
"""

import argparse
import os

import torch
from datasets import load_from_disk
from torch.utils.data import DataLoader, DistributedSampler
from transformers import AutoConfig, AutoModelForCausalLM

from utils.dist_setting import dist_setting, init_backend, log_rank_zero, smp_model, smp_optimizer
from utils.steps import lm_step


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dist-backend", type=str, default=os.environ.get("DIST_BACKEND"))
    parser.add_argument("--model-name", type=str, default="EleutherAI/gpt-neo-1.3B")
    parser.add_argument("--max-steps", type=int, default=5000)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--data-dir", type=str, default=os.environ.get("SM_CHANNEL_TRAIN"))
    return parser.parse_args()


def main():
    args = parse_args()
    init_backend(args)
    args = dist_setting(args)

    corpus = load_from_disk(args.data_dir).with_format("torch")
    sampler = DistributedSampler(corpus, num_replicas=args.world_size, rank=args.rank, seed=7)  # expect: SMP202 error
    loader = DataLoader(corpus, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    config = AutoConfig.from_pretrained(args.model_name)
    model = AutoModelForCausalLM.from_config(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    model = smp_model(model)
    optimizer = smp_optimizer(optimizer)

    step = 0
    model.train()
    while step < args.max_steps:
        for batch in loader:
            optimizer.zero_grad()
            loss = lm_step(model, batch["input_ids"].cuda(), batch["attention_mask"].cuda())
            optimizer.step()
            step += 1
            if step % 100 == 0:
                log_rank_zero(f"step {step}: loss {loss.reduce_mean().item():.4f}")
            if step >= args.max_steps:
                break


if __name__ == "__main__":
    main()
