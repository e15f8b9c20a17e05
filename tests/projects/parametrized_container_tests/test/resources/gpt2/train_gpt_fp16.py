"""A small GPT-2 in fp16 with tensor parallelism; the integration test configures the job."""

import smdistributed.modelparallel.torch as smp
import torch
from transformers import GPT2Config, GPT2LMHeadModel


@smp.step
def train_step(model, input_ids):
    loss = model(input_ids=input_ids, labels=input_ids)["loss"]
    model.backward(loss)
    return loss


def main():
    smp.init()
    torch.cuda.set_device(smp.local_rank())
    with smp.tensor_parallelism():
        model = GPT2LMHeadModel(GPT2Config())
    model = smp.DistributedModel(model)
    optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-4))
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=100)
    for _ in range(10):
        train_step(model, torch.randint(0, 50257, (8, 128)).cuda())
        optimizer.step()
        scheduler.step()


if __name__ == "__main__":
    main()
