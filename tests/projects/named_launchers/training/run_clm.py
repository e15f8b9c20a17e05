"""Causal language model training with tensor and pipeline parallelism (set by ops/submit_clm.py)."""

import smdistributed.modelparallel.torch as smp
import torch
from torch.utils.data import DataLoader
from transformers import AutoConfig, AutoModelForCausalLM


@smp.step
def train_step(model, input_ids):
    loss = model(input_ids=input_ids, labels=input_ids)["loss"]
    model.backward(loss)
    return loss


def main():
    smp.init()
    torch.manual_seed(1234)
    config = AutoConfig.from_pretrained("gpt2")
    with smp.model_creation(tensor_parallelism=True):
        model = AutoModelForCausalLM.from_config(config)
    model = smp.DistributedModel(model)
    optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=5e-5))
    loader = DataLoader(torch.load("/opt/ml/input/data/train/tokens.pt"), batch_size=4, drop_last=True)
    for input_ids in loader:
        train_step(model, input_ids).reduce_mean()
        optimizer.step()
    if smp.dp_rank() == 0:
        model_dict = model.state_dict()
        torch.save(model_dict, "/opt/ml/model/model.pt")


if __name__ == "__main__":
    main()
