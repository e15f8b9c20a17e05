"""Fine-tunes GPT-J with tensor parallelism; the switches are dataclass fields."""

import os

import smdistributed.modelparallel.torch as smp
import torch
from transformers import AutoModelForCausalLM, HfArgumentParser

from gptj_arguments import ModelArguments, TrainingArgs


@smp.step
def train_step(model, input_ids):
    loss = model(input_ids=input_ids, labels=input_ids)["loss"]
    model.backward(loss)
    return loss


def main():
    model_args, training_args = HfArgumentParser((ModelArguments, TrainingArgs)).parse_args_into_dataclasses()
    smp.init({"tensor_parallel_degree": 8, "ddp": True, "fp16": training_args.fp16})
    with smp.tensor_parallelism():
        model = AutoModelForCausalLM.from_config(AutoModelForCausalLM.config_class())
    model = smp.DistributedModel(model)
    optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=training_args.learning_rate))
    batches = [torch.randint(0, 50400, (2, 512)) for _ in range(8)]
    for _ in range(training_args.epochs):
        for input_ids in batches:
            optimizer.zero_grad()
            train_step(model, input_ids).reduce_mean()
            optimizer.step()
    smp.save_checkpoint(training_args.output_dir, tag="final", partial=True, model=model, optimizer=optimizer)
    if training_args.full_optimizer_state:
        state = optimizer.state_dict()  # expect: SMP303 hint
        if smp.rank() == 0:
            torch.save(state, os.path.join(training_args.output_dir, "optimizer.pt"))


if __name__ == "__main__":
    main()
