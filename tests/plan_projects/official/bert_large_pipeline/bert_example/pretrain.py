"""BERT pre-training (masked LM and next sentence) split into two pipeline partitions."""

import argparse
import glob
import os

import h5py
import smdistributed.modelparallel.torch as smp
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler
from transformers import BertConfig, BertForPreTraining


class PretrainingShard(Dataset):
    def __init__(self, path):
        with h5py.File(path, "r") as handle:
            self.inputs = [handle[key][:] for key in ("input_ids", "input_mask", "segment_ids")]
            self.labels = handle["masked_lm_ids"][:]

    def __len__(self):
        return len(self.inputs[0])

    def __getitem__(self, index):
        ids, mask, segments = (torch.from_numpy(t[index]).long() for t in self.inputs)
        return ids, mask, segments, torch.from_numpy(self.labels[index]).long()


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--input_dir", type=str, required=True)
    parser.add_argument("--output_dir", type=str, required=True)
    parser.add_argument("--config_file", type=str, required=True, help="the BERT model config")
    parser.add_argument("--bert_model", type=str, default="bert-large-uncased")
    parser.add_argument("--max_seq_length", type=int, default=512)
    parser.add_argument("--max_predictions_per_seq", type=int, default=80)
    parser.add_argument("--train_batch_size", type=int, default=32)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--max_steps", type=int, default=1000)
    parser.add_argument("--warmup_proportion", type=float, default=0.01)
    parser.add_argument("--num_steps_per_checkpoint", type=int, default=100)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--fp16", type=int, default=0)
    parser.add_argument("--do_train", type=int, default=0)
    return parser.parse_args()


@smp.step
def train_step(model, ids, mask, segments, labels):
    loss = model(
        input_ids=ids, attention_mask=mask, token_type_ids=segments, labels=labels
    ).loss
    model.backward(loss)
    return loss


def main():
    args = parse_args()
    if args.train_batch_size % args.gradient_accumulation_steps != 0:
        raise ValueError("train_batch_size must be a multiple of gradient_accumulation_steps")
    args.train_batch_size = args.train_batch_size // args.gradient_accumulation_steps

    smp.init()
    torch.manual_seed(args.seed + smp.dp_rank())
    torch.cuda.set_device(smp.local_rank())

    config = BertConfig.from_json_file(args.config_file)
    model = BertForPreTraining(config)
    model = smp.DistributedModel(model)
    optimizer = smp.DistributedOptimizer(
        torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    )

    files = sorted(glob.glob(os.path.join(args.input_dir, "*.hdf5")))
    model.train()
    step = 0
    for path in files:
        shard = PretrainingShard(path)
        loader = DataLoader(
            shard,
            sampler=RandomSampler(shard),
            batch_size=args.train_batch_size,
            drop_last=True,
            num_workers=4,
        )
        for ids, mask, segments, labels in loader:
            optimizer.zero_grad()
            loss = train_step(model, ids, mask, segments, labels)
            optimizer.step()
            step += 1
            if smp.rank() == 0 and step % args.num_steps_per_checkpoint == 0:
                print(f"step {step} loss {loss.reduce_mean().item():.4f}")
            if step >= args.max_steps:
                return


if __name__ == "__main__":
    main()
